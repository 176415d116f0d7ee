//! The link page's editor of the smart-link fields (issue 25) over HTTP on both engines: every field saved and
//! read back through the API's GET; the rule editor's buttons (Add rule, Remove, Move up) changing the rows
//! without saving; each refusal shown with the API's message and the input kept; the password set, never sent
//! back, removed; a click limit refused in a group without analytics; CSRF, roles, isolation and escaping. The
//! same flow in a real browser is in `tests/browser/dashboard.mjs`.

use crate::common::{Engine, TestApp, json};
use crate::dashboard::{Browser, Page, email};
use crate::teams::{accept, invite};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shortlink_store::Actor;
use shortlink_store::domain::{GroupSettings, Hostname};

const SECRET: &str = "open sesame 42";

/// An owner signed in, their API key, a group with analytics on, and a link in it.
struct Setup {
    app: TestApp,
    owner: Browser,
    key: String,
    link: String,
    path: String,
}

/// An app with a platform domain and an owner signed in: their browser, account id and API key.
async fn owner(engine: Engine) -> (TestApp, Browser, String, String) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let mut owner = Browser::new(&app);
    let address = email();
    owner.join(&app, &address).await;
    let account = app.db.find_account(&address).await.unwrap();
    let key = app
        .db
        .generate_api_key(&account.id, &Actor::Operator)
        .await
        .unwrap()
        .expose()
        .to_owned();
    (app, owner, account.id, key)
}

async fn setup(engine: Engine) -> Setup {
    let (app, owner, account_id, key) = owner(engine).await;
    let settings = GroupSettings::parse(r#"{"analytics":{"enabled":true}}"#).unwrap();
    let counted = app
        .db
        .create_group(&account_id, "Counted", &settings, &Actor::Operator)
        .await
        .unwrap()
        .id;
    let (s, b) = app
        .create_json(
            &key,
            json!({"long_url": "https://shop.example/", "short_code": "smart", "group_id": counted}),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    let link = b["id"].as_str().unwrap().to_owned();
    let path = format!("/dashboard/links/{link}");
    Setup {
        app,
        owner,
        key,
        link,
        path,
    }
}

/// The link as the API shows it.
async fn api_link(s: &Setup) -> Value {
    let (status, body) = json(
        s.app
            .get(&s.key, &format!("/api/v1/external/links/{}", s.link))
            .await,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The edit form as the page sends it with nothing changed on a plain link, then `extra` (replacing a field of
/// the same name, or added).
fn form(csrf: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = [
        ("csrf", csrf),
        ("long_url", "https://shop.example/"),
        ("title", ""),
        ("tags", ""),
        ("expires_at", ""),
        ("forward_query", "on"),
        ("smart", "1"),
        ("ios_url", ""),
        ("android_url", ""),
        ("password", ""),
        ("expired_url", ""),
        ("max_clicks", ""),
        ("redirect_status", "302"),
        ("og_title", ""),
        ("og_description", ""),
        ("og_image", ""),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    for (k, v) in extra {
        // Repeated names (checkboxes) are added; a plain field's first value is replaced.
        let repeatable = k.ends_with(".device") || k.ends_with(".os");
        match fields.iter_mut().find(|(name, _)| name == k) {
            Some(field) if !repeatable => field.1 = (*v).to_owned(),
            _ => fields.push(((*k).to_owned(), (*v).to_owned())),
        }
    }
    fields
}

async fn post(b: &mut Browser, path: &str, fields: &[(String, String)]) -> Page {
    let pairs: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    b.post(path, &pairs).await
}

/// Where `needle` first shows in `body` (panics when absent).
fn at(body: &str, needle: &str) -> usize {
    body.find(needle)
        .unwrap_or_else(|| panic!("{needle} not in the page: {body}"))
}

async fn rule_editor_then_save_every_field(engine: Engine) {
    let mut s = setup(engine).await;
    let path = s.path.clone();
    let page = s.owner.get(&path).await;
    assert_eq!(page.status, StatusCode::OK);
    for label in [
        "Routing",
        "iOS URL",
        "Android URL",
        "Add rule",
        "Remove password",
        "Expired URL",
        "Max clicks",
        "Redirect type",
        "302 Found (temporary, default)",
        "Preview title",
        "Preview description",
        "Preview image URL",
        "Password: <strong>None",
    ] {
        if label == "Remove password" {
            assert!(!page.body.contains(label), "no password to remove yet");
        } else {
            assert!(page.body.contains(label), "{label}: {}", page.body);
        }
    }
    let csrf = page.csrf();

    // "Add rule" twice: two empty rows, the other inputs as typed, nothing saved.
    let added = post(
        &mut s.owner,
        &path,
        &form(
            &csrf,
            &[("title", "Typed, unsaved"), ("rule_action", "add")],
        ),
    )
    .await;
    assert_eq!(added.status, StatusCode::OK, "{}", added.body);
    assert!(added.body.contains(r#"name="rules[0].to""#));
    assert!(!added.body.contains(r#"name="rules[1].to""#));
    assert!(added.body.contains(r#"value="Typed, unsaved""#));
    assert!(added.body.contains("Not saved yet"));
    let two = post(
        &mut s.owner,
        &path,
        &form(
            &csrf,
            &[
                ("rules[0].to", "https://a.example/"),
                ("rules[0].country", "de"),
                ("rule_action", "add"),
            ],
        ),
    )
    .await;
    assert!(two.body.contains(r#"name="rules[1].to""#), "{}", two.body);
    assert!(two.body.contains(r#"value="https://a.example/""#));
    assert_eq!(api_link(&s).await["rules"], json!([]), "nothing saved");

    // Three rows; "Move up" on the third, then "Remove" on the first.
    let three = [
        ("rules[0].to", "https://a.example/"),
        ("rules[0].country", "de"),
        ("rules[1].to", "https://b.example/"),
        ("rules[1].device", "mobile"),
        ("rules[2].to", "https://c.example/"),
        ("rules[2].os", "ios"),
    ];
    let mut fields = three.to_vec();
    fields.push(("rule_action", "up:2"));
    let moved = post(&mut s.owner, &path, &form(&csrf, &fields)).await;
    assert_eq!(moved.status, StatusCode::OK);
    let (b, c) = (
        at(&moved.body, "https://b.example/"),
        at(&moved.body, "https://c.example/"),
    );
    assert!(c < b, "c moved above b");
    assert!(
        moved
            .body
            .contains(r#"name="rules[1].os" value="ios" checked"#),
        "the moved rule keeps its checkbox: {}",
        moved.body
    );
    let mut fields = three.to_vec();
    fields.push(("rule_action", "remove:0"));
    let removed = post(&mut s.owner, &path, &form(&csrf, &fields)).await;
    assert!(!removed.body.contains("https://a.example/"));
    assert!(at(&removed.body, r#"name="rules[1].to""#) < at(&removed.body, "https://c.example/"));
    assert_eq!(
        api_link(&s).await["rules"],
        json!([]),
        "still nothing saved"
    );

    // "Save link": every field at once.
    let saved = post(
        &mut s.owner,
        &path,
        &form(
            &csrf,
            &[
                ("rules[0].country", "de, AT"),
                ("rules[0].device", "mobile"),
                ("rules[0].device", "tablet"),
                ("rules[0].os", "android"),
                ("rules[0].language", "de"),
                ("rules[0].query", "utm_source=mail\r\nref=*\r\n"),
                ("rules[0].after", "2030-01-01T00:00"),
                ("rules[0].before", "2030-02-01T12:30:15"),
                ("rules[0].to", "https://de.example/"),
                ("rules[1].os", "ios"),
                ("rules[1].to", "https://ios-web.example/"),
                ("ios_url", "https://apps.apple.example/app"),
                ("android_url", "https://play.example/app"),
                ("password", SECRET),
                ("expired_url", "https://shop.example/sold-out"),
                ("max_clicks", "1000"),
                ("redirect_status", "308"),
                ("og_title", "  Spring sale  "),
                ("og_description", "Everything half price"),
                ("og_image", "https://cdn.example/card.png"),
            ],
        ),
    )
    .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    assert_eq!(saved.location(), format!("{path}?done=saved"));
    let link = api_link(&s).await;
    assert_eq!(
        link["rules"],
        json!([
            {"if": {"country": ["DE", "AT"], "device": ["mobile", "tablet"], "os": ["android"],
                    "language": ["de"], "query": {"ref": "*", "utm_source": "mail"},
                    "after": "2030-01-01T00:00:00.000000Z", "before": "2030-02-01T12:30:15.000000Z"},
             "to": "https://de.example/"},
            {"if": {"os": ["ios"]}, "to": "https://ios-web.example/"}
        ]),
        "{link}"
    );
    assert_eq!(link["ios_url"], "https://apps.apple.example/app");
    assert_eq!(link["android_url"], "https://play.example/app");
    assert_eq!(link["password_protected"], true);
    assert_eq!(link["expired_url"], "https://shop.example/sold-out");
    assert_eq!(link["max_clicks"], 1000);
    assert_eq!(link["redirect_status"], 308);
    assert_eq!(link["og_title"], "Spring sale");
    assert_eq!(link["og_description"], "Everything half price");
    assert_eq!(link["og_image"], "https://cdn.example/card.png");
    let raw = s
        .app
        .db
        .kv_record("link:sho.rt:smart")
        .await
        .unwrap()
        .unwrap();
    assert!(!raw.contains(SECRET));
    let record: kv_model::LinkRecord = serde_json::from_str(&raw).unwrap();
    assert!(
        shortlink_store::verify_link_password(SECRET, record.password_hash.as_deref().unwrap()),
        "the typed password is the one hashed"
    );

    // The page shows them back, never the password; the activity log says only that there is one.
    let page = s.owner.get(&format!("{path}?done=saved")).await;
    assert!(page.body.contains("Saved."));
    assert!(
        !page.body.contains(SECRET),
        "the password is never sent back"
    );
    assert!(page.body.contains("Password: <strong>Set"));
    assert!(page.body.contains("Remove password"));
    for shown in [
        r#"name="rules[0].country" maxlength="400" value="DE, AT""#,
        r#"value="2030-01-01T00:00""#,
        r#"value="2030-02-01T12:30:15""#,
        "utm_source=mail",
        r#"name="rules[1].os" value="ios" checked"#,
        r#"<option value="308" selected>"#,
        r#"value="Spring sale""#,
        r#"value="1000""#,
    ] {
        assert!(page.body.contains(shown), "{shown}: {}", page.body);
    }
    let (status, log) = json(s.app.get(&s.key, "/api/v1/external/audit-log").await).await;
    assert_eq!(status, 200, "{log}");
    let text = log.to_string();
    assert!(text.contains(r#""password_protected":true"#), "{text}");
    assert!(!text.contains(SECRET) && !text.contains("pbkdf2"), "{text}");

    // Saving the page unchanged changes nothing (no new activity row); an empty password field keeps it.
    let rows = log["total"].as_i64().unwrap();
    let unchanged = post(
        &mut s.owner,
        &path,
        &form(
            &csrf,
            &[
                ("rules[0].country", "DE, AT"),
                ("rules[0].device", "mobile"),
                ("rules[0].device", "tablet"),
                ("rules[0].os", "android"),
                ("rules[0].language", "de"),
                ("rules[0].query", "ref=*\r\nutm_source=mail"),
                ("rules[0].after", "2030-01-01T00:00"),
                ("rules[0].before", "2030-02-01T12:30:15"),
                ("rules[0].to", "https://de.example/"),
                ("rules[1].os", "ios"),
                ("rules[1].to", "https://ios-web.example/"),
                ("ios_url", "https://apps.apple.example/app"),
                ("android_url", "https://play.example/app"),
                ("expired_url", "https://shop.example/sold-out"),
                ("max_clicks", "1000"),
                ("redirect_status", "308"),
                ("og_title", "Spring sale"),
                ("og_description", "Everything half price"),
                ("og_image", "https://cdn.example/card.png"),
            ],
        ),
    )
    .await;
    assert_eq!(
        unchanged.status,
        StatusCode::SEE_OTHER,
        "{}",
        unchanged.body
    );
    let (_, log) = json(s.app.get(&s.key, "/api/v1/external/audit-log").await).await;
    assert_eq!(log["total"].as_i64().unwrap(), rows, "{log}");
    assert_eq!(api_link(&s).await["password_protected"], true);

    // A new password and "Remove password" at once is refused; "Remove password" alone removes it, and
    // emptied fields clear theirs.
    let both = post(
        &mut s.owner,
        &path,
        &form(
            &csrf,
            &[("password", "another secret"), ("remove_password", "on")],
        ),
    )
    .await;
    assert_eq!(both.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(both.body.contains("not both"), "{}", both.body);
    assert!(!both.body.contains("another secret"));
    let cleared = post(
        &mut s.owner,
        &path,
        &form(&csrf, &[("remove_password", "on")]),
    )
    .await;
    assert_eq!(cleared.status, StatusCode::SEE_OTHER, "{}", cleared.body);
    let link = api_link(&s).await;
    assert_eq!(link["password_protected"], false);
    assert_eq!(link["rules"], json!([]));
    for field in [
        "ios_url",
        "expired_url",
        "max_clicks",
        "og_title",
        "og_image",
    ] {
        assert_eq!(link[field], Value::Null, "{field}: {link}");
    }
    assert_eq!(link["redirect_status"], 302);
    s.app.stop().await;
}

async fn refusals_show_the_api_message_and_keep_the_input(engine: Engine) {
    let mut s = setup(engine).await;
    s.app
        .db
        .block_domain(&Hostname::parse("evil.example").unwrap())
        .await
        .unwrap();
    let path = s.path.clone();
    let csrf = s.owner.get(&path).await.csrf();
    let rule = |field: &'static str, value: &'static str| {
        vec![
            ("rules[0].to", "https://kept.example/"),
            ("rules[0].country", "DE"),
            ("rules[1].to", "https://second.example/"),
            ("rules[1].language", "fr"),
            (field, value),
        ]
    };
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (
            rule("rules[1].os", "bsd"),
            "rules[1].if.os[0] must be one of ios, android, windows, macos, linux or other",
        ),
        (rule("rules[1].country", "DEU"), "rules[1].if.country[0]:"),
        (
            rule("rules[1].language", "de-CH"),
            "rules[1].if.language[0]:",
        ),
        (
            rule("rules[1].to", "http://second.example/"),
            "rules[1].to must start with https://",
        ),
        (
            vec![("rules[0].to", "https://kept.example/")],
            "rules[0].if must hold at least one condition",
        ),
        (
            rule("rules[1].query", "a=1\r\na=2"),
            "rules[1].if.query names &#34;a&#34; twice",
        ),
        (
            rule("rules[1].query", "a="),
            "rules[1].if.query.a must be 1 to 100 characters",
        ),
        (
            vec![
                ("rules[0].to", "https://kept.example/"),
                ("rules[0].after", "2030-02-01T00:00"),
                ("rules[0].before", "2030-01-01T00:00"),
            ],
            "rules[0].if.after must be earlier than rules[0].if.before",
        ),
        (
            rule("rules[1].after", "tomorrow"),
            "rules[1].if.after must be an RFC 3339 time in UTC",
        ),
        (
            rule("rules[1].to", "https://evil.example/x"),
            "rules[1].to points to a blocked domain",
        ),
        (
            vec![("ios_url", "http://apps.example/")],
            "ios_url must start with https://",
        ),
        (
            vec![("og_image", "https://evil.example/card.png")],
            "og_image points to a blocked domain",
        ),
        (
            vec![("max_clicks", "0")],
            "max_clicks must be an integer from 1 to 1000000000",
        ),
        (
            vec![("max_clicks", "lots")],
            "max_clicks must be an integer from 1 to 1000000000",
        ),
        (
            vec![("redirect_status", "303")],
            "redirect_status must be 301, 302, 307 or 308",
        ),
        (
            vec![("og_description", "a\u{7}b")],
            "og_description must not contain control characters",
        ),
        (
            vec![("password", "short")],
            "password must be 8 to 128 characters",
        ),
    ];
    for (fields, says) in cases {
        let mut fields = fields;
        fields.push(("title", "Kept title"));
        fields.push(("og_title", "Kept preview"));
        let page = post(&mut s.owner, &path, &form(&csrf, &fields)).await;
        assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY, "{says}");
        assert!(page.body.contains(says), "{says}: {}", page.body);
        assert!(page.body.contains(r#"value="Kept title""#), "{says}");
        assert!(page.body.contains(r#"value="Kept preview""#), "{says}");
        if fields.iter().any(|(k, _)| k.starts_with("rules[")) {
            assert!(page.body.contains("https://kept.example/"), "{says}");
        }
        assert!(
            !page.body.contains(r#"value="short""#),
            "a password is never sent back"
        );
    }
    let long = "x".repeat(201);
    let page = post(&mut s.owner, &path, &form(&csrf, &[("og_title", &long)])).await;
    assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        page.body
            .contains("og_title must be at most 200 characters")
    );
    assert!(page.body.contains(&long), "kept as typed");
    // A typed password that was not saved asks to be typed again.
    let page = post(
        &mut s.owner,
        &path,
        &form(&csrf, &[("password", SECRET), ("max_clicks", "0")]),
    )
    .await;
    assert!(!page.body.contains(SECRET));
    assert!(page.body.contains("Type it again"), "{}", page.body);
    let link = api_link(&s).await;
    assert_eq!(
        (&link["rules"], &link["og_title"], &link["title"]),
        (&json!([]), &Value::Null, &Value::Null),
        "nothing refused was saved: {link}"
    );
    // A 21st rule: the form does not offer it; a forged "Add rule" says why.
    let mut fields: Vec<(String, String)> = form(&csrf, &[("rule_action", "add")]);
    for i in 0..20 {
        fields.push((format!("rules[{i}].to"), format!("https://r{i}.example/")));
    }
    let page = post(&mut s.owner, &path, &fields).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("rules must hold at most 20 rules"));
    assert!(!page.body.contains(r#"name="rules[20].to""#));
    assert!(!page.body.contains(">Add rule<"));
    s.app.stop().await;
}

async fn max_clicks_needs_analytics(engine: Engine) {
    let (app, mut b, _, key) = owner(engine).await;
    // In the default group, which has no analytics.
    let (status, link) = app
        .create_json(&key, json!({"long_url": "https://shop.example/"}))
        .await;
    assert_eq!(status, 201, "{link}");
    let path = format!("/dashboard/links/{}", link["id"].as_str().unwrap());
    let csrf = b.get(&path).await.csrf();
    let page = b
        .post(
            &path,
            &form(&csrf, &[("max_clicks", "5"), ("og_title", "Kept")])
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect::<Vec<_>>(),
        )
        .await;
    assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        page.body
            .contains("max_clicks needs click analytics in the link&#39;s group"),
        "{}",
        page.body
    );
    assert!(page.body.contains(r#"value="5""#) && page.body.contains(r#"value="Kept""#));
    app.stop().await;
}

async fn csrf_roles_isolation_and_escaping(engine: Engine) {
    let mut s = setup(engine).await;
    let path = s.path.clone();
    let csrf = s.owner.get(&path).await.csrf();
    let refused = post(
        &mut s.owner,
        &path,
        &form("wrong", &[("og_title", "Forged"), ("password", SECRET)]),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let refused = post(
        &mut s.owner,
        &path,
        &form("wrong", &[("rule_action", "add")]),
    )
    .await;
    assert_eq!(
        refused.status,
        StatusCode::FORBIDDEN,
        "rule buttons check CSRF too"
    );
    assert_eq!(api_link(&s).await["og_title"], Value::Null);

    // Markup in a preview text and a rule's URL is shown as text.
    let saved = post(
        &mut s.owner,
        &path,
        &form(
            &csrf,
            &[
                ("og_title", "<script>alert(1)</script>"),
                ("rules[0].query", "q=<script>"),
                ("rules[0].to", "https://x.example/<script>alert(2)</script>"),
                ("password", SECRET),
            ],
        ),
    )
    .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    let page = s.owner.get(&path).await;
    assert!(!page.body.contains("<script>"), "{}", page.body);
    assert!(page.body.contains("&#60;script&#62;alert(1)"));

    // A viewer sees the values read-only (the password only as Set) and can neither save nor use the editor.
    let mut viewer = accept(&s.app, &invite(&mut s.owner, &email(), "viewer").await).await;
    let page = viewer.get(&path).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.body.contains("<script>"));
    assert!(!page.body.contains(r#"name="rules["#) && !page.body.contains("Add rule"));
    assert!(!page.body.contains(r#"name="password""#));
    assert!(!page.body.contains(SECRET));
    for shown in [
        "<dt>Password</dt><dd>Set</dd>",
        "<dt>Redirect type</dt><dd>302 Found (temporary, default)</dd>",
        "&#60;script&#62;alert(1)&#60;/script&#62;",
        "Query q=&#60;script&#62;",
        "https://x.example/&#60;script&#62;",
    ] {
        assert!(page.body.contains(shown), "{shown}: {}", page.body);
    }
    let viewer_csrf = page.csrf();
    for extra in [
        vec![("og_title", "Viewer")],
        vec![("rule_action", "add")],
        vec![("remove_password", "on")],
    ] {
        let forbidden = post(&mut viewer, &path, &form(&viewer_csrf, &extra)).await;
        assert_eq!(forbidden.status, StatusCode::FORBIDDEN, "{extra:?}");
    }
    assert_eq!(api_link(&s).await["password_protected"], true);

    // Another account's member gets 404 for the page and for every post.
    let mut stranger = Browser::new(&s.app);
    stranger.join(&s.app, &email()).await;
    assert_eq!(stranger.get(&path).await.status, StatusCode::NOT_FOUND);
    let theirs = stranger.get("/dashboard/").await.csrf();
    for extra in [vec![("og_title", "Mine")], vec![("rule_action", "add")]] {
        let page = post(&mut stranger, &path, &form(&theirs, &extra)).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND);
        assert!(!page.body.contains("shop.example"));
    }
    s.app.stop().await;
}

both_engines!(
    rule_editor_then_save_every_field,
    refusals_show_the_api_message_and_keep_the_input,
    max_clicks_needs_analytics,
    csrf_roles_isolation_and_escaping,
);
