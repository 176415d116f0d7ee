//! The operator CLI (DESIGN.md): one JSON object on stdout and exit 0, or a message on
//! stderr and a non-zero exit. Runs the real binary against both engines.

use crate::common::{Engine, TestApp, TestDb, json};
use serde_json::{Value, json};
use std::process::Command;

struct Cli {
    url: String,
}

impl Cli {
    fn run(&self, args: &[&str]) -> Result<Value, String> {
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

    fn ok(&self, args: &[&str]) -> Value {
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
    assert_eq!(listed["results"][1], group);

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
    let failures: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["admin", "account", "create", "--email", "A@example.com"],
            "exists",
        ),
        (
            vec!["admin", "account", "create", "--email", "not-an-email"],
            "email",
        ),
        (
            vec!["admin", "api-key", "generate", "--account", &missing],
            "not found",
        ),
        (
            vec!["admin", "api-key", "revoke", "--account", &missing],
            "not found",
        ),
        (
            vec![
                "admin",
                "group",
                "create",
                "--account",
                &missing,
                "--name",
                "x",
            ],
            "not found",
        ),
        (
            vec![
                "admin",
                "group",
                "create",
                "--account",
                &account,
                "--name",
                " ",
            ],
            "name",
        ),
        (
            vec![
                "admin",
                "group",
                "create",
                "--account",
                &account,
                "--name",
                "x",
                "--settings",
                "{bad",
            ],
            "settings",
        ),
        (
            vec![
                "admin",
                "group",
                "create",
                "--account",
                &account,
                "--name",
                "x",
                "--settings",
                r#"{"acces":{}}"#,
            ],
            "settings",
        ),
        (
            vec![
                "admin",
                "group",
                "update",
                "--id",
                &missing,
                "--settings",
                "{}",
            ],
            "not found",
        ),
        (
            vec!["admin", "group", "delete", "--id", &missing],
            "not found",
        ),
        (
            vec!["admin", "group", "list", "--account", &missing],
            "not found",
        ),
        (
            vec!["admin", "account", "get", "--email", "nobody@example.com"],
            "not found",
        ),
        (
            vec!["admin", "domain", "add", "--host", "bad host", "--platform"],
            "hostname",
        ),
        (
            vec![
                "admin",
                "domain",
                "add",
                "--host",
                "x.com",
                "--account",
                &missing,
            ],
            "not found",
        ),
        (
            vec![
                "admin",
                "domain",
                "add",
                "--host",
                "x.com",
                "--platform",
                "--fallback-url",
                "http://x.com",
            ],
            "https",
        ),
        (
            vec!["admin", "domain", "disable", "--id", &missing],
            "not found",
        ),
        (
            vec!["admin", "blocklist", "add", "--domain", "not a domain"],
            "hostname",
        ),
    ];
    for (args, needle) in failures {
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

both_engines!(admin_commands, admin_failures);

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
