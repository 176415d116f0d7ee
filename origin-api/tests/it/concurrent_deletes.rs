//! Deleting one thing many times at once (hardening issue, item 6): of 20 parallel `DELETE`s of one link exactly one
//! answers 204 and the others 404, and the account's counters stay exact: the list's `total` and the hourly
//! creation budget (the deleted link's creation is charged once). The same for a group. Both engines; on
//! PostgreSQL (read committed) the deletes used to read the row, all delete it, and all count it.

use crate::common::{Engine, TestApp, assert_error, json};
use futures::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::json;
use shortlink_store::{Actor, StoreError};

const LINKS: &str = "/api/v1/external/links";
const PARALLEL: usize = 20;

/// `PARALLEL` deletes of `path` at once: (how many 204, how many 404), each 404 with the error shape.
async fn delete_at_once(app: &TestApp, key: &str, path: &str) -> (usize, usize) {
    let answers = join_all((0..PARALLEL).map(|_| app.send(Method::DELETE, key, path, None))).await;
    let (mut deleted, mut missing) = (0, 0);
    for (status, body) in answers {
        match status {
            204 => deleted += 1,
            404 => {
                assert_error(status, &body, 404, "not_found");
                missing += 1;
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    (deleted, missing)
}

async fn one_of_many_deletes_wins(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let mut ids = Vec::new();
    for i in 0..4 {
        let (s, link) = app
            .create_json(
                &acc.key,
                json!({"long_url": format!("https://example.com/{i}")}),
            )
            .await;
        assert_eq!(s, 201, "{link}");
        ids.push(link["id"].as_str().unwrap().to_owned());
    }

    let path = format!("{LINKS}/{}", ids[0]);
    assert_eq!(
        delete_at_once(&app, &acc.key, &path).await,
        (1, PARALLEL - 1)
    );
    // The same through the store directly, without the HTTP layer's write budget in front (whose own
    // serialisation spaces the requests out a little).
    let outcomes =
        join_all((0..PARALLEL).map(|_| app.db.delete_link(&acc.id, &ids[1], &Actor::Operator)))
            .await;
    let deleted = outcomes.iter().filter(|r| r.is_ok()).count();
    assert_eq!(deleted, 1, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|r| r.is_ok() || matches!(r, Err(StoreError::NotFound(_)))),
        "{outcomes:?}"
    );

    // The list's total (the account's link counter) went down by one per link, not by every 204.
    let (s, list) = json(app.get(&acc.key, LINKS).await).await;
    assert_eq!(s, 200);
    assert_eq!(list["total"], 2, "{list}");
    assert_eq!(list["results"].as_array().unwrap().len(), 2);
    // Each deleted creation is charged once: 4 creations and this one leave 95 of 100.
    let next = app
        .create(&acc.key, json!({"long_url": "https://example.com/next"}))
        .await;
    assert_eq!(next.status(), 201);
    assert_eq!(next.headers()["x-ratelimit-remaining"], "95");
    let (_, list) = json(app.get(&acc.key, LINKS).await).await;
    assert_eq!(list["total"], 3, "{list}");

    // A group deleted many times at once: one 204, its links moved to the default group once.
    let group = app.group(&acc, "Doomed").await;
    let (s, moved) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://example.com/moved", "group_id": group}),
        )
        .await;
    assert_eq!(s, 201, "{moved}");
    let path = format!("/api/v1/external/groups/{group}");
    assert_eq!(
        delete_at_once(&app, &acc.key, &path).await,
        (1, PARALLEL - 1)
    );
    let (s, link) = app
        .send(
            Method::GET,
            &acc.key,
            &format!("{LINKS}/{}", moved["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(
        (s, link["group_id"].as_str()),
        (200, Some(acc.default_group_id.as_str()))
    );
    app.stop().await;
}

/// The dashboard deletes through the same store call: of parallel delete forms for one link (several tabs, a
/// double click), one deletes it and the others find nothing; the counters stay exact.
async fn dashboard_deletes_at_once(engine: Engine) {
    use crate::dashboard::{Browser, email};
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let mut b = Browser::new(&app);
    let address = email();
    b.join(&app, &address).await;
    let account = app.db.find_account(&address).await.unwrap();
    let csrf = b.get("/dashboard/").await.csrf();
    for i in 0..2 {
        let url = format!("https://example.com/{i}");
        let made = b
            .post("/dashboard/links", &[("csrf", &csrf), ("long_url", &url)])
            .await;
        assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    }
    let id = app
        .db
        .list_links(&account.id, 10, 0, None)
        .await
        .unwrap()
        .results[0]
        .id
        .clone();
    let url = format!("{}/dashboard/links/{id}/delete", app.base);
    let cookie = b.cookie.clone().unwrap();
    let posts = (0..PARALLEL).map(|_| {
        b.client
            .post(&url)
            .header("cookie", &cookie)
            .header("origin", &app.base)
            .form(&[("csrf", csrf.as_str())])
            .send()
    });
    let statuses: Vec<StatusCode> = join_all(posts)
        .await
        .into_iter()
        .map(|r| r.unwrap().status())
        .collect();
    let deleted = statuses
        .iter()
        .filter(|s| **s == StatusCode::SEE_OTHER)
        .count();
    let missing = statuses
        .iter()
        .filter(|s| **s == StatusCode::NOT_FOUND)
        .count();
    assert_eq!((deleted, missing), (1, PARALLEL - 1), "{statuses:?}");
    let page = app.db.list_links(&account.id, 10, 0, None).await.unwrap();
    assert_eq!((page.total, page.results.len()), (1, 1));
    app.stop().await;
}

both_engines!(one_of_many_deletes_wins, dashboard_deletes_at_once);
