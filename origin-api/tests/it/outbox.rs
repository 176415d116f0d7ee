//! Origin side of the edge read model: every change enqueues its KV keys in the same
//! transaction, the records read back follow the KV contract (kv-model), and the internal
//! endpoints the worker calls (resolve, clicks) and the stats extension behave.

use crate::common::{Engine, TestApp, TestDb, assert_error, json};
use kv_model::{BlocklistRecord, DomainRecord, GroupRecord, LinkRecord, ResolvedLink};
use serde_json::json;
use shortlink_store::Actor;
use shortlink_store::domain::{GroupSettings, Hostname};

/// Every key waiting in the outbox.
async fn all_pending_keys(app: &TestApp) -> Vec<String> {
    app.db
        .outbox_batch(10_000)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, k)| k)
        .collect()
}

/// The keys waiting in the outbox, but the unique visitors' day salts (`salt:<day>`): the origin's salts task
/// enqueues those at start, at a moment of its own, and no change under test here makes them.
pub(crate) async fn pending_keys(app: &TestApp) -> Vec<String> {
    let mut keys = all_pending_keys(app).await;
    keys.retain(|k| !k.starts_with("salt:"));
    keys
}

pub(crate) async fn drain(app: &TestApp) {
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

async fn record<T: serde::de::DeserializeOwned>(app: &TestApp, key: &str) -> Option<T> {
    app.db
        .kv_record(key)
        .await
        .unwrap()
        .map(|v| serde_json::from_str(&v).unwrap())
}

async fn every_change_enqueues_its_key(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let domain = app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let keys = pending_keys(&app).await;
    assert!(keys.contains(&"domain:sho.rt".to_owned()), "{keys:?}");
    assert!(
        keys.contains(&format!("group:{}", acc.default_group_id)),
        "{keys:?}"
    );
    drain(&app).await;

    let settings =
        GroupSettings::parse(r#"{"access":{"block_bots":true},"analytics":{"enabled":true}}"#)
            .unwrap();
    let group = app
        .db
        .create_group(&acc.id, "Promo", &settings, &Actor::Operator)
        .await
        .unwrap();
    let (s, link) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://a.com/x", "short_code": "Promo", "group_id": group.id}),
        )
        .await;
    assert_eq!(s, 201);
    assert_eq!(
        pending_keys(&app).await,
        [
            format!("group:{}", group.id),
            "link:sho.rt:promo".to_owned()
        ]
    );
    let g: GroupRecord = record(&app, &format!("group:{}", group.id)).await.unwrap();
    assert_eq!(g.key, group.key);
    assert!(g.settings.access.block_bots && g.settings.analytics.enabled);
    let l: LinkRecord = record(&app, "link:sho.rt:promo").await.unwrap();
    assert_eq!(
        l,
        LinkRecord {
            group_settings: Some(g.settings.clone()),
            vouched: true,
            ..LinkRecord::new("https://a.com/x", group.id.clone(), true)
        }
    );
    drain(&app).await;

    // Settings change (the group's links carry a copy of them: republished too); group delete moves the link
    // (its record changes) and deletes the key.
    let settings = GroupSettings::parse(r#"{"monetization":{"interstitial_seconds":3}}"#).unwrap();
    app.db
        .update_group(None, &group.id, None, Some(&settings), &Actor::Operator)
        .await
        .unwrap();
    assert_eq!(
        pending_keys(&app).await,
        [
            format!("group:{}", group.id),
            "link:sho.rt:promo".to_owned()
        ]
    );
    let l: LinkRecord = record(&app, "link:sho.rt:promo").await.unwrap();
    assert_eq!(
        l.group_settings.and_then(|s| s.monetization),
        Some(kv_model::Monetization {
            interstitial_seconds: 3
        })
    );
    drain(&app).await;
    // The same settings again change nothing at the edge: no link is republished.
    app.db
        .update_group(None, &group.id, None, Some(&settings), &Actor::Operator)
        .await
        .unwrap();
    assert_eq!(pending_keys(&app).await, [format!("group:{}", group.id)]);
    drain(&app).await;
    app.db
        .delete_group(None, &group.id, &Actor::Operator)
        .await
        .unwrap();
    let keys = pending_keys(&app).await;
    assert!(
        keys.contains(&format!("group:{}", group.id))
            && keys.contains(&"link:sho.rt:promo".to_owned()),
        "{keys:?}"
    );
    assert!(
        app.db
            .kv_record(&format!("group:{}", group.id))
            .await
            .unwrap()
            .is_none(),
        "deleted: a KV delete"
    );
    let l: LinkRecord = record(&app, "link:sho.rt:promo").await.unwrap();
    assert_eq!(l.group_id, acc.default_group_id);
    assert_eq!(link["id"].as_str().map(str::len), Some(36));
    drain(&app).await;

    app.db
        .disable_domain(&domain.id, &Actor::Operator)
        .await
        .unwrap();
    // The blocklist's record named it as an enabled platform domain: republished with it.
    assert_eq!(pending_keys(&app).await, ["blocklist", "domain:sho.rt"]);
    let d: DomainRecord = record(&app, "domain:sho.rt").await.unwrap();
    assert!(!d.enabled);
    drain(&app).await;

    app.db
        .block_domain(&Hostname::parse("evil.example").unwrap())
        .await
        .unwrap();
    app.db
        .block_domain(&Hostname::parse("bad.example").unwrap())
        .await
        .unwrap();
    // Two whose byte order a locale's collation does not keep (it passes over `-` and `.`): the edge expects the
    // list in byte order (shared_crypto::DomainBlocklist), whatever the database sorts by.
    for domain in ["a.example", "a-z.example"] {
        app.db
            .block_domain(&Hostname::parse(domain).unwrap())
            .await
            .unwrap();
    }
    assert_eq!(
        pending_keys(&app).await,
        ["blocklist", "blocklist", "blocklist", "blocklist"]
    );
    let b: BlocklistRecord = record(&app, "blocklist").await.unwrap();
    assert_eq!(
        b.domains,
        ["a-z.example", "a.example", "bad.example", "evil.example"]
    );
    drain(&app).await;
    // Republishing queues every key of the read model.
    // blocklist + one domain + the default group (Promo is deleted) + one link + today's and tomorrow's salts
    assert_eq!(app.db.republish_all().await.unwrap(), 6);
    let keys = all_pending_keys(&app).await;
    let today = shortlink_store::domain::Day::today().0;
    for want in [
        "blocklist".to_owned(),
        "domain:sho.rt".to_owned(),
        "link:sho.rt:promo".to_owned(),
        kv_model::salt_key(today),
        kv_model::salt_key(today + 1),
    ] {
        assert!(keys.contains(&want), "{keys:?}");
    }
    // A failed creation enqueues nothing.
    drain(&app).await;
    let (s, _) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://a.com", "short_code": "promo"}),
        )
        .await;
    assert_eq!(s, 400);
    assert!(pending_keys(&app).await.is_empty());
    app.stop().await;
}

const SECRET: &str = "internal-test-secret-0123456789abcdef";

async fn internal_routes(engine: Engine) {
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.internal_secret = Some(SECRET.into())
    })
    .await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let other = app.account(true).await;
    let (_, link) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://a.com/x", "short_code": "abc"}),
        )
        .await;
    let (_, theirs) = app
        .create_json(
            &other.key,
            json!({"long_url": "https://b.com/", "short_code": "zzz"}),
        )
        .await;
    let resolve = |path: &str, secret: Option<&str>| {
        let mut req = app.client.get(app.url(path));
        if let Some(s) = secret {
            req = req.bearer_auth(s);
        }
        req.send()
    };
    let (s, body) = json(
        resolve("/internal/v1/links/SHO.rt/ABC", Some(SECRET))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    // The link record, as a worker that predates `group` reads it …
    let as_link: LinkRecord = serde_json::from_value(body.clone()).unwrap();
    assert_eq!(
        as_link,
        LinkRecord {
            vouched: true,
            ..LinkRecord::new("https://a.com/x", acc.default_group_id.clone(), true)
        }
    );
    // … with the group's key and settings, as the publisher writes them to `group:<id>`, but not its hosts.
    let resolved = ResolvedLink::new(
        serde_json::from_value(body.clone()).unwrap(),
        serde_json::from_value(body["group"].clone()).unwrap(),
    );
    let published: GroupRecord = record(&app, &format!("group:{}", acc.default_group_id))
        .await
        .unwrap();
    assert_eq!(
        resolved.link().group_settings.as_ref(),
        Some(&published.settings)
    );
    assert_eq!(
        resolved.group,
        Some(GroupRecord {
            enabled_hosts: Vec::new(),
            ..published
        })
    );
    assert_eq!(
        resolved.link(),
        LinkRecord {
            group_settings: resolved.link().group_settings,
            ..as_link
        }
    );
    let (s, body) = json(
        resolve("/internal/v1/links/sho.rt/nope", Some(SECRET))
            .await
            .unwrap(),
    )
    .await;
    assert_error(s, &body, 404, "not_found");
    for bad in [None, Some("wrong"), Some(&acc.key[..])] {
        let (s, body) = json(resolve("/internal/v1/links/sho.rt/abc", bad).await.unwrap()).await;
        assert_error(s, &body, 401, "not_authenticated");
    }

    // Clicks: stored for known links and groups, then visible in the owner's stats only.
    let events = json!({"events": [
        {"host": "sho.rt", "short_code": "abc", "group_id": acc.default_group_id, "at": 1_800_000_000_000i64, "country": "us", "referer_host": "news.example", "device": "mobile"},
        {"host": "sho.rt", "short_code": "ABC", "group_id": acc.default_group_id, "at": 1_800_000_100_000i64, "country": "DE", "device": "desktop"},
        {"host": "sho.rt", "short_code": "abc", "group_id": acc.default_group_id, "at": 1_800_090_000_000i64, "device": "desktop"},
        {"host": "sho.rt", "short_code": "gone", "group_id": acc.default_group_id, "at": 1_800_000_000_000i64, "device": "desktop"},
        {"host": "sho.rt", "group_id": acc.default_group_id, "at": 1_800_000_000_000i64, "device": "desktop"},
    ]});
    let post = |body: serde_json::Value, secret: &str| {
        app.client
            .post(app.url("/internal/v1/clicks"))
            .bearer_auth(secret)
            .json(&body)
            .send()
    };
    let (s, body) = json(post(events, SECRET).await.unwrap()).await;
    assert_eq!((s, body), (200, json!({"stored": 4})));
    let (s, body) = json(post(json!({"events": []}), "nope").await.unwrap()).await;
    assert_error(s, &body, 401, "not_authenticated");
    let (s, body) = json(post(json!({"events": "x"}), SECRET).await.unwrap()).await;
    assert_error(s, &body, 400, "validation_error");

    let stats_path = format!(
        "/api/v1/external/links/{}/stats?from=2027-01-01&to=2027-01-31",
        link["id"].as_str().unwrap()
    );
    let (s, stats) = json(app.get(&acc.key, &stats_path).await).await;
    assert_eq!(s, 200);
    // Ties in byte order: unknown (null) first.
    assert_eq!(
        stats,
        json!({
            "link_id": link["id"], "from": "2027-01-01", "to": "2027-01-31", "total": 3, "unique_visitors": 0, "bots": 0,
            "by_day": [{"date": "2027-01-15", "clicks": 2, "unique_visitors": 0, "bots": 0}, {"date": "2027-01-16", "clicks": 1, "unique_visitors": 0, "bots": 0}],
            "by_country": [{"country": null, "clicks": 1}, {"country": "DE", "clicks": 1}, {"country": "US", "clicks": 1}],
            "by_device": [{"device": "desktop", "clicks": 2}, {"device": "mobile", "clicks": 1}],
            "by_referrer": [{"referer_host": null, "clicks": 2}, {"referer_host": "news.example", "clicks": 1}],
            // Events without a User-Agent, region, city or UTM parameters (older workers).
            "by_browser": [{"browser": "other", "clicks": 3}],
            "by_os": [{"os": "other", "clicks": 3}],
            "by_region": [{"country": null, "region": null, "clicks": 1},
                          {"country": "DE", "region": null, "clicks": 1},
                          {"country": "US", "region": null, "clicks": 1}],
            "by_city": [{"country": null, "city": null, "clicks": 1},
                        {"country": "DE", "city": null, "clicks": 1},
                        {"country": "US", "city": null, "clicks": 1}],
            "by_utm": {"utm_source": [{"value": null, "clicks": 3}], "utm_medium": [{"value": null, "clicks": 3}],
                       "utm_campaign": [{"value": null, "clicks": 3}]},
        })
    );
    // Another account's link, an unknown id and a malformed id are all 404.
    for path in [
        format!(
            "/api/v1/external/links/{}/stats",
            theirs["id"].as_str().unwrap()
        ),
        format!("/api/v1/external/links/{}/stats", uuid::Uuid::new_v4()),
        "/api/v1/external/links/not-a-uuid/stats".to_owned(),
    ] {
        let (s, body) = json(app.get(&acc.key, &path).await).await;
        assert_error(s, &body, 404, "not_found");
    }
    let (s, body) = json(app.client.get(app.url(&stats_path)).send().await.unwrap()).await;
    assert_error(s, &body, 401, "not_authenticated");
    app.stop().await;
}

async fn internal_routes_off_without_secret(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let (s, body) = json(
        app.client
            .get(app.url("/internal/v1/links/sho.rt/abc"))
            .bearer_auth("")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_error(s, &body, 404, "not_found");
    app.stop().await;
}

/// The hosts the records name as enabled (issue 28, `kv_model::GroupRecord::enabled_hosts`,
/// `BlocklistRecord::enabled_hosts`): the blocklist's record names the enabled platform domains, a group's its
/// account's enabled custom domains, each in byte order and only up to `MAX_ENABLED_HOSTS`; every change of a domain
/// republishes the records that name or would name it, in the same transaction.
async fn records_name_the_enabled_hosts(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let acc = app.account(true).await;
    let other = app.account(true).await;
    let promo = app
        .db
        .create_group(
            &acc.id,
            "Promo",
            &GroupSettings::default(),
            &Actor::Operator,
        )
        .await
        .unwrap();
    drain(&app).await;
    let blocklist = || async { record::<BlocklistRecord>(&app, "blocklist").await.unwrap() };
    let group = |id: String| {
        let app = &app;
        async move {
            record::<GroupRecord>(app, &format!("group:{id}"))
                .await
                .unwrap()
        }
    };
    assert!(blocklist().await.enabled_hosts.is_empty());

    // Platform domains: the blocklist's record, in byte order (`-` before `.`, whatever the collation).
    let platform = app.platform_domain("sho.rt").await;
    assert_eq!(pending_keys(&app).await, ["blocklist", "domain:sho.rt"]);
    app.platform_domain("a.sho.rt").await;
    app.platform_domain("a-z.sho.rt").await;
    assert_eq!(
        blocklist().await.enabled_hosts,
        ["a-z.sho.rt", "a.sho.rt", "sho.rt"]
    );
    assert!(
        group(acc.default_group_id.clone())
            .await
            .enabled_hosts
            .is_empty()
    );
    drain(&app).await;

    // A custom domain: every group of its account, and no other account's.
    let custom = app.custom_domain("links.acme.example", &acc).await;
    let mut keys = pending_keys(&app).await;
    keys.sort();
    let mut want = vec![
        "domain:links.acme.example".to_owned(),
        format!("group:{}", acc.default_group_id),
        format!("group:{}", promo.id),
    ];
    want.sort();
    assert_eq!(keys, want);
    for id in [acc.default_group_id.clone(), promo.id.clone()] {
        assert_eq!(group(id).await.enabled_hosts, ["links.acme.example"]);
    }
    assert!(
        group(other.default_group_id.clone())
            .await
            .enabled_hosts
            .is_empty()
    );
    assert_eq!(blocklist().await.enabled_hosts.len(), 3);
    drain(&app).await;

    // Disabled: no longer named, by the records republished with the domain's.
    app.db
        .disable_domain(&custom.id, &Actor::Operator)
        .await
        .unwrap();
    let mut keys = pending_keys(&app).await;
    keys.sort();
    assert_eq!(keys, want);
    assert!(group(promo.id.clone()).await.enabled_hosts.is_empty());
    drain(&app).await;
    app.db
        .disable_domain(&platform.id, &Actor::Operator)
        .await
        .unwrap();
    assert_eq!(pending_keys(&app).await, ["blocklist", "domain:sho.rt"]);
    assert_eq!(blocklist().await.enabled_hosts, ["a-z.sho.rt", "a.sho.rt"]);

    // Up to the bound every host is named; past it, none (a host not named is read from its domain's record).
    for i in 2..kv_model::MAX_ENABLED_HOSTS {
        app.platform_domain(&format!("p{i}.sho.rt")).await;
    }
    assert_eq!(
        blocklist().await.enabled_hosts.len(),
        kv_model::MAX_ENABLED_HOSTS
    );
    app.platform_domain("last.sho.rt").await;
    assert!(blocklist().await.enabled_hosts.is_empty());
    for i in 0..kv_model::MAX_ENABLED_HOSTS {
        app.custom_domain(&format!("c{i}.acme.example"), &acc).await;
    }
    assert_eq!(
        group(promo.id.clone()).await.enabled_hosts.len(),
        kv_model::MAX_ENABLED_HOSTS
    );
    app.custom_domain("last.acme.example", &acc).await;
    assert!(group(promo.id.clone()).await.enabled_hosts.is_empty());
    app.stop().await;
}

/// Migration 0024 puts in the outbox, once, the records that name enabled hosts from then on: the blocklist when a
/// platform domain is enabled, and the groups of each account with an enabled custom domain; no other group (its
/// record is as before), and no blocklist when no platform domain is enabled.
async fn migration_republishes_the_naming_records(engine: Engine) {
    for platform_enabled in ["1", "0"] {
        let test_db = TestDb::migrated_to(engine, 23).await;
        let pool = sqlx::AnyPool::connect(&test_db.url).await.unwrap();
        // Account `a` has two enabled custom domains (still one outbox row per group) and two groups, `b`
        // only a disabled custom domain, `c` none.
        let statements = [
            "INSERT INTO accounts (id, email, api_access, default_group_id, created_at) VALUES \
             ('a', 'a@example.com', 1, 'a1', 0), ('b', 'b@example.com', 1, 'b1', 0), \
             ('c', 'c@example.com', 1, 'c1', 0)",
            "INSERT INTO groups (id, account_id, name, key, settings, created_at) VALUES \
             ('a1', 'a', 'Default', 'ka1', '{}', 0), ('a2', 'a', 'Promo', 'ka2', '{}', 0), \
             ('b1', 'b', 'Default', 'kb1', '{}', 0), ('c1', 'c', 'Default', 'kc1', '{}', 0)",
            "INSERT INTO domains (id, host, account_id, is_platform, enabled, created_at) VALUES \
             ('da', 'go.a.example', 'a', 0, 1, 0), ('da2', 'links.a.example', 'a', 0, 1, 0), \
             ('db', 'go.b.example', 'b', 0, 0, 0)",
        ];
        for sql in statements {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
        sqlx::query(&format!(
            "INSERT INTO domains (id, host, is_platform, enabled, created_at) \
             VALUES ('dp', 'sho.rt', 1, {platform_enabled}, 0)"
        ))
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
        let db = test_db.migrate_rest().await;
        let mut keys: Vec<String> = db
            .outbox_batch(100)
            .await
            .unwrap()
            .into_iter()
            .map(|(_, k)| k)
            .filter(|k| !k.starts_with("salt:"))
            .collect();
        keys.sort();
        let mut want = vec!["group:a1", "group:a2"];
        if platform_enabled == "1" {
            want.insert(0, "blocklist");
        }
        assert_eq!(keys, want, "platform domain enabled: {platform_enabled}");
        // Written with the outbox's clock (microseconds): the publisher's lag reads them as just written.
        let lag = db.outbox_lag().await.unwrap();
        assert!((0..60_000).contains(&lag.oldest_age_ms), "{lag:?}");
        // What the publisher will read for them names the hosts.
        let group: GroupRecord =
            serde_json::from_str(&db.kv_record("group:a2").await.unwrap().unwrap()).unwrap();
        assert_eq!(group.enabled_hosts, ["go.a.example", "links.a.example"]);
        let blocklist: BlocklistRecord =
            serde_json::from_str(&db.kv_record("blocklist").await.unwrap().unwrap()).unwrap();
        let named: &[&str] = if platform_enabled == "1" {
            &["sho.rt"]
        } else {
            &[]
        };
        assert_eq!(blocklist.enabled_hosts, named);
        db.close().await;
    }
}

both_engines!(
    records_name_the_enabled_hosts,
    migration_republishes_the_naming_records,
    every_change_enqueues_its_key,
    internal_routes,
    internal_routes_off_without_secret
);
