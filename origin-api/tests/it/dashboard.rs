//! The dashboard's security and flows over HTTP, on both engines: invitations, sign-in and sign-out, session
//! fixation, throttling, CSRF (token and Origin), XSS escaping, isolation between accounts, the key shown once,
//! links and groups through forms. The same flows in a real browser are in `tests/tests/dashboard_browser.rs`.

use crate::common::{Engine, TestApp, TestDb, start_server};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, LOCATION, SET_COOKIE};

pub(crate) const PASSWORD: &str = "correct horse battery";

/// A browser without a browser: one cookie jar of one cookie, redirects not followed, and the form's CSRF
/// token read from the last page.
pub(crate) struct Browser {
    pub(crate) client: reqwest::Client,
    pub(crate) base: String,
    pub(crate) cookie: Option<String>,
    pub(crate) origin: Option<String>,
    /// Sent with every request (e.g. a proxy's `X-Forwarded-For`).
    pub(crate) extra: Vec<(String, String)>,
}

pub(crate) struct Page {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

impl Page {
    pub(crate) fn csrf(&self) -> String {
        let at = self
            .body
            .find(r#"name="csrf" value=""#)
            .expect("a form with a CSRF token");
        let rest = &self.body[at + r#"name="csrf" value=""#.len()..];
        rest[..rest.find('"').unwrap()].to_owned()
    }

    pub(crate) fn location(&self) -> &str {
        self.headers
            .get(LOCATION)
            .map_or("", |v| v.to_str().unwrap())
    }
}

impl Browser {
    pub(crate) fn new(app: &TestApp) -> Self {
        Self {
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            origin: Some(app.base.clone()),
            base: app.base.clone(),
            cookie: None,
            extra: Vec::new(),
        }
    }

    async fn keep(&mut self, r: reqwest::Response) -> Page {
        let status = r.status();
        let headers = r.headers().clone();
        if let Some(c) = headers.get(SET_COOKIE) {
            let c = c.to_str().unwrap();
            let pair = c.split(';').next().unwrap();
            self.cookie = pair
                .split_once('=')
                .filter(|(_, v)| !v.is_empty())
                .map(|_| pair.to_owned());
        }
        Page {
            status,
            headers,
            body: r.text().await.unwrap(),
        }
    }

    pub(crate) async fn get(&mut self, path: &str) -> Page {
        let mut req = self.client.get(format!("{}{path}", self.base));
        for (k, v) in &self.extra {
            req = req.header(k, v);
        }
        if let Some(c) = &self.cookie {
            req = req.header("cookie", c);
        }
        let r = req.send().await.unwrap();
        self.keep(r).await
    }

    pub(crate) async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let mut req = self.client.post(format!("{}{path}", self.base)).form(form);
        for (k, v) in &self.extra {
            req = req.header(k, v);
        }
        if let Some(c) = &self.cookie {
            req = req.header("cookie", c);
        }
        if let Some(o) = &self.origin {
            req = req.header("origin", o);
        }
        let r = req.send().await.unwrap();
        self.keep(r).await
    }

    /// Accepts a fresh invitation for `email` with [`PASSWORD`]; signed in afterwards.
    pub(crate) async fn join(&mut self, app: &TestApp, email: &str) {
        let invite = app.db.invite(email).await.unwrap();
        let path = format!("/dashboard/invite/{}", invite.token.expose());
        let page = self
            .post(&path, &[("password", PASSWORD), ("confirm", PASSWORD)])
            .await;
        assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    }

    pub(crate) async fn sign_in(&mut self, email: &str, password: &str) -> Page {
        self.post(
            "/dashboard/sign-in",
            &[("email", email), ("password", password)],
        )
        .await
    }
}

pub(crate) fn email() -> String {
    format!("{}@example.com", uuid::Uuid::new_v4().simple())
}

/// A new account's owner signed in to the dashboard, the account's id and an API key of it (for arranging links
/// through the API).
pub(crate) async fn owner_with_key(app: &TestApp) -> (Browser, String, String) {
    let mut b = Browser::new(app);
    let address = email();
    b.join(app, &address).await;
    let account = app.db.find_account(&address).await.unwrap();
    let key = app
        .db
        .generate_api_key(&account.id, &shortlink_store::Actor::Operator)
        .await
        .unwrap();
    (b, account.id, key.expose().to_owned())
}

both_engines!(
    invitation_then_sign_out_and_in,
    session_id_changes_at_sign_in,
    forms_need_the_csrf_token_and_our_origin,
    failed_sign_ins_are_throttled,
    user_values_are_escaped,
    accounts_see_only_their_own,
    the_key_is_shown_once,
    links_through_forms,
    groups_through_forms,
    secure_cookie_behind_https,
    no_secret_reaches_the_log,
);

async fn invitation_then_sign_out_and_in(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let mut b = Browser::new(&app);
    let address = email();
    let invite = app.db.invite(&address).await.unwrap();
    let path = format!("/dashboard/invite/{}", invite.token.expose());
    let page = b.get(&path).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(&address) && page.body.contains("Accept invitation"));
    for (password, confirm, message) in [
        ("short", "short", "at least 10 characters"),
        (PASSWORD, "correct horse batterz", "differ"),
    ] {
        let page = b
            .post(&path, &[("password", password), ("confirm", confirm)])
            .await;
        assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(page.body.contains(message), "{}", page.body);
        assert!(b.cookie.is_none());
    }
    let page = b
        .post(&path, &[("password", PASSWORD), ("confirm", PASSWORD)])
        .await;
    assert_eq!(
        (page.status, page.location()),
        (StatusCode::SEE_OTHER, "/dashboard/?done=joined")
    );
    let cookie = page
        .headers
        .get(SET_COOKIE)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    for attr in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain http: {cookie}");
    let home = b.get("/dashboard/").await;
    assert_eq!(home.status, StatusCode::OK);
    assert!(home.body.contains(&address) && home.body.contains("Sign out"));
    for (name, value) in [
        (
            "content-security-policy",
            "default-src 'self'; frame-ancestors 'none'",
        ),
        ("x-frame-options", "DENY"),
        ("cache-control", "no-store"),
    ] {
        let got = home.headers.get(name).unwrap().to_str().unwrap();
        assert!(got.starts_with(value), "{name}: {got}");
    }
    // One use only.
    let again = b.get(&path).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    assert!(again.body.contains("cannot be used"));
    // Sign-out ends the session on the server: the old cookie no longer works.
    let session = b.cookie.clone();
    let refused = b.post("/dashboard/sign-out", &[]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let out = b
        .post("/dashboard/sign-out", &[("csrf", &home.csrf())])
        .await;
    assert_eq!(
        (out.status, out.location()),
        (StatusCode::SEE_OTHER, "/dashboard/sign-in")
    );
    b.cookie = session;
    let gone = b.get("/dashboard/").await;
    assert_eq!(
        (gone.status, gone.location()),
        (StatusCode::SEE_OTHER, "/dashboard/sign-in")
    );
    // Wrong password and unknown email get the same message.
    let mut other = Browser::new(&app);
    let wrong = other.sign_in(&address, "not the password").await;
    let unknown = other.sign_in(&email(), PASSWORD).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert_eq!(unknown.status, StatusCode::UNAUTHORIZED);
    assert!(
        wrong.body.contains("Wrong email or password.")
            && unknown.body.contains("Wrong email or password.")
    );
    let ok = other.sign_in(&address.to_uppercase(), PASSWORD).await;
    assert_eq!(
        (ok.status, ok.location()),
        (StatusCode::SEE_OTHER, "/dashboard/")
    );
    assert_eq!(other.get("/dashboard/").await.status, StatusCode::OK);
    app.stop().await;
}

async fn session_id_changes_at_sign_in(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let address = email();
    let mut victim = Browser::new(&app);
    victim.join(&app, &address).await;
    let first = victim.cookie.clone().unwrap();
    // A session id planted before sign-in is never the one the server hands out.
    let planted = format!("shortlink_session={}", "ab".repeat(32));
    victim.cookie = Some(planted.clone());
    let page = victim.sign_in(&address, PASSWORD).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    let second = victim.cookie.clone().unwrap();
    assert_ne!(second, planted);
    assert_ne!(second, first);
    // Both sessions are live until one signs out; each is separate.
    victim.cookie = Some(first);
    assert_eq!(victim.get("/dashboard/").await.status, StatusCode::OK);
    app.stop().await;
}

async fn forms_need_the_csrf_token_and_our_origin(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let mut b = Browser::new(&app);
    b.join(&app, &email()).await;
    let page = b.get("/dashboard/key").await;
    let csrf = page.csrf();
    assert_eq!(
        b.post("/dashboard/key/generate", &[]).await.status,
        StatusCode::FORBIDDEN
    );
    let wrong = "0".repeat(csrf.len());
    assert_eq!(
        b.post("/dashboard/key/generate", &[("csrf", &wrong)])
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    // The right token from a foreign page: refused by the Origin check.
    b.origin = Some("https://evil.example".to_owned());
    let foreign = b.post("/dashboard/key/generate", &[("csrf", &csrf)]).await;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN);
    assert!(foreign.body.contains("Form refused"));
    // Login CSRF: the sign-in form from another site is refused too.
    assert_eq!(
        b.sign_in("x@example.com", PASSWORD).await.status,
        StatusCode::FORBIDDEN
    );
    b.origin = Some(app.base.clone());
    let ok = b
        .post(
            "/dashboard/key/generate",
            &[("csrf", &csrf), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK);
    assert!(ok.body.contains("Your new API key"));
    // Another session's token is not this session's.
    let mut other = Browser::new(&app);
    other.join(&app, &email()).await;
    let theirs = other.get("/dashboard/key").await.csrf();
    assert_ne!(theirs, csrf);
    assert_eq!(
        b.post("/dashboard/key/revoke", &[("csrf", &theirs)])
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    app.stop().await;
}

async fn failed_sign_ins_are_throttled(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let address = email();
    Browser::new(&app).join(&app, &address).await;
    let mut b = Browser::new(&app);
    for _ in 0..10 {
        assert_eq!(
            b.sign_in(&address, "wrong password").await.status,
            StatusCode::UNAUTHORIZED
        );
    }
    // The eleventh waits, even with the right password.
    let page = b.sign_in(&address, PASSWORD).await;
    assert_eq!(page.status, StatusCode::TOO_MANY_REQUESTS);
    let retry: i64 = page
        .headers
        .get("retry-after")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=900).contains(&retry), "{retry}");
    assert!(page.body.contains("Too many failed sign-ins"));
    assert!(b.cookie.is_none());
    // The address is throttled too: another account from the same address waits as well.
    let second = email();
    Browser::new(&app).join(&app, &second).await;
    assert_eq!(
        b.sign_in(&second, PASSWORD).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    app.stop().await;
}

async fn user_values_are_escaped(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let mut b = Browser::new(&app);
    b.join(&app, &email()).await;
    let payload = r#""><script>alert(1)</script>"#;
    let csrf = b.get("/dashboard/groups").await.csrf();
    let created = b
        .post("/dashboard/groups", &[("csrf", &csrf), ("name", payload)])
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER);
    let group_page = b.get(created.location()).await;
    let list = b.get("/dashboard/groups").await;
    for page in [&group_page, &list] {
        assert!(!page.body.contains("<script>alert(1)"), "{}", page.body);
        assert!(
            page.body
                .contains("&#34;&#62;&#60;script&#62;alert(1)&#60;/script&#62;")
                || page.body.contains("&quot;&gt;&lt;script&gt;"),
            "{}",
            page.body
        );
    }
    // A filter value comes back escaped in the form and in the pager's links.
    let listed = b
        .get("/dashboard/?destination=%22%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E")
        .await;
    assert_eq!(listed.status, StatusCode::OK);
    assert!(!listed.body.contains("<script>alert(1)"));
    // A refused destination is shown back to its typist escaped.
    let refused = b
        .post(
            "/dashboard/links",
            &[
                ("csrf", &csrf),
                ("long_url", r#"javascript:"><script>alert(1)</script>"#),
            ],
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(!refused.body.contains("<script>alert(1)"));
    assert!(
        refused
            .body
            .contains("The destination URL must start with https://")
    );
    app.stop().await;
}

async fn accounts_see_only_their_own(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let owner = app.account(true).await;
    let (_, link) = app
        .create_json(
            &owner.key,
            serde_json::json!({"long_url": "https://example.com/mine"}),
        )
        .await;
    let link_id = link["id"].as_str().unwrap().to_owned();
    let group = app.group(&owner, "Private").await;
    let mut intruder = Browser::new(&app);
    intruder.join(&app, &email()).await;
    let csrf = intruder.get("/dashboard/").await.csrf();
    for path in [
        format!("/dashboard/links/{link_id}"),
        format!("/dashboard/links/{link_id}/qr.svg"),
        format!("/dashboard/links/{link_id}/delete"),
        format!("/dashboard/groups/{group}"),
        format!("/dashboard/groups/{group}/rotate"),
        format!("/dashboard/groups/{}", owner.default_group_id),
    ] {
        assert_eq!(
            intruder.get(&path).await.status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    for path in [
        format!("/dashboard/links/{link_id}/pause"),
        format!("/dashboard/links/{link_id}/delete"),
        format!("/dashboard/links/{link_id}"),
        format!("/dashboard/groups/{group}/rotate"),
        format!("/dashboard/groups/{group}/delete"),
        format!("/dashboard/groups/{group}/settings"),
    ] {
        let page = intruder
            .post(
                &path,
                &[
                    ("csrf", &csrf),
                    ("long_url", "https://evil.example/"),
                    ("block_bots", "on"),
                ],
            )
            .await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}");
    }
    // Nothing of the owner's changed, and their link is not in the intruder's list.
    let still = app.db.get_link(&owner.id, &link_id).await.unwrap();
    assert!(still.is_active && still.long_url == "https://example.com/mine");
    let g = app.db.group(Some(&owner.id), &group).await.unwrap();
    assert!(!g.settings.access.block_bots);
    assert!(
        !intruder
            .get("/dashboard/")
            .await
            .body
            .contains("example.com/mine")
    );
    // Signed out, every page sends to sign-in and every post is refused.
    let mut anonymous = Browser::new(&app);
    let page = anonymous.get(&format!("/dashboard/links/{link_id}")).await;
    assert_eq!(
        (page.status, page.location()),
        (StatusCode::SEE_OTHER, "/dashboard/sign-in")
    );
    let page = anonymous
        .post(
            &format!("/dashboard/links/{link_id}/pause"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(
        (page.status, page.location()),
        (StatusCode::SEE_OTHER, "/dashboard/sign-in")
    );
    app.stop().await;
}

async fn the_key_is_shown_once(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let mut b = Browser::new(&app);
    b.join(&app, &email()).await;
    let page = b.get("/dashboard/key").await;
    assert!(page.body.contains("Generate key"));
    // Generating asks for the password first.
    let confirm = b.get("/dashboard/key/generate").await;
    assert!(confirm.body.contains(r#"name="password" type="password""#));
    let shown = b
        .post(
            "/dashboard/key/generate",
            &[("csrf", &page.csrf()), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(shown.status, StatusCode::OK);
    assert_eq!(shown.headers.get("cache-control").unwrap(), "no-store");
    let at = shown
        .body
        .find(r#"id="new-api-key" type="text" readonly value=""#)
        .unwrap();
    let rest = &shown.body[at..];
    let rest = &rest[rest.find("value=\"").unwrap() + 7..];
    let key = rest[..rest.find('"').unwrap()].to_owned();
    assert!(key.len() > 20);
    let groups = |key: String| {
        let client = app.client.clone();
        let url = app.url("/api/v1/external/groups");
        async move {
            client
                .get(url)
                .header("Authorization", format!("Token {key}"))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(groups(key.clone()).await, StatusCode::OK);
    let later = b.get("/dashboard/key").await;
    assert!(!later.body.contains(&key), "the key is shown again");
    assert!(
        later.body.contains(&key[key.len() - 4..]),
        "masked form ends with the key's last 4"
    );
    assert!(later.body.contains("Regenerate key") && later.body.contains("Revoke key"));
    assert!(later.body.contains("Last used"));
    // Regenerate (after its confirmation page): the old key stops at once.
    let confirm = b.get("/dashboard/key/regenerate").await;
    assert!(confirm.body.contains("stops working at once"));
    let again = b
        .post(
            "/dashboard/key/regenerate",
            &[("csrf", &confirm.csrf()), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(groups(key.clone()).await, StatusCode::UNAUTHORIZED);
    let confirm = b.get("/dashboard/key/revoke").await;
    let revoked = b
        .post(
            "/dashboard/key/revoke",
            &[("csrf", &confirm.csrf()), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(revoked.location(), "/dashboard/key?done=revoked");
    assert!(b.get("/dashboard/key").await.body.contains("Generate key"));
    app.stop().await;
}

async fn links_through_forms(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let mut b = Browser::new(&app);
    let address = email();
    b.join(&app, &address).await;
    let account = app.db.find_account(&address).await.unwrap();
    let csrf = b.get("/dashboard/").await.csrf();
    let create = |code: &'static str, url: &'static str| {
        [
            ("csrf", csrf.clone()),
            ("long_url", url.to_owned()),
            ("short_code", code.to_owned()),
        ]
    };
    let page = b
        .post(
            "/dashboard/links",
            &create("ab", "https://example.com/")
                .each_ref()
                .map(|(k, v)| (*k, v.as_str())),
        )
        .await;
    assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.body.contains("short-code-error"), "{}", page.body);
    let made = b
        .post(
            "/dashboard/links",
            &create("docs", "https://example.com/docs")
                .each_ref()
                .map(|(k, v)| (*k, v.as_str())),
        )
        .await;
    assert_eq!(
        (made.status, made.location()),
        (StatusCode::SEE_OTHER, "/dashboard/?done=created")
    );
    let taken = b
        .post(
            "/dashboard/links",
            &create("docs", "https://example.com/other")
                .each_ref()
                .map(|(k, v)| (*k, v.as_str())),
        )
        .await;
    assert_eq!(taken.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(taken.body.contains("This short code is taken"));
    assert!(
        taken.body.contains("https://example.com/other"),
        "the form keeps what was typed"
    );
    let list = b.get("/dashboard/?done=created").await;
    assert!(list.body.contains("https://sho.rt/docs") && list.body.contains("Created."));
    let page = app.db.list_links(&account.id, 20, 0, None).await.unwrap();
    assert_eq!(page.total, 1);
    let id = page.results[0].id.clone();
    // Pause and resume from the list, edit from the link page, delete after its confirmation.
    let paused = b
        .post(
            &format!("/dashboard/links/{id}/pause"),
            &[("csrf", &csrf), ("back", "list")],
        )
        .await;
    assert_eq!(paused.location(), "/dashboard/?done=paused");
    assert!(!app.db.get_link(&account.id, &id).await.unwrap().is_active);
    assert!(b.get("/dashboard/").await.body.contains("Paused"));
    b.post(&format!("/dashboard/links/{id}/resume"), &[("csrf", &csrf)])
        .await;
    assert!(app.db.get_link(&account.id, &id).await.unwrap().is_active);
    let show = b.get(&format!("/dashboard/links/{id}")).await;
    assert!(show.body.contains("QR code for https://sho.rt/docs"));
    assert!(
        show.body
            .contains("<title id=\"chart-title\">Clicks per day</title>")
    );
    let past = b
        .post(
            &format!("/dashboard/links/{id}"),
            &[
                ("csrf", &csrf),
                ("long_url", "https://example.com/new"),
                ("expires_at", "2001-01-01T00:00"),
            ],
        )
        .await;
    assert_eq!(past.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(past.body.contains("Expires at must be in the future."));
    let saved = b
        .post(
            &format!("/dashboard/links/{id}"),
            &[
                ("csrf", &csrf),
                ("long_url", "https://example.com/new"),
                ("expires_at", "2099-01-31T12:00"),
            ],
        )
        .await;
    assert_eq!(
        saved.location(),
        format!("/dashboard/links/{id}?done=saved")
    );
    let link = app.db.get_link(&account.id, &id).await.unwrap();
    assert_eq!(link.long_url, "https://example.com/new");
    assert_eq!(
        link.expires_at.as_deref(),
        Some("2099-01-31T12:00:00.000000Z")
    );
    assert!(
        !link.forward_query,
        "the unchecked box turns forwarding off"
    );
    let qr = b.get(&format!("/dashboard/links/{id}/qr.png")).await;
    assert_eq!(qr.headers.get("content-type").unwrap(), "image/png");
    assert!(
        b.get(&format!("/dashboard/links/{id}/delete"))
            .await
            .body
            .contains("Delete link")
    );
    let deleted = b
        .post(&format!("/dashboard/links/{id}/delete"), &[("csrf", &csrf)])
        .await;
    assert_eq!(deleted.location(), "/dashboard/?done=deleted");
    assert_eq!(
        app.db
            .list_links(&account.id, 20, 0, None)
            .await
            .unwrap()
            .total,
        0
    );
    assert_eq!(
        b.get(&format!("/dashboard/links/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    app.stop().await;
}

async fn groups_through_forms(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let mut b = Browser::new(&app);
    let address = email();
    b.join(&app, &address).await;
    let account = app.db.find_account(&address).await.unwrap();
    let csrf = b.get("/dashboard/groups").await.csrf();
    let made = b
        .post(
            "/dashboard/groups",
            &[("csrf", &csrf), ("name", "Newsletter")],
        )
        .await;
    let path = made.location().split('?').next().unwrap().to_owned();
    let id = path.rsplit('/').next().unwrap().to_owned();
    let page = b.get(&path).await;
    let key = app.db.group(Some(&account.id), &id).await.unwrap().key;
    assert!(page.body.contains(&id) && page.body.contains(&key));
    assert!(page.body.contains(r#"data-group-key=""#) && page.body.contains("sho.rt"));
    let bad = b
        .post(
            &format!("{path}/settings"),
            &[("csrf", &csrf), ("allow", "USA"), ("interstitial", "5")],
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.body.contains("Allowed countries"), "{}", bad.body);
    assert!(
        bad.body.contains(r#"value="USA""#),
        "the form keeps what was typed"
    );
    let saved = b
        .post(
            &format!("{path}/settings"),
            &[
                ("csrf", &csrf),
                ("allow", "us, de"),
                ("block", ""),
                ("block_bots", "on"),
                ("interstitial", "5"),
                ("analytics", "on"),
            ],
        )
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER);
    let g = app.db.group(Some(&account.id), &id).await.unwrap();
    assert_eq!(g.settings.access.allow_countries, ["US", "DE"]);
    assert!(g.settings.access.block_bots && g.settings.analytics.enabled);
    assert_eq!(g.settings.monetization.unwrap().interstitial_seconds, 5);
    let rotated = b
        .post(
            &format!("{path}/rotate"),
            &[("csrf", &csrf), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(rotated.location(), format!("{path}?done=rotated"));
    assert_ne!(app.db.group(Some(&account.id), &id).await.unwrap().key, key);
    assert!(
        b.get(&format!("{path}/delete"))
            .await
            .body
            .contains("Tokens signed with its key stop working")
    );
    // The default group has no delete.
    assert_eq!(
        b.get(&format!(
            "/dashboard/groups/{}/delete",
            account.default_group_id
        ))
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    let deleted = b
        .post(
            &format!("{path}/delete"),
            &[("csrf", &csrf), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(deleted.location(), "/dashboard/groups?done=deleted");
    assert!(app.db.group(Some(&account.id), &id).await.is_err());
    // Sorted by name, case-insensitively.
    for name in ["beta", "Alpha"] {
        b.post("/dashboard/groups", &[("csrf", &csrf), ("name", name)])
            .await;
    }
    let list = b.get("/dashboard/groups").await.body;
    let (a, beta, default) = (
        list.find(">Alpha<").unwrap(),
        list.find(">beta<").unwrap(),
        list.find(">Default<").unwrap(),
    );
    assert!(a < beta && beta < default, "{list}");
    app.stop().await;
}

async fn secure_cookie_behind_https(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let app = TestApp::with_settings(test_db, |s| {
        s.public_url = Some("https://dash.example.com".to_owned())
    })
    .await;
    let mut b = Browser::new(&app);
    // The browser is on the public origin; the origin sees a proxy's Host.
    b.origin = Some("https://dash.example.com".to_owned());
    let invite = app.db.invite(&email()).await.unwrap();
    let page = b
        .post(
            &format!("/dashboard/invite/{}", invite.token.expose()),
            &[("password", PASSWORD), ("confirm", PASSWORD)],
        )
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    let cookie = page.headers.get(SET_COOKIE).unwrap().to_str().unwrap();
    assert!(
        cookie.starts_with("__Host-shortlink_session=") && cookie.contains("Secure"),
        "{cookie}"
    );
    assert_eq!(b.get("/dashboard/").await.status, StatusCode::OK);
    app.stop().await;
}

/// The real `serve` process at `trace`: an invitation, a sign-in, a key and a sign-out leave no password, session
/// id, CSRF token, invitation token or key in its log.
async fn no_secret_reaches_the_log(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let server = start_server(&test_db.url, "trace").await;
    let app = TestApp::on(test_db).await;
    let mut b = Browser::new(&app);
    b.base = server.base.clone();
    b.origin = Some(server.base.clone());
    let address = email();
    let invite = app.db.invite(&address).await.unwrap();
    let token = invite.token.expose().to_owned();
    let path = format!("/dashboard/invite/{token}");
    assert_eq!(b.get(&path).await.status, StatusCode::OK);
    assert_eq!(
        b.post(&path, &[("password", PASSWORD), ("confirm", PASSWORD)])
            .await
            .status,
        StatusCode::SEE_OTHER
    );
    let first_session = b.cookie.clone().unwrap();
    let page = b.get("/dashboard/key").await;
    let csrf = page.csrf();
    let shown = b
        .post(
            "/dashboard/key/generate",
            &[("csrf", &csrf), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(shown.status, StatusCode::OK);
    b.post("/dashboard/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(
        b.sign_in(&address, "a wrong password!").await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        b.sign_in(&address, PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
    let second_session = b.cookie.clone().unwrap();
    drop(b);
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(
        log.contains("/dashboard/"),
        "the requests were logged: {log}"
    );
    let key_at = shown.body.find("slk_").expect("the new key on the page");
    let key = &shown.body[key_at..key_at + 20];
    for (what, secret) in [
        ("password", PASSWORD),
        ("wrong password", "a wrong password!"),
        ("invitation token", token.as_str()),
        ("session id", first_session.split('=').nth(1).unwrap()),
        (
            "second session id",
            second_session.split('=').nth(1).unwrap(),
        ),
        ("CSRF token", csrf.as_str()),
        ("API key", key),
    ] {
        assert!(!log.contains(secret), "the log holds the {what}");
    }
    drop(server);
    app.stop().await;
}
