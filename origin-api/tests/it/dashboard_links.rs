//! The Links page's search, filters, tag chips and export, and a link's Title and Tags, over HTTP on both engines
//! (issue 24): the API's rules through the forms, a refused filter shown rather than failing, CSRF and roles on
//! the edit, markup in titles and tags escaped, and the export holding exactly the account's matching links. The
//! same flows in a real browser are in `tests/browser/dashboard.mjs`.

use crate::common::{Engine, TestApp};
use crate::dashboard::{Browser, email, owner_with_key};
use crate::teams::{accept, invite};
use reqwest::StatusCode;
use serde_json::json;

/// Creates a link through the API of the browser's account.
async fn api_link(app: &TestApp, key: &str, body: serde_json::Value) -> String {
    let (s, b) = app.create_json(key, body).await;
    assert_eq!(s, 201, "{b}");
    b["id"].as_str().unwrap().to_owned()
}

/// Posts the link's edit form.
async fn post(b: &mut Browser, path: &str, form: Vec<(String, String)>) -> crate::dashboard::Page {
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    b.post(path, &pairs).await
}

async fn filters_titles_tags_and_export(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let (mut b, account_id, key) = owner_with_key(&app).await;
    let key = key.as_str();
    let spring = api_link(
        &app,
        key,
        json!({"long_url": "https://shop.example/spring", "short_code": "spring", "title": "Spring <b>sale</b>",
               "tags": ["promo"]}),
    )
    .await;
    api_link(
        &app,
        key,
        json!({"long_url": "https://blog.example/post", "short_code": "post"}),
    )
    .await;
    // Another account's tagged link never shows.
    let other = app.account(true).await;
    api_link(
        &app,
        &other.key,
        json!({"long_url": "https://theirs.example/", "tags": ["promo"]}),
    )
    .await;

    // Search and tag filter; the title escaped (tags cannot hold markup: their rules allow none).
    let page = b.get("/dashboard/?q=SPRING").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("https://shop.example/spring") && !page.body.contains("blog.example")
    );
    assert!(
        page.body.contains("Spring &#60;b&#62;sale&#60;/b&#62;") && !page.body.contains("<b>sale"),
        "the title is escaped: {}",
        page.body
    );
    let page = b
        .get("/dashboard/?tag=PROMO&status=active&sort=clicks")
        .await;
    assert!(page.body.contains("shop.example/spring") && !page.body.contains("blog.example"));
    assert!(
        !page.body.contains("theirs.example"),
        "another account's link"
    );
    let page = b.get("/dashboard/?status=paused").await;
    assert!(page.body.contains("No link matches."), "{}", page.body);
    // Refused values: shown as the form's error, the list empty, never an error page.
    for (query, says) in [
        ("q=s", "Search must be 2 to 200 characters"),
        ("status=maybe", "Status must be Any, Active or Paused"),
        ("sort=up", "sort must be"),
        ("tag=a%2Fb", "tag:"),
    ] {
        let page = b.get(&format!("/dashboard/?{query}")).await;
        assert_eq!(page.status, StatusCode::OK, "{query}");
        assert!(page.body.contains(says), "{query}: {}", page.body);
        assert!(!page.body.contains("shop.example/spring"), "{query}");
        assert!(
            !page.body.contains("Export links"),
            "{query}: no export of refused filters"
        );
    }

    // Title and tags through the link's form: CSRF needed, rules applied, unchanged tags not rewritten.
    let path = format!("/dashboard/links/{spring}");
    let csrf = b.get(&path).await.csrf();
    let form = |csrf: &str, title: &str, tags: &str| {
        vec![
            ("csrf".to_owned(), csrf.to_owned()),
            (
                "long_url".to_owned(),
                "https://shop.example/spring".to_owned(),
            ),
            ("title".to_owned(), title.to_owned()),
            ("tags".to_owned(), tags.to_owned()),
            ("forward_query".to_owned(), "on".to_owned()),
        ]
    };
    let refused = post(&mut b, &path, form("wrong", "New", "a")).await;
    assert_eq!(
        refused.status,
        StatusCode::FORBIDDEN,
        "no CSRF token, no change"
    );
    let bad = post(&mut b, &path, form(&csrf, "New", "ok, a/b")).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.body.contains("Tags"), "{}", bad.body);
    assert!(bad.body.contains("ok, a/b"), "the typed tags stay");
    let long = "x".repeat(201);
    let bad = post(&mut b, &path, form(&csrf, &long, "")).await;
    assert_eq!(
        bad.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a title over 200 characters"
    );
    let saved = post(
        &mut b,
        &path,
        form(&csrf, "  Spring sale  ", "Sale, promo ,PROMO"),
    )
    .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    let link = app.db.get_link(&account_id, &spring).await.unwrap();
    assert_eq!(link.title.as_deref(), Some("Spring sale"));
    assert_eq!(link.tags, ["promo", "Sale"]);
    let page = b.get(&path).await;
    assert!(
        page.body.contains(r#"value="promo, Sale""#),
        "{}",
        page.body
    );

    // Export: the CSV of what the filters match, this account's only; refused filters are a 400 page.
    let export = b.get("/dashboard/links/export?tag=promo").await;
    assert_eq!(export.status, StatusCode::OK);
    assert_eq!(export.headers["content-type"], "text/csv; charset=utf-8");
    let lines: Vec<&str> = export.body.trim_end().split("\r\n").collect();
    assert_eq!(lines.len(), 2, "{}", export.body);
    assert!(
        lines[1].contains(",Spring sale,promo|Sale,"),
        "{}",
        lines[1]
    );
    // Compressed, as browsers ask for it (the compression polls the body after its end).
    b.extra = vec![("accept-encoding".to_owned(), "gzip".to_owned())];
    let gz = b.get("/dashboard/links/export?tag=promo").await;
    assert_eq!(gz.status, StatusCode::OK);
    assert_eq!(gz.headers["content-encoding"], "gzip");
    b.extra.clear();
    let all = b.get("/dashboard/links/export").await;
    assert_eq!(all.body.trim_end().split("\r\n").count(), 3, "{}", all.body);
    let bad = b.get("/dashboard/links/export?q=s").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    // Signed out: the sign-in page, no data.
    let mut stranger = Browser::new(&app);
    let out = stranger.get("/dashboard/links/export").await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(!out.body.contains("spring"));

    // A viewer sees and exports, but cannot change title or tags.
    let mut viewer = accept(&app, &invite(&mut b, &email(), "viewer").await).await;
    let page = viewer.get(&path).await;
    assert!(page.body.contains("Spring sale") && !page.body.contains(r#"name="tags""#));
    let csrf = page.csrf();
    let forbidden = post(&mut viewer, &path, form(&csrf, "Mine", "")).await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);
    let export = viewer.get("/dashboard/links/export").await;
    assert_eq!(export.body.trim_end().split("\r\n").count(), 3);
    app.stop().await;
}

/// The import form's body: `csrf`, then `file`, as a browser sends them.
fn multipart(csrf: &str, file: &[u8]) -> (String, Vec<u8>) {
    let boundary = "----shortlink-test-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{csrf}\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"links.csv\"\r\n\
         Content-Type: text/csv\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn upload(b: &Browser, csrf: &str, file: &[u8]) -> (StatusCode, String, String) {
    let (ctype, body) = multipart(csrf, file);
    let mut req = b
        .client
        .post(format!("{}/dashboard/links/import", b.base))
        .header("content-type", ctype)
        .body(body);
    if let Some(c) = &b.cookie {
        req = req.header("cookie", c);
    }
    if let Some(o) = &b.origin {
        req = req.header("origin", o);
    }
    let r = req.send().await.unwrap();
    let status = r.status();
    let location = r
        .headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, location, r.text().await.unwrap_or_default())
}

/// "Import links": CSRF, roles, the file's refusals on the form, the job's page and status, isolation.
async fn import_through_the_form(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let mut owner = Browser::new(&app);
    owner.join(&app, &email()).await;
    let csrf = owner.get("/dashboard/links/import").await.csrf();
    let file = b"long_url,title\nhttps://example.com/a,<b>A</b>\nftp://example.com/x,\n";
    let (s, _, _) = upload(&owner, "wrong", file).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "no CSRF token, nothing queued");
    let (s, _, body) = upload(&owner, &csrf, b"url\nx\n").await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body.contains("long_url"), "{body}");
    let (s, _, body) = upload(&owner, &csrf, b"").await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body.contains("Choose a CSV file"), "{body}");
    let (s, _, body) = upload(&owner, &csrf, &[0xff, 0xfe]).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body.contains("UTF-8"), "{body}");
    let (s, location, _) = upload(&owner, &csrf, file).await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    assert!(
        location.starts_with("/dashboard/links/imports/"),
        "{location}"
    );
    // The job's page: right at any time, the problems once done, markup escaped.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let page = loop {
        let page = owner.get(&location).await;
        assert_eq!(page.status, StatusCode::OK);
        if page.body.contains("<h2 id=\"import-state\">Done</h2>") {
            break page;
        }
        assert!(std::time::Instant::now() < deadline, "{}", page.body);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(page.body.contains(r#"max="2" value="2""#), "{}", page.body);
    assert!(
        page.body.contains("long_url must start with https://"),
        "{}",
        page.body
    );
    let status = owner.get(&format!("{location}/status")).await;
    let json: serde_json::Value = serde_json::from_str(&status.body).unwrap();
    assert_eq!(json["status"], "done");
    assert_eq!(
        (json["created"].as_i64(), json["failed"].as_i64()),
        (Some(1), Some(1))
    );
    // Another account's people see nothing of it.
    let mut stranger = Browser::new(&app);
    stranger.join(&app, &email()).await;
    assert_eq!(stranger.get(&location).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        stranger.get(&format!("{location}/status")).await.status,
        StatusCode::NOT_FOUND
    );
    // A viewer of the account may not import.
    let mut viewer = accept(&app, &invite(&mut owner, &email(), "viewer").await).await;
    assert_eq!(
        viewer.get("/dashboard/links/import").await.status,
        StatusCode::FORBIDDEN
    );
    let viewer_csrf = viewer.get("/dashboard/").await.csrf();
    let (s, _, _) = upload(&viewer, &viewer_csrf, file).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert!(
        !viewer
            .get("/dashboard/")
            .await
            .body
            .contains("Import links")
    );
    app.stop().await;
}

both_engines!(filters_titles_tags_and_export, import_through_the_form);
