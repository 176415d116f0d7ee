//! Titles, tags and the list's search, filters and sort (issue 24), on both engines: every field rule and error
//! code, every filter alone and combined, the sort orders, tag rename / merge / delete, isolation between
//! accounts, the activity log, and that titles and tags never reach the edge (no outbox row).

use crate::common::{Account, Engine, TestApp, assert_error};
use reqwest::Method;
use serde_json::{Value, json};
use shortlink_store::domain::Micros;

const LINKS: &str = "/api/v1/external/links";

async fn pending_outbox(app: &TestApp) -> Vec<String> {
    app.db
        .outbox_batch(10_000)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, k)| k)
        .collect()
}

async fn drain_outbox(app: &TestApp) {
    let ids: Vec<i64> = app
        .db
        .outbox_batch(10_000)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    app.db.outbox_remove(&ids).await.unwrap();
}

async fn create(app: &TestApp, acc: &Account, body: Value) -> Value {
    let (s, b) = app.create_json(&acc.key, body).await;
    assert_eq!(s, 201, "{b}");
    b
}

async fn get_link(app: &TestApp, acc: &Account, id: &str) -> Value {
    let (s, b) = app
        .send(Method::GET, &acc.key, &format!("{LINKS}/{id}"), None)
        .await;
    assert_eq!(s, 200, "{b}");
    b
}

async fn list(app: &TestApp, acc: &Account, query: &str) -> (u16, Value) {
    app.send(Method::GET, &acc.key, &format!("{LINKS}?{query}"), None)
        .await
}

/// The short codes of a list answer, in order, after checking that `total` is `want_total`.
async fn codes(app: &TestApp, acc: &Account, query: &str) -> (i64, Vec<String>) {
    let (s, b) = list(app, acc, query).await;
    assert_eq!(s, 200, "{query}: {b}");
    let codes = b["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["short_code"].as_str().unwrap().to_owned())
        .collect();
    (b["total"].as_i64().unwrap(), codes)
}

async fn audit_rows(app: &TestApp, acc: &Account) -> Vec<Value> {
    let (s, b) = app
        .send(
            Method::GET,
            &acc.key,
            "/api/v1/external/audit-log?limit=100",
            None,
        )
        .await;
    assert_eq!(s, 200, "{b}");
    b["results"].as_array().unwrap().clone()
}

async fn tags(app: &TestApp, acc: &Account) -> Value {
    let (s, b) = app
        .send(Method::GET, &acc.key, "/api/v1/external/tags", None)
        .await;
    assert_eq!(s, 200, "{b}");
    b
}

/// create-link, bulk-create and PATCH accept `title` and `tags` by their rules; listed links carry them.
async fn fields_follow_their_rules(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;

    // Trimmed, merged case-insensitively (first spelling kept), sorted case-insensitively.
    let l = create(
        &app,
        &acc,
        json!({"long_url": "https://example.com/a", "short_code": "one", "title": "  Spring sale  ",
               "tags": [" promo", "Mail", "PROMO", "beta:1.0_x-y"]}),
    )
    .await;
    let id = l["id"].as_str().unwrap();
    let got = get_link(&app, &acc, id).await;
    assert_eq!(got["title"], "Spring sale");
    assert_eq!(got["tags"], json!(["beta:1.0_x-y", "Mail", "promo"]));
    // The account's first spelling wins in later requests.
    let l2 = create(
        &app,
        &acc,
        json!({"long_url": "https://example.com/b", "short_code": "two", "tags": ["MAIL"], "title": "   "}),
    )
    .await;
    let got2 = get_link(&app, &acc, l2["id"].as_str().unwrap()).await;
    assert_eq!(got2["title"], Value::Null, "an empty title is none");
    assert_eq!(got2["tags"], json!(["Mail"]));
    // Without them: null and [].
    let l3 = create(
        &app,
        &acc,
        json!({"long_url": "https://example.com/c", "title": null, "tags": null}),
    )
    .await;
    let got3 = get_link(&app, &acc, l3["id"].as_str().unwrap()).await;
    assert_eq!(
        (got3["title"].clone(), got3["tags"].clone()),
        (Value::Null, json!([]))
    );
    // The list carries them too.
    let (_, page) = list(&app, &acc, "short_code=x").await;
    let listed = page["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap();
    assert_eq!(listed["tags"], json!(["beta:1.0_x-y", "Mail", "promo"]));
    assert_eq!(listed["title"], "Spring sale");

    // Refusals: validation_error, nothing created.
    let ten: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
    let mut eleven = ten.clone();
    eleven.push("t10".to_owned());
    let mut ten_and_dup = ten.clone();
    ten_and_dup.push("T0".to_owned());
    create(
        &app,
        &acc,
        json!({"long_url": "https://example.com/d", "tags": ten_and_dup}),
    )
    .await;
    create(
        &app,
        &acc,
        json!({"long_url": "https://example.com/d", "title": "é".repeat(200)}),
    )
    .await;
    for bad in [
        json!({"long_url": "https://example.com/x", "title": "a".repeat(201)}),
        json!({"long_url": "https://example.com/x", "title": "a\u{1}b"}),
        json!({"long_url": "https://example.com/x", "title": 5}),
        json!({"long_url": "https://example.com/x", "tags": eleven}),
        json!({"long_url": "https://example.com/x", "tags": [""]}),
        json!({"long_url": "https://example.com/x", "tags": ["  "]}),
        json!({"long_url": "https://example.com/x", "tags": ["a/b"]}),
        json!({"long_url": "https://example.com/x", "tags": ["a|b"]}),
        json!({"long_url": "https://example.com/x", "tags": ["a".repeat(51)]}),
        json!({"long_url": "https://example.com/x", "tags": "promo"}),
        json!({"long_url": "https://example.com/x", "tags": [1]}),
    ] {
        let (s, b) = app.create_json(&acc.key, bad.clone()).await;
        assert_error(s, &b, 400, "validation_error");
    }
    let (_, page) = list(&app, &acc, "").await;
    assert_eq!(page["total"], 5, "refused creations created nothing");

    // bulk-create: each entry by the same rules.
    let (s, b) = app
        .send(
            Method::POST,
            &acc.key,
            "/api/v1/external/links/bulk-create",
            Some(json!({"links": [
                {"long_url": "https://example.com/bulk1", "title": "Bulk", "tags": ["Promo", "bulk"]},
                {"long_url": "https://example.com/bulk2", "tags": ["no/slash"]},
            ]})),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["results"][0]["status"], 201);
    assert_eq!(b["results"][1]["status"], 400);
    assert_eq!(b["results"][1]["error_code"], "validation_error");
    let bulk = get_link(&app, &acc, b["results"][0]["link"]["id"].as_str().unwrap()).await;
    assert_eq!(bulk["title"], "Bulk");
    assert_eq!(
        bulk["tags"],
        json!(["bulk", "promo"]),
        "the account's spelling: promo"
    );

    // PATCH: tags replace the list, absent leaves it; title null or "" removes it.
    let path = format!("{LINKS}/{id}");
    let patch = |body: Value| app.send(Method::PATCH, &acc.key, &path, Some(body));
    let (s, b) = patch(json!({"title": "New"})).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["title"], "New");
    assert_eq!(b["tags"], json!(["beta:1.0_x-y", "Mail", "promo"]));
    let (s, b) = patch(json!({"tags": ["zeta", "Alpha", "alpha"]})).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        (b["title"].clone(), b["tags"].clone()),
        (json!("New"), json!(["Alpha", "zeta"]))
    );
    let (_, b) = patch(json!({"title": null})).await;
    assert_eq!(b["title"], Value::Null);
    patch(json!({"title": "x"})).await;
    let (_, b) = patch(json!({"title": ""})).await;
    assert_eq!(b["title"], Value::Null);
    let (_, b) = patch(json!({"tags": []})).await;
    assert_eq!(b["tags"], json!([]));
    for bad in [
        json!({"tags": null}),
        json!({"tags": ["a/b"]}),
        json!({"tags": (0..11).map(|i| format!("t{i}")).collect::<Vec<_>>()}),
        json!({"title": "a".repeat(201)}),
        json!({"title": ["x"]}),
    ] {
        let (s, b) = patch(bad.clone()).await;
        assert_error(s, &b, 400, "validation_error");
    }
    app.stop().await;
}

/// Titles and tags are not served: changing only them writes no outbox row, and tag rename and delete write
/// none either; a change of a served field still does.
async fn titles_and_tags_never_touch_the_edge(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let l = create(
        &app,
        &acc,
        json!({"long_url": "https://example.com/a", "short_code": "edge", "tags": ["a"]}),
    )
    .await;
    let id = l["id"].as_str().unwrap();
    assert!(
        !pending_outbox(&app).await.is_empty(),
        "a creation is published"
    );
    drain_outbox(&app).await;
    let path = format!("{LINKS}/{id}");
    for body in [
        json!({"title": "T"}),
        json!({"tags": ["b", "c"]}),
        json!({"title": null, "tags": ["a"]}),
    ] {
        let (s, b) = app.send(Method::PATCH, &acc.key, &path, Some(body)).await;
        assert_eq!(s, 200, "{b}");
    }
    let (s, _) = app
        .send(
            Method::PATCH,
            &acc.key,
            "/api/v1/external/tags/a",
            Some(json!({"name": "A2"})),
        )
        .await;
    assert_eq!(s, 200);
    let (s, _) = app
        .send(Method::DELETE, &acc.key, "/api/v1/external/tags/a2", None)
        .await;
    assert_eq!(s, 204);
    assert_eq!(pending_outbox(&app).await, Vec::<String>::new());
    let (s, _) = app
        .send(
            Method::PATCH,
            &acc.key,
            &path,
            Some(json!({"title": "T2", "is_active": false})),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(
        pending_outbox(&app).await,
        vec!["link:sho.rt:edge".to_owned()]
    );
    app.stop().await;
}

/// The tag list, rename (also a respelling, and a merge), delete, 404s, and the activity log.
async fn tag_endpoints(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let other = app.account(true).await;
    let a = create(&app, &acc, json!({"long_url": "https://example.com/a", "short_code": "aaa", "tags": ["News", "promo"]})).await;
    let b = create(&app, &acc, json!({"long_url": "https://example.com/b", "short_code": "bbb", "tags": ["news", "Sale 2027"]})).await;
    let c = create(&app, &acc, json!({"long_url": "https://example.com/c", "short_code": "ccc", "tags": ["zebra", "Promo"]})).await;
    create(
        &app,
        &other,
        json!({"long_url": "https://example.com/o", "tags": ["Secret", "news"]}),
    )
    .await;
    assert_eq!(
        tags(&app, &acc).await,
        json!({"results": [{"name": "News", "links": 2}, {"name": "promo", "links": 2},
                           {"name": "Sale 2027", "links": 1}, {"name": "zebra", "links": 1}]})
    );
    assert_eq!(
        tags(&app, &other).await,
        json!({"results": [{"name": "news", "links": 1}, {"name": "Secret", "links": 1}]}),
        "each account its own tags and spellings"
    );

    let tag_path = |name: &str| format!("/api/v1/external/tags/{name}");
    // Unknown, another account's, invalid or no longer carried: 404.
    for name in ["nope", "Secret", "a%2Fb", "%20"] {
        let (s, body) = app
            .send(
                Method::PATCH,
                &acc.key,
                &tag_path(name),
                Some(json!({"name": "x"})),
            )
            .await;
        assert_error(s, &body, 404, "not_found");
        let (s, body) = app
            .send(Method::DELETE, &acc.key, &tag_path(name), None)
            .await;
        assert_error(s, &body, 404, "not_found");
    }
    // A bad new name or body.
    for bad in [
        json!({"name": "a/b"}),
        json!({"name": ""}),
        json!({}),
        json!({"name": "x", "extra": 1}),
    ] {
        let (s, body) = app
            .send(Method::PATCH, &acc.key, &tag_path("news"), Some(bad))
            .await;
        assert_error(s, &body, 400, "validation_error");
    }

    // Respelling (any case in the path, %-encoded names).
    let (s, body) = app
        .send(
            Method::PATCH,
            &acc.key,
            &tag_path("NEWS"),
            Some(json!({"name": " NEWS "})),
        )
        .await;
    assert_eq!(
        (s, body.clone()),
        (200, json!({"name": "NEWS", "links": 2})),
        "{body}"
    );
    // Rename to a new name.
    let (s, body) = app
        .send(
            Method::PATCH,
            &acc.key,
            &tag_path("sale%202027"),
            Some(json!({"name": "Sale:2028"})),
        )
        .await;
    assert_eq!(
        (s, body.clone()),
        (200, json!({"name": "Sale:2028", "links": 1})),
        "{body}"
    );
    // Merge: promo into NEWS (a carries both: it keeps one).
    let (s, body) = app
        .send(
            Method::PATCH,
            &acc.key,
            &tag_path("promo"),
            Some(json!({"name": "news"})),
        )
        .await;
    assert_eq!(
        (s, body.clone()),
        (200, json!({"name": "news", "links": 3})),
        "{body}"
    );
    let id = |l: &Value| l["id"].as_str().unwrap().to_owned();
    assert_eq!(get_link(&app, &acc, &id(&a)).await["tags"], json!(["news"]));
    assert_eq!(
        get_link(&app, &acc, &id(&b)).await["tags"],
        json!(["news", "Sale:2028"])
    );
    assert_eq!(
        get_link(&app, &acc, &id(&c)).await["tags"],
        json!(["news", "zebra"])
    );
    let (s, body) = app
        .send(Method::DELETE, &acc.key, &tag_path("promo"), None)
        .await;
    assert_error(s, &body, 404, "not_found");

    // Delete.
    let (s, body) = app
        .send(Method::DELETE, &acc.key, &tag_path("NEWS"), None)
        .await;
    assert_eq!((s, body), (204, Value::Null));
    assert_eq!(get_link(&app, &acc, &id(&a)).await["tags"], json!([]));
    assert_eq!(
        tags(&app, &acc).await,
        json!({"results": [{"name": "Sale:2028", "links": 1}, {"name": "zebra", "links": 1}]})
    );
    assert_eq!(
        tags(&app, &other).await["results"][0],
        json!({"name": "news", "links": 1}),
        "another account's tag of that name is untouched"
    );

    // The activity log: one row per tag change, by the key.
    let rows = audit_rows(&app, &acc).await;
    let tag_rows: Vec<&Value> = rows.iter().filter(|r| r["target_type"] == "tag").collect();
    assert_eq!(tag_rows.len(), 4, "{tag_rows:?}");
    assert_eq!(tag_rows[0]["action"], "tag.deleted");
    assert_eq!(tag_rows[0]["details"], json!({"name": "news", "links": 3}));
    assert_eq!(tag_rows[1]["action"], "tag.renamed");
    assert_eq!(
        tag_rows[1]["details"],
        json!({"name": "news", "previous_name": "promo", "merged": true, "links": 3})
    );
    assert_eq!(
        tag_rows[2]["details"],
        json!({"name": "Sale:2028", "previous_name": "Sale 2027", "merged": false, "links": 1})
    );
    assert_eq!(
        tag_rows[3]["details"],
        json!({"name": "NEWS", "previous_name": "News", "merged": false, "links": 2})
    );
    assert!(
        tag_rows
            .iter()
            .all(|r| r["actor"] == json!({"type": "api_key"}))
    );
    assert!(
        audit_rows(&app, &other)
            .await
            .iter()
            .all(|r| r["target_type"] != "tag")
    );
    app.stop().await;
}

/// A PATCH of title and tags is a `link.updated` row naming them; the creation row names them when given.
async fn link_rows_name_titles_and_tags(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    create(
        &app,
        &acc,
        json!({"long_url": "https://example.com/a", "short_code": "abc",
                              "title": "Hello", "tags": ["x", "Y"]}),
    )
    .await;
    let rows = audit_rows(&app, &acc).await;
    assert_eq!(rows[0]["action"], "link.created");
    assert_eq!(rows[0]["details"]["title"], "Hello");
    assert_eq!(rows[0]["details"]["tags"], json!(["x", "Y"]));
    let id = rows[0]["target_id"].as_str().unwrap().to_owned();
    let path = format!("{LINKS}/{id}");
    let (s, _) = app
        .send(
            Method::PATCH,
            &acc.key,
            &path,
            Some(json!({"title": null, "tags": ["b", "A"]})),
        )
        .await;
    assert_eq!(s, 200);
    let rows = audit_rows(&app, &acc).await;
    assert_eq!(rows[0]["action"], "link.updated");
    assert_eq!(
        rows[0]["details"],
        json!({"short_url": "https://sho.rt/abc", "title": null, "tags": ["A", "b"]})
    );
    app.stop().await;
}

/// Every filter alone and combined, with `total`; the sort orders; isolation of groups and tags.
async fn filters_and_sorts(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let other = app.account(true).await;
    let custom = app.custom_domain("go.example.com", &acc).await;
    let spring = app.group(&acc, "Spring").await;
    let others_group = app.group(&other, "Theirs").await;
    // Created one after another: aaa oldest, eee newest.
    let mk = |code: &str, url: &str, extra: Value| {
        let mut body = json!({"long_url": url, "short_code": code});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let mut ids = std::collections::HashMap::new();
    for (code, url, extra) in [
        (
            "ddd",
            "https://shop.example/Spring-Sale",
            json!({"tags": ["promo", "mail"], "group_id": spring}),
        ),
        (
            "bbb",
            "https://blog.example/post",
            json!({"title": "Über SPRING news", "tags": ["Promo"]}),
        ),
        (
            "eee",
            "https://docs.example/x_y%z",
            json!({"tags": ["mail"], "domain_id": custom.id}),
        ),
        (
            "aaa",
            "https://example.com/aaa",
            json!({"group_id": spring, "domain_id": custom.id}),
        ),
        (
            "ccc",
            "https://example.com/CCC-springs",
            json!({"title": "Third"}),
        ),
    ] {
        let l = create(&app, &acc, mk(code, url, extra)).await;
        ids.insert(code, l["id"].as_str().unwrap().to_owned());
    }
    create(
        &app,
        &other,
        json!({"long_url": "https://shop.example/spring", "short_code": "zzz",
                                "tags": ["promo"], "group_id": others_group}),
    )
    .await;
    let path = format!("{LINKS}/{}", ids["ccc"]);
    app.send(
        Method::PATCH,
        &acc.key,
        &path,
        Some(json!({"is_active": false})),
    )
    .await;

    let s = |v: &[&str]| v.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>();
    let check = |query: &'static str, want: Vec<String>| {
        let app = &app;
        let acc = &acc;
        async move {
            let (total, got) = codes(app, acc, query).await;
            assert_eq!(got, want, "{query}");
            assert_eq!(total as usize, want.len(), "{query}: total");
        }
    };
    check("", s(&["ccc", "aaa", "eee", "bbb", "ddd"])).await;
    // q: short code, destination, title; any case; literal % and _.
    check("q=spring", s(&["ccc", "bbb", "ddd"])).await;
    check("q=SPRING-S", s(&["ddd"])).await;
    check("q=-SPRING", s(&["ccc"])).await;
    check("q=%C3%BCber", s(&["bbb"])).await;
    check("q=aa", s(&["aaa"])).await;
    check("q=x_y%25z", s(&["eee"])).await;
    check("q=x%25", s(&[])).await;
    check("q=_y", s(&["eee"])).await;
    check("q=h%2Fe", s(&[])).await;
    // tag: any case, repeatable (all must match), unknown matches nothing, another account's too.
    check("tag=PROMO", s(&["bbb", "ddd"])).await;
    check("tag=promo&tag=Mail", s(&["ddd"])).await;
    check("tag=promo&tag=promo", s(&["bbb", "ddd"])).await;
    check("tag=mail", s(&["eee", "ddd"])).await;
    check("tag=nope", s(&[])).await;
    // group_id: the account's, another account's (nothing), unknown (nothing).
    let q = Box::leak(format!("group_id={spring}").into_boxed_str());
    check(q, s(&["aaa", "ddd"])).await;
    let q = Box::leak(format!("group_id={}", acc.default_group_id.to_uppercase()).into_boxed_str());
    check(q, s(&["ccc", "eee", "bbb"])).await;
    let q = Box::leak(format!("group_id={others_group}").into_boxed_str());
    check(q, s(&[])).await;
    check("group_id=00000000-0000-0000-0000-000000000000", s(&[])).await;
    // domain.
    check("domain=GO.example.com", s(&["aaa", "eee"])).await;
    check("domain=sho.rt", s(&["ccc", "bbb", "ddd"])).await;
    check("domain=unknown.example", s(&[])).await;
    // is_active.
    check("is_active=false", s(&["ccc"])).await;
    check("is_active=true", s(&["aaa", "eee", "bbb", "ddd"])).await;
    // Combined, with the existing filter and pagination.
    check("q=spring&tag=promo&is_active=true", s(&["bbb", "ddd"])).await;
    let q =
        Box::leak(format!("q=example&group_id={spring}&domain=go.example.com").into_boxed_str());
    check(q, s(&["aaa"])).await;
    check(
        "long_url=https%3A%2F%2Fexample.com%2F&match=startswith&is_active=true",
        s(&["aaa"]),
    )
    .await;
    check("tag=mail&domain=sho.rt&sort=-created_at", s(&["ddd"])).await;
    let (total, page) = codes(&app, &acc, "q=spring&limit=2&offset=1").await;
    assert_eq!((total, page), (3, s(&["bbb", "ddd"])));

    // Sorts.
    check("sort=created_at", s(&["ccc", "aaa", "eee", "bbb", "ddd"])).await;
    check("sort=-created_at", s(&["ddd", "bbb", "eee", "aaa", "ccc"])).await;
    check("sort=short_code", s(&["aaa", "bbb", "ccc", "ddd", "eee"])).await;
    check("sort=clicks", s(&["ccc", "aaa", "eee", "bbb", "ddd"])).await;
    let now = Micros::now().0 / 1000;
    let click = |code: &str, host: &str, group: &str, days_ago: i64| shortlink_store::ClickEvent {
        host: host.to_owned(),
        short_code: Some(code.to_owned()),
        group_id: group.to_owned(),
        at: now - days_ago * 86_400_000,
        country: None,
        referer_host: None,
        device: shortlink_store::Device::Mobile,
        id: None,
        ..Default::default()
    };
    let def = acc.default_group_id.clone();
    app.db
        .record_clicks(
            None,
            vec![
                click("bbb", "sho.rt", &def, 0),
                click("bbb", "sho.rt", &def, 3),
                click("ddd", "sho.rt", &spring, 0),
                click("ddd", "sho.rt", &spring, 1),
                click("ddd", "sho.rt", &spring, 2),
                click("aaa", "go.example.com", &spring, 0),
            ],
        )
        .await
        .unwrap();
    check("sort=clicks", s(&["ddd", "bbb", "aaa", "ccc", "eee"])).await;
    let (total, got) = codes(&app, &acc, "sort=clicks&tag=promo&limit=1").await;
    assert_eq!((total, got), (2, s(&["ddd"])));

    // The other account sees only its own.
    let (total, got) = codes(&app, &other, "tag=promo").await;
    assert_eq!((total, got), (1, s(&["zzz"])));
    let q = format!("group_id={spring}");
    assert_eq!(codes(&app, &other, &q).await, (0, vec![]));

    // A tag's count is read from its own rows: a deleted link leaves it, alone and combined.
    let path = format!("{LINKS}/{}", ids["ddd"]);
    let (status, _) = app.send(Method::DELETE, &acc.key, &path, None).await;
    assert_eq!(status, 204);
    check("tag=PROMO", s(&["bbb"])).await;
    check("tag=promo&tag=mail", s(&[])).await;
    check("tag=mail&domain=GO.example.com", s(&["eee"])).await;
    app.stop().await;
}

/// Each parameter's own error code, in the error shape; repeats refused except `tag`.
async fn filter_errors(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let eleven: Vec<String> = (0..11).map(|i| format!("tag=t{i}")).collect();
    let eleven = eleven.join("&");
    let long_q = format!("q={}", "a".repeat(201));
    for (query, code) in [
        ("q=a", "invalid_q"),
        ("q=", "invalid_q"),
        (long_q.as_str(), "invalid_q"),
        ("q=ab&q=cd", "invalid_q"),
        ("q=a%0Ab", "invalid_q"),
        ("tag=a%2Fb", "invalid_tag"),
        ("tag=", "invalid_tag"),
        ("tag=%20%20", "invalid_tag"),
        (eleven.as_str(), "invalid_tag"),
        ("group_id=nope", "invalid_group_id"),
        ("group_id=", "invalid_group_id"),
        ("group_id=a&group_id=b", "invalid_group_id"),
        ("domain=not_a_host", "invalid_domain"),
        ("domain=", "invalid_domain"),
        ("domain=a.b&domain=a.b", "invalid_domain"),
        ("is_active=yes", "invalid_is_active"),
        ("is_active=1", "invalid_is_active"),
        ("is_active=true&is_active=false", "invalid_is_active"),
        ("sort=newest", "invalid_sort"),
        ("sort=-clicks", "invalid_sort"),
        ("sort=clicks&sort=clicks", "invalid_sort"),
    ] {
        let (s, b) = list(&app, &acc, query).await;
        assert_eq!(s, 400, "{query}: {b}");
        assert_error(s, &b, 400, code);
    }
    // Unauthenticated is still 401 first.
    let resp = app
        .client
        .get(app.url("/api/v1/external/tags"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    app.stop().await;
}

/// The search index follows every change of what `q` searches (SQLite's trigram index is kept by triggers), and
/// a `q` with a double quote, a percent sign or of two characters is literal.
async fn search_follows_changes(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let l = create(
        &app,
        &acc,
        json!({"long_url": "https://example.com/alpha", "short_code": "srch1", "title": "Say \"hi\" 100%"}),
    )
    .await;
    let id = l["id"].as_str().unwrap();
    let found = |q: &'static str| {
        let (app, acc) = (&app, &acc);
        async move { codes(app, acc, q).await.1 }
    };
    assert_eq!(found("q=alpha").await, ["srch1"]);
    assert_eq!(
        found("q=%22hi%22").await,
        ["srch1"],
        "a double quote is literal"
    );
    assert_eq!(
        found("q=100%25").await,
        ["srch1"],
        "a percent sign is literal"
    );
    assert_eq!(found("q=hi").await, ["srch1"], "two characters");
    let path = format!("{LINKS}/{id}");
    let (s, _) = app
        .send(
            Method::PATCH,
            &acc.key,
            &path,
            Some(json!({"title": "Gamma", "long_url": "https://example.com/delta"})),
        )
        .await;
    assert_eq!(s, 200);
    assert!(
        found("q=alpha").await.is_empty(),
        "the old destination is gone from the index"
    );
    assert!(found("q=%22hi%22").await.is_empty(), "the old title too");
    assert_eq!(found("q=gamma").await, ["srch1"]);
    assert_eq!(found("q=delta").await, ["srch1"]);
    let (s, _) = app.send(Method::DELETE, &acc.key, &path, None).await;
    assert_eq!(s, 204);
    assert!(
        found("q=gamma").await.is_empty(),
        "a deleted link is gone from the index"
    );
    app.stop().await;
}

/// A tag's page is read either along the account's index (a common tag) or from the tag's own links (a rare tag,
/// or a deep page): both give the same links in the same order, alone and with another filter.
async fn tag_pages_read_either_way(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    // 12 links, oldest first: l00 … l11; `every` on all but l04 and l09, `few` on l01 and l10.
    for i in 0..12 {
        let mut tags = vec![];
        if i != 4 && i != 9 {
            tags.push("Every");
        }
        if i == 1 || i == 10 {
            tags.push("few");
        }
        let link = create(
            &app,
            &acc,
            json!({"long_url": format!("https://example.com/{i}"), "short_code": format!("l{i:02}"),
                   "tags": tags}),
        )
        .await;
        if i % 3 == 0 {
            app.pause_link(&acc.key, link["id"].as_str().unwrap()).await;
        }
    }
    let every: Vec<String> = (0..12)
        .rev()
        .filter(|i| *i != 4 && *i != 9)
        .map(|i| format!("l{i:02}"))
        .collect();
    // 10 of 12 links: a first page reads the index (10 ≥ 2 × 12 / 10), a deep one the tag's links.
    for (offset, limit) in [(0, 2), (1, 3), (5, 5), (8, 4), (9, 1)] {
        let q = format!("tag=every&limit={limit}&offset={offset}");
        let want: Vec<String> = every.iter().skip(offset).take(limit).cloned().collect();
        assert_eq!(codes(&app, &acc, &q).await, (10, want), "{q}");
    }
    let q = "tag=every&sort=short_code&limit=3&offset=2";
    assert_eq!(
        codes(&app, &acc, q).await,
        (10, vec!["l02".into(), "l03".into(), "l05".into()]),
        "{q}"
    );
    assert_eq!(
        codes(&app, &acc, "tag=few&limit=1").await,
        (2, vec!["l10".into()])
    );
    assert_eq!(
        codes(&app, &acc, "tag=every&tag=few").await,
        (2, vec!["l10".into(), "l01".into()])
    );
    assert_eq!(
        codes(&app, &acc, "tag=every&is_active=false&limit=2").await,
        (3, vec!["l06".into(), "l03".into()]),
        "l00, l03, l06 and l09 are paused; l09 lacks the tag"
    );
    app.stop().await;
}

both_engines!(
    tag_pages_read_either_way,
    search_follows_changes,
    fields_follow_their_rules,
    titles_and_tags_never_touch_the_edge,
    tag_endpoints,
    link_rows_name_titles_and_tags,
    filters_and_sorts,
    filter_errors,
);
