//! The operator CLI (DESIGN.md): one JSON object on stdout and exit 0, or a message on
//! stderr and a non-zero exit. Runs the real binary against both engines.

use crate::common::{Engine, TestApp, TestDb, json};
use serde_json::{Value, json};
use std::process::Command;

pub(crate) struct Cli {
    pub(crate) url: String,
}

impl Cli {
    pub(crate) fn run(&self, args: &[&str]) -> Result<Value, String> {
        let out = Command::new(env!("CARGO_BIN_EXE_origin-api"))
            .args(args)
            .env("DATABASE_URL", &self.url)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        if out.status.success() {
            assert_eq!(stdout.lines().count(), 1, "one line of JSON: {stdout:?}");
            Ok(serde_json::from_str(&stdout).unwrap())
        } else {
            assert!(
                stdout.is_empty(),
                "nothing on stdout on failure: {stdout:?}"
            );
            assert!(!stderr.trim().is_empty(), "a message on stderr");
            Err(stderr)
        }
    }

    pub(crate) fn ok(&self, args: &[&str]) -> Value {
        self.run(args)
            .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
    }
}

fn s(v: &Value) -> String {
    v.as_str().unwrap().to_owned()
}

async fn admin_commands(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let cli = Cli {
        url: test_db.url.clone(),
    };
    // migrate is idempotent
    assert_eq!(cli.ok(&["migrate"]), json!({}));

    let acc = cli.ok(&["admin", "account", "create", "--email", "ops@example.com"]);
    let account = s(&acc["id"]);
    assert!(
        uuid::Uuid::try_parse(&account).is_ok()
            && uuid::Uuid::try_parse(&s(&acc["default_group_id"])).is_ok()
    );
    let key = s(&cli.ok(&["admin", "api-key", "generate", "--account", &account])["api_key"]);
    assert_eq!(
        cli.ok(&["admin", "account", "get", "--email", "OPS@example.com"]),
        acc
    );
    assert!(key.starts_with("slk_") && key.len() >= 36);

    let group = cli.ok(&[
        "admin",
        "group",
        "create",
        "--account",
        &account,
        "--name",
        "Promo",
        "--settings",
        r#"{"access":{"block_bots":true},"analytics":{"enabled":true}}"#,
    ]);
    assert_eq!(group["name"], "Promo");
    let group_key = s(&group["key"]);
    assert_eq!(group_key.len(), 43, "32 bytes, base64url without padding");
    assert!(
        group_key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    );
    let updated = cli.ok(&[
        "admin",
        "group",
        "update",
        "--id",
        &s(&group["id"]),
        "--settings",
        r#"{"monetization":{"interstitial_seconds":5}}"#,
    ]);
    assert_eq!(
        (updated["id"].clone(), updated["key"].clone()),
        (group["id"].clone(), group["key"].clone())
    );
    let listed = cli.ok(&["admin", "group", "list", "--account", &account]);
    assert_eq!(listed["results"][0]["name"], "Default");
    assert_eq!(listed["results"][1], updated);
    assert_eq!(
        updated["settings"]["monetization"]["interstitial_seconds"],
        5
    );
    assert_eq!(updated["is_default"], false);
    assert_eq!(listed["results"][0]["is_default"], true);

    let platform = cli.ok(&[
        "admin",
        "domain",
        "add",
        "--host",
        "Sho.RT",
        "--platform",
        "--fallback-url",
        "https://example.com/",
    ]);
    assert_eq!(platform["domain"], "sho.rt");
    let custom = cli.ok(&[
        "admin",
        "domain",
        "add",
        "--host",
        "go.acme.com",
        "--account",
        &account,
    ]);
    assert_eq!(
        cli.ok(&["admin", "blocklist", "add", "--domain", "evil.example"]),
        json!({})
    );
    assert_eq!(
        cli.ok(&["admin", "blocklist", "add", "--domain", "evil.example"]),
        json!({})
    );

    // What the CLI made is what the API serves.
    let app = TestApp::on(test_db).await;
    let (st, groups) = json(app.get(&key, "/api/v1/external/groups").await).await;
    assert_eq!(st, 200);
    assert_eq!(groups["results"].as_array().unwrap().len(), 2);
    let (_, domains) = json(
        app.get(&key, "/api/v1/external/links/enabled-domains")
            .await,
    )
    .await;
    assert_eq!(domains["results"].as_array().unwrap().len(), 2);
    let (st, link) = app
        .create_json(
            &key,
            json!({"long_url": "https://a.com", "group_id": group["id"]}),
        )
        .await;
    assert_eq!(st, 201);
    assert_eq!(link["group_id"], group["id"]);
    assert_eq!(
        app.create(&key, json!({"long_url": "https://evil.example/x"}))
            .await
            .status(),
        400
    );

    // Deleting a group moves its links to the default group; its id is gone.
    assert_eq!(
        cli.ok(&["admin", "group", "delete", "--id", &s(&group["id"])]),
        json!({})
    );
    let (_, list) = json(app.get(&key, "/api/v1/external/links").await).await;
    assert_eq!(list["results"][0]["group_id"], acc["default_group_id"]);
    assert!(
        cli.run(&[
            "admin",
            "group",
            "delete",
            "--id",
            &s(&acc["default_group_id"])
        ])
        .is_err()
    );

    assert_eq!(
        cli.ok(&["admin", "domain", "disable", "--id", &s(&custom["id"])]),
        json!({})
    );
    let (_, domains) = json(
        app.get(&key, "/api/v1/external/links/enabled-domains")
            .await,
    )
    .await;
    assert_eq!(
        domains["results"],
        json!([{"id": platform["id"], "domain": "sho.rt"}])
    );

    // Regenerate: the old key is dead at once. Revoke: the new one too.
    let key2 = s(&cli.ok(&["admin", "api-key", "generate", "--account", &account])["api_key"]);
    assert_eq!(app.get(&key, "/api/v1/external/groups").await.status(), 401);
    assert_eq!(
        app.get(&key2, "/api/v1/external/groups").await.status(),
        200
    );
    assert_eq!(
        cli.ok(&["admin", "api-key", "revoke", "--account", &account]),
        json!({})
    );
    assert_eq!(
        app.get(&key2, "/api/v1/external/groups").await.status(),
        401
    );

    // --no-api-access: a valid key that gets 403.
    let limited = cli.ok(&[
        "admin",
        "account",
        "create",
        "--email",
        "ro@example.com",
        "--no-api-access",
    ]);
    let key3 = s(&cli.ok(&[
        "admin",
        "api-key",
        "generate",
        "--account",
        &s(&limited["id"]),
    ])["api_key"]);
    assert_eq!(
        app.get(&key3, "/api/v1/external/groups").await.status(),
        403
    );
    app.stop().await;
}

async fn admin_failures(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let cli = Cli {
        url: test_db.url.clone(),
    };
    let acc = cli.ok(&["admin", "account", "create", "--email", "a@example.com"]);
    let account = s(&acc["id"]);
    let missing = uuid::Uuid::new_v4().to_string();
    // (command words, values that may hold spaces; what the error must say)
    let failures: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "admin account create --email A@example.com",
            vec![],
            "exists",
        ),
        ("admin account create --email not-an-email", vec![], "email"),
        (
            "admin api-key generate --account",
            vec![&missing],
            "not found",
        ),
        (
            "admin api-key revoke --account",
            vec![&missing],
            "not found",
        ),
        (
            "admin group create --account",
            vec![&missing, "--name", "x"],
            "not found",
        ),
        (
            "admin group create --account",
            vec![&account, "--name", " "],
            "name",
        ),
        (
            "admin group create --account",
            vec![&account, "--name", "x", "--settings", "{bad"],
            "settings",
        ),
        (
            "admin group create --account",
            vec![&account, "--name", "x", "--settings", r#"{"acces":{}}"#],
            "settings",
        ),
        (
            "admin group update --id",
            vec![&missing, "--settings", "{}"],
            "not found",
        ),
        ("admin group delete --id", vec![&missing], "not found"),
        ("admin group list --account", vec![&missing], "not found"),
        (
            "admin account get --email nobody@example.com",
            vec![],
            "not found",
        ),
        (
            "admin domain add --host",
            vec!["bad host", "--platform"],
            "hostname",
        ),
        (
            "admin domain add --host x.com --account",
            vec![&missing],
            "not found",
        ),
        (
            "admin domain add --host x.com --platform --fallback-url http://x.com",
            vec![],
            "https",
        ),
        ("admin domain disable --id", vec![&missing], "not found"),
        (
            "admin blocklist add --domain",
            vec!["not a domain"],
            "hostname",
        ),
    ];
    for (words, values, needle) in failures {
        let args: Vec<&str> = words.split_whitespace().chain(values).collect();
        let err = cli.run(&args).expect_err(&format!("{args:?} should fail"));
        assert!(err.to_lowercase().contains(needle), "{args:?}: {err}");
    }
    cli.ok(&["admin", "domain", "add", "--host", "x.com", "--platform"]);
    let err = cli
        .run(&[
            "admin",
            "domain",
            "add",
            "--host",
            "X.com",
            "--account",
            &account,
        ])
        .unwrap_err();
    assert!(err.contains("exists"), "{err}");
    // Neither or both owners: a usage error from the argument parser.
    assert!(
        cli.run(&["admin", "domain", "add", "--host", "y.com"])
            .is_err()
    );
    assert!(
        cli.run(&[
            "admin",
            "domain",
            "add",
            "--host",
            "y.com",
            "--platform",
            "--account",
            &account
        ])
        .is_err()
    );
    drop(test_db);
}

/// Abuse response: the operator pauses, resumes and deletes any account's link, lists accounts and disables one.
async fn abuse_response(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let a = app.account(true).await;
    let cli = Cli {
        url: app.test_db.url.clone(),
    };
    let (st, link) = app
        .create_json(
            &a.key,
            json!({"long_url": "https://abuse.example/", "short_code": "bad"}),
        )
        .await;
    assert_eq!(st, 201);
    let id = s(&link["id"]);
    let record = || async {
        let r = app.db.kv_record("link:sho.rt:bad").await.unwrap();
        r.map(|r| serde_json::from_str::<Value>(&r).unwrap())
    };

    let paused = cli.ok(&["admin", "link", "pause", "--id", &id]);
    assert_eq!(paused, json!({"id": id, "is_active": false}));
    assert_eq!(record().await.unwrap()["is_active"], false);
    let resumed = cli.ok(&["admin", "link", "resume", "--id", &id.to_uppercase()]);
    assert_eq!(resumed["is_active"], true);
    assert_eq!(record().await.unwrap()["is_active"], true);

    let listed = cli.ok(&["admin", "account", "list"]);
    let mine = listed["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == a.id.as_str())
        .unwrap()
        .clone();
    let mut keys: Vec<_> = mine.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["api_access", "created_at", "disabled", "email", "id"]
    );
    assert_eq!(
        (mine["api_access"].clone(), mine["disabled"].clone()),
        (json!(true), json!(false))
    );

    // Disabled: the key is refused on every route, the links stop at the edge.
    assert_eq!(
        cli.ok(&["admin", "account", "disable", "--id", &a.id]),
        json!({})
    );
    for path in [
        "/api/v1/external/links",
        "/api/v1/external/groups",
        &format!("/api/v1/external/links/{id}"),
    ] {
        let (st, body) = json(app.get(&a.key, path).await).await;
        crate::common::assert_error(st, &body, 403, "permission_denied");
    }
    let (st, body) = app
        .create_json(&a.key, json!({"long_url": "https://abuse.example/2"}))
        .await;
    crate::common::assert_error(st, &body, 403, "permission_denied");
    assert_eq!(record().await.unwrap()["is_active"], false);
    let listed = cli.ok(&["admin", "account", "list"]);
    assert!(listed.to_string().contains(r#""disabled":true"#));
    cli.ok(&["admin", "account", "enable", "--id", &a.id]);
    let (st, _) = json(app.get(&a.key, "/api/v1/external/links").await).await;
    assert_eq!(st, 200);
    assert_eq!(record().await.unwrap()["is_active"], true);

    assert_eq!(cli.ok(&["admin", "link", "delete", "--id", &id]), json!({}));
    assert_eq!(record().await, None);
    for args in [
        ["admin", "link", "delete", "--id", id.as_str()],
        ["admin", "link", "pause", "--id", "not-a-uuid"],
        ["admin", "account", "disable", "--id", id.as_str()],
    ] {
        let err = cli.run(&args).unwrap_err();
        assert!(
            err.contains("not found") || err.contains("UUID"),
            "{args:?}: {err}"
        );
    }
    app.stop().await;
}

both_engines!(admin_commands, admin_failures, abuse_response);

#[test]
fn unmigrated_database_gives_a_hint() {
    let dir = std::env::temp_dir().join(format!("shortlink-cli-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let cli = Cli {
        url: format!("sqlite://{}", dir.join("fresh.db").display()),
    };
    let err = cli
        .run(&["admin", "account", "create", "--email", "a@example.com"])
        .unwrap_err();
    assert!(err.contains("origin-api migrate"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}
