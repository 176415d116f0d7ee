//! `GET /api/v1/openapi.json`: an OpenAPI 3.1 document that lists every public endpoint,
//! names the `Token` scheme, documents the error body, and matches what the server does
//! (documented routes exist, response schemas have exactly the fields real responses have).

use crate::common::{Engine, TestApp, json};
use serde_json::{Value, json};
use shortlink_store::{ClickEvent, Device, Ingested};
use std::collections::BTreeSet;

/// The public surface: (path, method, needs the Token scheme).
const ENDPOINTS: &[(&str, &str, bool)] = &[
    ("/api/v1/external/links/create-link", "post", true),
    ("/api/v1/external/links", "get", true),
    ("/api/v1/external/links/enabled-domains", "get", true),
    ("/api/v1/external/groups", "get", true),
    ("/api/v1/external/links/{id}/stats", "get", true),
    ("/api/v1/external/groups/{id}/stats", "get", true),
    ("/api/v1/external/stats", "get", true),
    ("/api/v1/external/links/{id}/clicks", "get", true),
    ("/api/v1/external/groups/{id}/clicks", "get", true),
    ("/api/v1/external/clicks", "get", true),
    ("/api/v1/external/audit-log", "get", true),
    ("/api/v1/external/links/export", "get", true),
    ("/api/v1/external/links/import", "post", true),
    ("/api/v1/external/links/imports/{id}", "get", true),
    ("/api/v1/external/tags", "get", true),
    ("/api/v1/external/tags/{name}", "patch", true),
    ("/api/v1/external/tags/{name}", "delete", true),
    ("/api/v1/external/links/{id}", "get", true),
    ("/api/v1/external/links/{id}", "patch", true),
    ("/api/v1/external/links/{id}", "delete", true),
    ("/api/v1/external/links/{id}/qr", "get", true),
    ("/api/v1/external/links/bulk-create", "post", true),
    ("/api/v1/external/groups", "post", true),
    ("/api/v1/external/groups/{id}", "get", true),
    ("/api/v1/external/groups/{id}", "patch", true),
    ("/api/v1/external/groups/{id}", "delete", true),
    ("/api/v1/external/groups/{id}/rotate-key", "post", true),
    ("/api/v1/external/webhooks", "get", true),
    ("/api/v1/external/webhooks", "post", true),
    ("/api/v1/external/webhooks/{id}", "get", true),
    ("/api/v1/external/webhooks/{id}", "patch", true),
    ("/api/v1/external/webhooks/{id}", "delete", true),
    ("/api/v1/external/webhooks/{id}/rotate-secret", "post", true),
    ("/api/v1/external/webhooks/{id}/test", "post", true),
    ("/api/v1/external/webhooks/{id}/deliveries", "get", true),
    (
        "/api/v1/external/webhooks/{id}/deliveries/{event_id}/redeliver",
        "post",
        true,
    ),
    ("/api/v1/public/links/validate-dynamic", "post", false),
    ("/healthz", "get", false),
    ("/api/v1/openapi.json", "get", false),
];

async fn fetch(app: &TestApp) -> Value {
    // No Authorization: the document is public.
    let resp = app
        .client
        .get(app.url("/api/v1/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    let (status, doc) = json(resp).await;
    assert_eq!(status, 200);
    doc
}

/// Follows a local `$ref` (`#/components/...`).
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v["$ref"].as_str() {
        Some(r) => {
            let pointer = r.strip_prefix('#').unwrap();
            doc.pointer(pointer)
                .unwrap_or_else(|| panic!("dangling $ref {r}"))
        }
        None => v,
    }
}

fn property_names(doc: &Value, schema: &Value) -> BTreeSet<String> {
    resolve(doc, schema)["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("no properties in {schema}"))
        .keys()
        .cloned()
        .collect()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// The JSON schema of `status` of `path`/`method`.
fn response_schema<'a>(doc: &'a Value, path: &str, method: &str, status: &str) -> &'a Value {
    let response = &doc["paths"][path][method]["responses"][status];
    assert!(!response.is_null(), "{method} {path} documents no {status}");
    &resolve(doc, response)["content"]["application/json"]["schema"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn document_is_openapi_3_1_with_every_endpoint_and_the_token_scheme() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    let doc = fetch(&app).await;
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["info"]["title"].is_string() && doc["info"]["version"].is_string());

    assert_eq!(
        doc["components"]["securitySchemes"]["Token"],
        json!({"type": "apiKey", "in": "header", "name": "Authorization", "description": "Token <API key>"})
    );
    let documented: BTreeSet<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let expected: BTreeSet<&str> = ENDPOINTS.iter().map(|(p, _, _)| *p).collect();
    assert_eq!(
        documented, expected,
        "internal routes stay out of the document"
    );

    for (path, method, authenticated) in ENDPOINTS {
        let op = &doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path} is not documented");
        assert!(op["operationId"].is_string(), "{method} {path}");
        let security = &op["security"];
        if *authenticated {
            assert_eq!(security, &json!([{"Token": []}]), "{method} {path}");
            // Every management endpoint documents 401 and 403 with the error body.
            for status in ["401", "403", "503"] {
                let schema = response_schema(&doc, path, method, status);
                assert_eq!(
                    schema["$ref"], "#/components/schemas/Error",
                    "{path} {status}"
                );
            }
        } else {
            assert!(
                security.is_null() || security == &json!([{}]),
                "{method} {path} must not require a key: {security}"
            );
        }
        let responses = op["responses"].as_object().unwrap();
        assert!(
            responses.keys().any(|s| s.starts_with('2')),
            "{method} {path} documents no success"
        );
        // Every documented answer has a JSON body (for errors, the error shape), except a 204's empty one and the
        // QR code's images; the statistics are JSON or CSV.
        for (status, response) in responses {
            let content = &resolve(&doc, response)["content"];
            if status == "204" {
                assert!(content.is_null(), "{method} {path} 204 has a body");
                continue;
            }
            if *path == "/api/v1/external/links/{id}/qr" && status == "200" {
                assert_eq!(
                    keys(content),
                    ["image/png", "image/svg+xml"].map(str::to_owned).into()
                );
                continue;
            }
            // The streamed exports: the link export and the raw click exports.
            if (*path == "/api/v1/external/links/export" || path.ends_with("clicks"))
                && status == "200"
            {
                assert_eq!(
                    keys(content),
                    ["application/x-ndjson", "text/csv"]
                        .map(str::to_owned)
                        .into()
                );
                continue;
            }
            if path.ends_with("stats") && status == "200" {
                assert_eq!(
                    keys(content),
                    ["application/json", "text/csv"].map(str::to_owned).into(),
                    "{path}"
                );
            }
            let schema = &content["application/json"]["schema"];
            assert!(
                schema.is_object(),
                "{method} {path} {status} has no JSON body"
            );
            if status.starts_with('4') || (status.starts_with('5') && *path != "/healthz") {
                assert_eq!(
                    schema["$ref"], "#/components/schemas/Error",
                    "{path} {status}"
                );
            }
        }
    }

    // The error body: exactly detail and error_code, both required, codes enumerated.
    let error = &doc["components"]["schemas"]["Error"];
    assert_eq!(error["required"], json!(["detail", "error_code"]));
    assert_eq!(
        property_names(&doc, error),
        BTreeSet::from(["detail".to_owned(), "error_code".to_owned()])
    );
    let codes = resolve(&doc, &error["properties"]["error_code"])["enum"]
        .as_array()
        .unwrap()
        .clone();
    for code in [
        "validation_error",
        "invalid_json",
        "short_code_exists",
        "platform_domain_unavailable",
        "invalid_limit",
        "invalid_offset",
        "invalid_match",
        "invalid_long_url",
        "not_authenticated",
        "permission_denied",
        "not_found",
        "method_not_allowed",
        "payload_too_large",
        "unsupported_media_type",
        "rate_limited",
        "service_unavailable",
        "internal_error",
        "default_group",
    ] {
        assert!(codes.contains(&json!(code)), "{code} is not enumerated");
    }

    // The statuses the README's error table gives each endpoint.
    let create = "/api/v1/external/links/create-link";
    for status in ["201", "400", "401", "403", "413", "415", "429", "503"] {
        response_schema(&doc, create, "post", status);
    }
    let limit_headers = doc["paths"][create]["post"]["responses"]["429"]["headers"]
        .as_object()
        .unwrap();
    assert!(
        limit_headers.contains_key("Retry-After")
            && limit_headers.contains_key("X-RateLimit-Reset")
    );
    let validate = "/api/v1/public/links/validate-dynamic";
    for status in ["200", "400", "413", "415", "429", "503"] {
        response_schema(&doc, validate, "post", status);
    }
    response_schema(&doc, "/api/v1/external/links", "get", "400");
    for path in [
        "/api/v1/external/links/{id}/stats",
        "/api/v1/external/groups/{id}/stats",
    ] {
        response_schema(&doc, path, "get", "404");
    }
    for path in [
        "/api/v1/external/links/{id}/stats",
        "/api/v1/external/groups/{id}/stats",
        "/api/v1/external/stats",
    ] {
        response_schema(&doc, path, "get", "400");
        let names: Vec<&str> = doc["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .filter(|n| *n != "id")
            .collect();
        assert_eq!(names, ["from", "to", "format"], "{path}");
    }

    // Request bodies and the list-links parameters.
    let body = resolve(
        &doc,
        &doc["paths"][create]["post"]["requestBody"]["content"]["application/json"]["schema"],
    );
    assert_eq!(body["required"], json!(["long_url"]));
    assert_eq!(
        property_names(&doc, body),
        [
            "long_url",
            "short_code",
            "group_id",
            "domain_id",
            "expires_at",
            "forward_query",
            "title",
            "tags",
            "rules",
            "ios_url",
            "android_url",
            "password",
            "expired_url",
            "max_clicks",
            "redirect_status",
            "og_title",
            "og_description",
            "og_image"
        ]
        .map(str::to_owned)
        .into()
    );
    let vbody = resolve(
        &doc,
        &doc["paths"][validate]["post"]["requestBody"]["content"]["application/json"]["schema"],
    );
    assert_eq!(vbody["required"], json!(["group_id", "signature"]));
    let params: Vec<(String, Value)> = doc["paths"]["/api/v1/external/links"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap().to_owned(), p["schema"].clone()))
        .collect();
    let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "limit",
            "offset",
            "long_url",
            "match",
            "q",
            "tag",
            "group_id",
            "domain",
            "is_active",
            "sort"
        ]
    );
    assert_eq!(
        (
            params[0].1["minimum"].clone(),
            params[0].1["maximum"].clone()
        ),
        (json!(1), json!(100))
    );
    assert_eq!(params[3].1["enum"], json!(["exact", "startswith"]));
    assert_eq!(params[8].1["enum"], json!(["true", "false"]));
    assert_eq!(
        params[9].1["enum"],
        json!(["created_at", "-created_at", "short_code", "clicks"])
    );
    let id = &doc["paths"]["/api/v1/external/links/{id}/stats"]["get"]["parameters"][0];
    assert_eq!(
        (&id["name"], &id["in"], id["required"].as_bool()),
        (&json!("id"), &json!("path"), Some(true))
    );
    app.stop().await;
}

/// Every documented operation exists (no 404/405 for it), and the methods the document does
/// not list for a path answer 405.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documented_operations_are_the_routes() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    let doc = fetch(&app).await;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let url = app.url(&path.replace("{id}", &uuid::Uuid::new_v4().to_string()));
        for method in ["get", "post", "put", "patch", "delete"] {
            let resp = app
                .client
                .request(method.to_uppercase().parse().unwrap(), &url)
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            if item.get(method).is_some() {
                assert!(
                    status != 404 && status != 405,
                    "{method} {path}: documented but answers {status}"
                );
                // Unauthenticated calls to a management endpoint are refused, as documented.
                let documented = item[method]["responses"]
                    .as_object()
                    .unwrap()
                    .contains_key(&status.to_string());
                assert!(documented, "{method} {path}: {status} is not documented");
            } else {
                assert_eq!(status, 405, "{method} {path} is not documented");
            }
        }
    }
    app.stop().await;
}

/// The response schemas name exactly the fields real responses carry, so the document cannot
/// drift from the handlers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_schemas_match_real_responses() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    let doc = fetch(&app).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;

    let resp = app
        .create(
            &acc.key,
            json!({"long_url": "https://example.com/a", "short_code": "abc"}),
        )
        .await;
    let (s, created) = json(resp).await;
    assert_eq!(s, 201);
    let create = "/api/v1/external/links/create-link";
    let schema = response_schema(&doc, create, "post", "201");
    assert_eq!(keys(&created), property_names(&doc, schema));

    let (s, list) = json(app.get(&acc.key, "/api/v1/external/links").await).await;
    assert_eq!(s, 200);
    let schema = resolve(
        &doc,
        response_schema(&doc, "/api/v1/external/links", "get", "200"),
    );
    assert_eq!(keys(&list), property_names(&doc, schema));
    assert_eq!(
        keys(&list["results"][0]),
        property_names(&doc, &schema["properties"]["results"]["items"])
    );

    for (path, item_field) in [
        ("/api/v1/external/links/enabled-domains", "results"),
        ("/api/v1/external/groups", "results"),
    ] {
        let (s, body) = json(app.get(&acc.key, path).await).await;
        assert_eq!(s, 200);
        let schema = resolve(&doc, response_schema(&doc, path, "get", "200"));
        assert_eq!(keys(&body), property_names(&doc, schema));
        assert_eq!(
            keys(&body[item_field][0]),
            property_names(
                &doc,
                &resolve(&doc, &schema["properties"][item_field])["items"]
            ),
            "{path}"
        );
    }

    let stored = app
        .db
        .record_clicks(
            None,
            vec![ClickEvent {
                host: "sho.rt".to_owned(),
                short_code: Some("abc".to_owned()),
                group_id: acc.default_group_id.clone(),
                at: 1_800_000_000_000,
                country: Some("DE".to_owned()),
                referer_host: Some("news.example".to_owned()),
                device: Device::Desktop,
                id: None,
                ..Default::default()
            }],
        )
        .await
        .unwrap();
    assert_eq!(stored, Ingested::Stored(1));
    for (stats_path, id) in [
        (
            "/api/v1/external/links/{id}/stats",
            created["id"].as_str().unwrap(),
        ),
        (
            "/api/v1/external/groups/{id}/stats",
            acc.default_group_id.as_str(),
        ),
        ("/api/v1/external/stats", ""),
    ] {
        let (s, stats) = json(
            app.get(
                &acc.key,
                &format!(
                    "{}?from=2027-01-01&to=2027-01-31",
                    stats_path.replace("{id}", id)
                ),
            )
            .await,
        )
        .await;
        assert_eq!(s, 200, "{stats}");
        let schema = resolve(&doc, response_schema(&doc, stats_path, "get", "200"));
        assert_eq!(keys(&stats), property_names(&doc, schema), "{stats_path}");
        for list in [
            "by_day",
            "by_country",
            "by_device",
            "by_referrer",
            "by_browser",
            "by_os",
            "by_region",
            "by_city",
        ] {
            assert_eq!(
                keys(&stats[list][0]),
                property_names(&doc, &schema["properties"][list]["items"]),
                "{stats_path} {list}"
            );
        }
    }

    // The link and group routes of the lifecycle issue: (method, path with {id}, id, body, status) → real body.
    let link_id = created["id"].as_str().unwrap();
    let (s, group) = app
        .send(
            reqwest::Method::POST,
            &acc.key,
            "/api/v1/external/groups",
            Some(json!({"name": "G"})),
        )
        .await;
    assert_eq!(s, 201);
    let group_id = group["id"].as_str().unwrap();
    for (method, path, id, body, status) in [
        ("get", "/api/v1/external/links/{id}", link_id, None, "200"),
        (
            "patch",
            "/api/v1/external/links/{id}",
            link_id,
            Some(json!({"forward_query": false})),
            "200",
        ),
        (
            "post",
            "/api/v1/external/groups",
            "",
            Some(json!({"name": "H", "settings": {}})),
            "201",
        ),
        ("get", "/api/v1/external/groups/{id}", group_id, None, "200"),
        (
            "patch",
            "/api/v1/external/groups/{id}",
            group_id,
            Some(json!({"name": "G2"})),
            "200",
        ),
        (
            "post",
            "/api/v1/external/groups/{id}/rotate-key",
            group_id,
            None,
            "200",
        ),
        (
            "get",
            "/api/v1/external/links/{id}",
            "00000000-0000-4000-8000-000000000000",
            None,
            "404",
        ),
        (
            "delete",
            "/api/v1/external/groups/{id}",
            &acc.default_group_id,
            None,
            "400",
        ),
    ] {
        let (s, real) = app
            .send(
                method.to_uppercase().parse().unwrap(),
                &acc.key,
                &path.replace("{id}", id),
                body,
            )
            .await;
        assert_eq!(s.to_string(), status, "{method} {path}: {real}");
        let schema = response_schema(&doc, path, method, status);
        assert_eq!(keys(&real), property_names(&doc, schema), "{method} {path}");
    }
    let bulk = "/api/v1/external/links/bulk-create";
    let (s, real) = app
        .send(
            reqwest::Method::POST,
            &acc.key,
            bulk,
            Some(json!({"links": [{"long_url": "https://example.com/b"}, {"long_url": "http://nope"}]})),
        )
        .await;
    assert_eq!(s, 200, "{real}");
    let schema = resolve(&doc, response_schema(&doc, bulk, "post", "200"));
    assert_eq!(keys(&real), property_names(&doc, schema));
    // Each result is one of the documented outcomes: its fields are exactly one variant's.
    let variants: Vec<BTreeSet<String>> = resolve(&doc, &schema["properties"]["results"]["items"])
        ["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| property_names(&doc, v))
        .collect();
    for result in real["results"].as_array().unwrap() {
        assert!(
            variants.contains(&keys(result)),
            "{result} is none of {variants:?}"
        );
    }
    assert_eq!(
        keys(&real["results"][0]["link"]),
        property_names(&doc, response_schema(&doc, create, "post", "201"))
    );

    // The activity log: the page, a row, and its actor (`email` only for a user, so an API key's has `type` only).
    let audit = "/api/v1/external/audit-log";
    let (s, log) = json(app.get(&acc.key, &format!("{audit}?limit=100")).await).await;
    assert_eq!(s, 200, "{log}");
    let schema = resolve(&doc, response_schema(&doc, audit, "get", "200"));
    assert_eq!(keys(&log), property_names(&doc, schema));
    let row_schema = resolve(&doc, &schema["properties"]["results"]["items"]);
    assert_eq!(keys(&log["results"][0]), property_names(&doc, row_schema));
    let actor = resolve(&doc, &row_schema["properties"]["actor"]);
    assert_eq!(
        property_names(&doc, actor),
        ["email", "type"].map(str::to_owned).into()
    );
    assert_eq!(actor["required"], json!(["type"]));
    assert_eq!(log["results"][0]["actor"], json!({"type": "api_key"}));
    let params: Vec<&str> = doc["paths"][audit]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(params, ["limit", "offset"]);
    response_schema(&doc, audit, "get", "400");

    let (s, health) = json(app.client.get(app.url("/healthz")).send().await.unwrap()).await;
    assert_eq!(s, 200);
    let schema = resolve(&doc, response_schema(&doc, "/healthz", "get", "200"));
    assert_eq!(keys(&health), property_names(&doc, schema));
    assert_eq!(
        keys(&health["publisher"]),
        property_names(&doc, &schema["properties"]["publisher"])
    );

    let (s, error) = json(app.get("slk_nope", "/api/v1/external/groups").await).await;
    assert_eq!(s, 401);
    let schema = response_schema(&doc, "/api/v1/external/groups", "get", "401");
    assert_eq!(keys(&error), property_names(&doc, schema));
    app.stop().await;
}
