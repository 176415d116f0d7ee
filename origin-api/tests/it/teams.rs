//! Teams (issue 23) over HTTP, on both engines: the role table row by row (allowed works; forbidden is a 403 page
//! and changes nothing; the control is not shown), the last-owner rule (also under concurrency), removal ending
//! access at once, invitations (one use, 72 hours, bound to their email, existing users accept signed in), the
//! account switcher and isolation between accounts, and the activity rows the dashboard writes.

use crate::cli::Cli;
use crate::common::{Engine, TestApp, TestDb};
use crate::dashboard::{Browser, PASSWORD, Page, email};
use reqwest::StatusCode;
use shortlink_store::Db;

both_engines!(
    the_role_table_row_by_row,
    the_last_owner_stays,
    removal_ends_access_at_once,
    invitations_are_one_use_bound_and_expire,
    existing_users_accept_signed_in_and_switch,
    members_of_other_accounts_are_not_found,
    the_operator_manages_members,
    every_role_every_row,
    member_forms_need_the_csrf_token,
);

/// The value of the read-only "Invitation link" field on a Members page.
fn invitation_link(page: &Page) -> String {
    let at = page
        .body
        .find(r#"id="invitation-link""#)
        .unwrap_or_else(|| panic!("no invitation link: {}", page.body));
    let rest = &page.body[at..];
    let v = rest.find(r#"value=""#).unwrap() + r#"value=""#.len();
    let rest = &rest[v..];
    rest[..rest.find('"').unwrap()].to_owned()
}

/// An owner invites `address` as `role` on the Members page; returns the invitation's path.
pub(crate) async fn invite(owner: &mut Browser, address: &str, role: &str) -> String {
    let csrf = owner.get("/dashboard/members").await.csrf();
    let page = owner
        .post(
            "/dashboard/members/invite",
            &[("csrf", &csrf), ("email", address), ("role", role)],
        )
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let url = invitation_link(&page);
    url[url.find("/dashboard/invite/").unwrap()..].to_owned()
}

/// A new person accepts an invitation with [`PASSWORD`]; signed in afterwards.
pub(crate) async fn accept(app: &TestApp, path: &str) -> Browser {
    let mut b = Browser::new(app);
    let page = b
        .post(path, &[("password", PASSWORD), ("confirm", PASSWORD)])
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    b
}

/// The user id of `address` (the id the Members page's forms use), from the store.
async fn member_id(app: &TestApp, address: &str) -> String {
    for account in app.db.list_accounts().await.unwrap() {
        if let Ok(m) = app.db.member_by_email(&account.id, address).await {
            return m.user_id;
        }
    }
    panic!("{address} is nobody's member")
}

struct Team {
    app: TestApp,
    owner: Browser,
    viewer: Browser,
    member: Browser,
    admin: Browser,
    emails: [String; 4],
}

async fn team(engine: Engine) -> Team {
    // Webhook endpoints on loopback (the Webhooks rows of the matrix).
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.webhooks.allow_private = true;
    })
    .await;
    app.platform_domain("sho.rt").await;
    let mut owner = Browser::new(&app);
    let owner_email = email();
    owner.join(&app, &owner_email).await;
    let (v, m, a) = (email(), email(), email());
    let viewer = accept(&app, &invite(&mut owner, &v, "viewer").await).await;
    let member = accept(&app, &invite(&mut owner, &m, "member").await).await;
    let admin = accept(&app, &invite(&mut owner, &a, "admin").await).await;
    Team {
        app,
        owner,
        viewer,
        member,
        admin,
        emails: [v, m, a, owner_email],
    }
}

async fn link_count(db: &Db, account: &str) -> i64 {
    db.list_links(account, 100, 0, None)
        .await
        .map(|p| p.total)
        .unwrap()
}

async fn create_link(b: &mut Browser, code: &str) -> Page {
    let csrf = b.get("/dashboard/groups").await.csrf();
    b.post(
        "/dashboard/links",
        &[
            ("csrf", &csrf),
            ("long_url", "https://example.com/team"),
            ("short_code", code),
        ],
    )
    .await
}

async fn the_role_table_row_by_row(engine: Engine) {
    let Team {
        app,
        mut owner,
        mut viewer,
        mut member,
        mut admin,
        emails,
    } = team(engine).await;
    let account = app.db.find_account(&emails[3]).await.unwrap();
    let made = create_link(&mut owner, "team-owner").await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    let link_id = app
        .db
        .list_links(&account.id, 100, 0, None)
        .await
        .unwrap()
        .results[0]
        .id
        .clone();

    // Row 1: everyone sees links, statistics, groups (not keys) and domains.
    for b in [&mut viewer, &mut member, &mut admin, &mut owner] {
        for path in [
            "/dashboard/".to_owned(),
            "/dashboard/groups".to_owned(),
            "/dashboard/domains".to_owned(),
            format!("/dashboard/links/{link_id}"),
            format!("/dashboard/groups/{}", account.default_group_id),
        ] {
            let page = b.get(&path).await;
            assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        }
    }
    let key = app
        .db
        .group_key(&account.default_group_id)
        .await
        .unwrap()
        .unwrap();
    let group_page = format!("/dashboard/groups/{}", account.default_group_id);
    assert!(
        !viewer.get(&group_page).await.body.contains(&key),
        "a viewer sees no group key"
    );
    assert!(
        member.get(&group_page).await.body.contains(&key),
        "a member sees the group key"
    );

    // Row 2: links are members' and up. The viewer's page has no create form and no pause button; a forged post
    // is a 403 page and changes nothing.
    let home = viewer.get("/dashboard/").await;
    assert!(
        !home.body.contains(r#"action="/dashboard/links""#),
        "{}",
        home.body
    );
    assert!(!home.body.contains("/pause"), "{}", home.body);
    let before = link_count(&app.db, &account.id).await;
    let forged = create_link(&mut viewer, "team-viewer").await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);
    assert!(forged.body.contains("Not allowed"));
    assert_eq!(link_count(&app.db, &account.id).await, before);
    let csrf = viewer.get("/dashboard/").await.csrf();
    for path in ["pause", "delete"] {
        let page = viewer
            .post(
                &format!("/dashboard/links/{link_id}/{path}"),
                &[("csrf", &csrf)],
            )
            .await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{path}");
    }
    let edit = viewer
        .post(
            &format!("/dashboard/links/{link_id}"),
            &[("csrf", &csrf), ("long_url", "https://evil.example/")],
        )
        .await;
    assert_eq!(edit.status, StatusCode::FORBIDDEN);
    let link = app.db.get_link(&account.id, &link_id).await.unwrap();
    assert!(link.is_active && link.long_url == "https://example.com/team");
    let made = create_link(&mut member, "team-member").await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    let csrf = member.get("/dashboard/").await.csrf();
    let paused = member
        .post(
            &format!("/dashboard/links/{link_id}/pause"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(paused.status, StatusCode::SEE_OTHER);
    assert!(
        !app.db
            .get_link(&account.id, &link_id)
            .await
            .unwrap()
            .is_active
    );

    // Row 3: groups are admins' and up.
    let groups = member.get("/dashboard/groups").await;
    assert!(!groups.body.contains("Create group"), "{}", groups.body);
    let csrf = groups.csrf();
    let forged = member
        .post(
            "/dashboard/groups",
            &[("csrf", &csrf), ("name", "Member's")],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    for path in ["settings", "rotate", "delete"] {
        let page = member
            .post(
                &format!("/dashboard/groups/{}/{path}", account.default_group_id),
                &[("csrf", &csrf), ("password", PASSWORD)],
            )
            .await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{path}");
    }
    assert_eq!(app.db.group_rows(&account.id).await.unwrap().len(), 1);
    assert_eq!(
        app.db
            .group_key(&account.default_group_id)
            .await
            .unwrap()
            .unwrap(),
        key
    );
    let csrf = admin.get("/dashboard/groups").await.csrf();
    let made = admin
        .post("/dashboard/groups", &[("csrf", &csrf), ("name", "Admin's")])
        .await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);

    // Row 4: the API key is admins' and up (the page too: it is where the key lives).
    for b in [&mut viewer, &mut member] {
        let home = b.get("/dashboard/").await;
        assert!(!home.body.contains(r#"href="/dashboard/key""#));
        assert_eq!(b.get("/dashboard/key").await.status, StatusCode::FORBIDDEN);
        let csrf = home.csrf();
        let forged = b
            .post(
                "/dashboard/key/generate",
                &[("csrf", &csrf), ("password", PASSWORD)],
            )
            .await;
        assert_eq!(forged.status, StatusCode::FORBIDDEN);
    }
    assert!(app.db.masked_api_key(&account.id).await.unwrap().is_none());
    let csrf = admin.get("/dashboard/key").await.csrf();
    let made = admin
        .post(
            "/dashboard/key/generate",
            &[("csrf", &csrf), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.body);
    assert!(app.db.masked_api_key(&account.id).await.unwrap().is_some());

    // Row 5: members and the activity log are admins' and up; admins manage everyone but owners.
    for b in [&mut viewer, &mut member] {
        let home = b.get("/dashboard/").await;
        assert!(
            !home.body.contains("/dashboard/members") && !home.body.contains("/dashboard/activity")
        );
        assert_eq!(
            b.get("/dashboard/members").await.status,
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            b.get("/dashboard/activity").await.status,
            StatusCode::FORBIDDEN
        );
        let forged = b
            .post(
                "/dashboard/members/invite",
                &[
                    ("csrf", &home.csrf()),
                    ("email", &email()),
                    ("role", "viewer"),
                ],
            )
            .await;
        assert_eq!(forged.status, StatusCode::FORBIDDEN);
    }
    let admin_members = admin.get("/dashboard/members").await;
    assert!(
        !admin_members.body.contains(r#"<option value="owner""#),
        "admins cannot give owner"
    );
    let invited = invite(&mut admin, &email(), "member").await;
    assert!(invited.starts_with("/dashboard/invite/"));
    let csrf = admin_members.csrf();
    let forged = admin
        .post(
            "/dashboard/members/invite",
            &[("csrf", &csrf), ("email", &email()), ("role", "owner")],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    let owner_id = member_id(&app, &emails[3]).await;
    for (path, form) in [
        (
            format!("/dashboard/members/{owner_id}/role"),
            vec![("csrf", csrf.as_str()), ("role", "viewer")],
        ),
        (
            format!("/dashboard/members/{owner_id}/remove"),
            vec![("csrf", csrf.as_str())],
        ),
    ] {
        let page = admin.post(&path, &form).await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{path}");
    }
    let viewer_id = member_id(&app, &emails[0]).await;
    let promoted = admin
        .post(
            &format!("/dashboard/members/{viewer_id}/role"),
            &[("csrf", &csrf), ("role", "member")],
        )
        .await;
    assert_eq!(promoted.status, StatusCode::SEE_OTHER);
    assert!(
        viewer
            .get("/dashboard/")
            .await
            .body
            .contains(r#"action="/dashboard/links""#)
    );
    let demoted = admin
        .post(
            &format!("/dashboard/members/{viewer_id}/role"),
            &[("csrf", &csrf), ("role", "viewer")],
        )
        .await;
    assert_eq!(demoted.status, StatusCode::SEE_OTHER);

    // Row 6: owners manage owners and rename the account.
    let forged = admin
        .post(
            "/dashboard/account/rename",
            &[("csrf", &csrf), ("name", "Admin's name")],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert!(!admin_members.body.contains("Rename account"));
    let csrf = owner.get("/dashboard/members").await.csrf();
    let renamed = owner
        .post(
            "/dashboard/account/rename",
            &[("csrf", &csrf), ("name", "  Team <b>One</b> ")],
        )
        .await;
    assert_eq!(renamed.status, StatusCode::SEE_OTHER);
    let home = viewer.get("/dashboard/").await;
    assert!(
        home.body.contains("Team &") && !home.body.contains("<b>One"),
        "every page shows the escaped name"
    );
    let second_owner = invite(&mut owner, &email(), "owner").await;
    accept(&app, &second_owner).await;

    // The activity log says who did what, newest first, with the dashboard users' emails.
    let activity = owner.get("/dashboard/activity").await;
    assert_eq!(activity.status, StatusCode::OK);
    for (who, what) in [
        (&emails[1], "link.paused"),
        (&emails[1], "link.created"),
        (&emails[2], "group.created"),
        (&emails[2], "api_key.generated"),
        (&emails[2], "member.role_changed"),
        (&emails[3], "account.renamed"),
        (&emails[3], "member.invited"),
        (&emails[0], "member.joined"),
    ] {
        let row = activity
            .body
            .split("<tr>")
            .find(|r| r.contains(who.as_str()) && r.contains(what))
            .unwrap_or_else(|| panic!("no {what} by {who}: {}", activity.body));
        assert!(row.contains("UTC"), "{row}");
    }
    assert!(
        activity.body.find("account.renamed").unwrap()
            < activity.body.find("link.created").unwrap()
    );
    assert!(
        activity.body.contains("https://sho.rt/team-member"),
        "a link's target is its short URL"
    );
}

async fn the_last_owner_stays(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let mut owner = Browser::new(&app);
    let address = email();
    owner.join(&app, &address).await;
    let me = member_id(&app, &address).await;
    let page = owner.get("/dashboard/members").await;
    // The last owner's row offers no control that would be refused.
    assert!(
        !page.body.contains("Remove member") && !page.body.contains("Save role"),
        "{}",
        page.body
    );
    let csrf = page.csrf();
    for (path, form) in [
        (
            format!("/dashboard/members/{me}/role"),
            vec![("csrf", csrf.as_str()), ("role", "admin")],
        ),
        (
            format!("/dashboard/members/{me}/remove"),
            vec![("csrf", csrf.as_str())],
        ),
        (
            "/dashboard/account/leave".to_owned(),
            vec![("csrf", csrf.as_str())],
        ),
    ] {
        let page = owner.post(&path, &form).await;
        assert_eq!(page.status, StatusCode::CONFLICT, "{path}");
        assert!(page.body.contains("without an owner"), "{}", page.body);
    }
    assert_eq!(owner.get("/dashboard/members").await.status, StatusCode::OK);
    // Two owners who demote each other at the same moment: one of them stays an owner.
    let second = email();
    let mut other = accept(&app, &invite(&mut owner, &second, "owner").await).await;
    let other_id = member_id(&app, &second).await;
    let other_csrf = other.get("/dashboard/members").await.csrf();
    let (demote_other, demote_me) = (
        format!("/dashboard/members/{other_id}/role"),
        format!("/dashboard/members/{me}/role"),
    );
    let (form_a, form_b) = (
        [("csrf", csrf.as_str()), ("role", "admin")],
        [("csrf", other_csrf.as_str()), ("role", "admin")],
    );
    let (a, b) = tokio::join!(
        owner.post(&demote_other, &form_a),
        other.post(&demote_me, &form_b),
    );
    // One wins; the other finds the account would lose its last owner (409), or that it is an admin now and
    // may not touch an owner (403). Either way one owner stays.
    let won = [a.status, b.status]
        .iter()
        .filter(|s| **s == StatusCode::SEE_OTHER)
        .count();
    assert_eq!(won, 1, "{} {}", a.status, b.status);
    assert!([a.status, b.status].iter().all(|s| {
        [
            StatusCode::SEE_OTHER,
            StatusCode::CONFLICT,
            StatusCode::FORBIDDEN,
        ]
        .contains(s)
    }));
    let account = app.db.find_account(&address).await.unwrap();
    let owners = app
        .db
        .members(&account.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.role == shortlink_store::domain::Role::Owner)
        .count();
    assert_eq!(owners, 1);
}

async fn removal_ends_access_at_once(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let mut owner = Browser::new(&app);
    owner.join(&app, &email()).await;
    let address = email();
    let mut member = accept(&app, &invite(&mut owner, &address, "member").await).await;
    assert_eq!(member.get("/dashboard/").await.status, StatusCode::OK);
    let id = member_id(&app, &address).await;
    let confirm = owner.get(&format!("/dashboard/members/{id}/remove")).await;
    assert!(confirm.body.contains("Remove member"));
    let page = owner
        .post(
            &format!("/dashboard/members/{id}/remove"),
            &[("csrf", &confirm.csrf())],
        )
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    // The member's very next request, on the same session, has lost the account.
    let next = member.get("/dashboard/").await;
    assert_eq!(next.status, StatusCode::FORBIDDEN);
    assert!(
        next.body.contains("not a member of any account"),
        "{}",
        next.body
    );
    let csrf = next.csrf();
    let forged = member
        .post(
            "/dashboard/links",
            &[("csrf", &csrf), ("long_url", "https://example.com/")],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    // Signing in again does not bring it back.
    let mut again = Browser::new(&app);
    assert_eq!(
        again.sign_in(&address, PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
    assert_eq!(again.get("/dashboard/").await.status, StatusCode::FORBIDDEN);
}

async fn invitations_are_one_use_bound_and_expire(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let url = test_db.url.clone();
    let app = TestApp::on(test_db).await;
    let mut owner = Browser::new(&app);
    owner.join(&app, &email()).await;
    let path = invite(&mut owner, &email(), "viewer").await;
    let page = Browser::new(&app).get(&path).await;
    assert!(page.body.contains("Accept invitation") && page.body.contains("viewer"));
    accept(&app, &path).await;
    let again = Browser::new(&app)
        .post(&path, &[("password", PASSWORD), ("confirm", PASSWORD)])
        .await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    // A newer invitation of the same email replaces the older.
    let address = email();
    let older = invite(&mut owner, &address, "member").await;
    let newer = invite(&mut owner, &address, "viewer").await;
    assert_eq!(
        Browser::new(&app).get(&older).await.status,
        StatusCode::NOT_FOUND
    );
    // 72 hours: past its expiry it is gone.
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    sqlx::query("UPDATE invitations SET expires_at = expires_at - 259200000000")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    assert_eq!(
        Browser::new(&app).get(&newer).await.status,
        StatusCode::NOT_FOUND
    );
    let late = Browser::new(&app)
        .post(&newer, &[("password", PASSWORD), ("confirm", PASSWORD)])
        .await;
    assert_eq!(late.status, StatusCode::NOT_FOUND);
    assert_eq!(
        Browser::new(&app).sign_in(&address, PASSWORD).await.status,
        StatusCode::UNAUTHORIZED
    );
}

async fn existing_users_accept_signed_in_and_switch(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let (first, second) = (email(), email());
    let mut alice = Browser::new(&app);
    alice.join(&app, &first).await;
    let mut bob = Browser::new(&app);
    bob.join(&app, &second).await;
    let made = create_link(&mut bob, "bobs").await;
    assert_eq!(made.status, StatusCode::SEE_OTHER);
    let bobs = app.db.find_account(&second).await.unwrap();
    let bobs_link = app
        .db
        .list_links(&bobs.id, 100, 0, None)
        .await
        .unwrap()
        .results[0]
        .id
        .clone();
    // Bob invites Alice, who has a password: signed out she is asked to sign in first and comes back.
    let path = invite(&mut bob, &first, "member").await;
    let mut signed_out = Browser::new(&app);
    let page = signed_out.get(&path).await;
    assert!(page.body.contains("Sign in to accept"), "{}", page.body);
    let page = signed_out
        .post(
            "/dashboard/sign-in",
            &[("email", &first), ("password", PASSWORD), ("next", &path)],
        )
        .await;
    assert_eq!(page.location(), path);
    // Someone else signed in sees that it is not theirs, and cannot take it.
    let page = bob.get(&path).await;
    assert!(page.body.contains("for someone else"), "{}", page.body);
    let bobs_csrf = bob.get("/dashboard/").await.csrf();
    let taken = bob.post(&path, &[("csrf", &bobs_csrf)]).await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    // Alice, signed in: one button, with her session's CSRF token.
    let page = alice.get(&path).await;
    assert!(page.body.contains("Accept invitation") && !page.body.contains("New password"));
    let forged = alice.post(&path, &[("csrf", "x")]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    let joined = alice.post(&path, &[("csrf", &page.csrf())]).await;
    assert_eq!(joined.status, StatusCode::SEE_OTHER);
    let home = alice.get("/dashboard/").await;
    assert!(
        home.body
            .contains(r#"<label for="account-switch">Account</label>"#),
        "{}",
        home.body
    );
    assert!(home.body.contains("bobs"), "she now looks at Bob's account");
    assert_eq!(
        alice
            .get(&format!("/dashboard/links/{bobs_link}"))
            .await
            .status,
        StatusCode::OK
    );
    // Back to her own account: Bob's link is not found there.
    let alices = app.db.find_account(&first).await.unwrap();
    let switched = alice
        .post(
            "/dashboard/account/switch",
            &[("csrf", &home.csrf()), ("account_id", &alices.id)],
        )
        .await;
    assert_eq!(switched.status, StatusCode::SEE_OTHER);
    assert_eq!(
        alice
            .get(&format!("/dashboard/links/{bobs_link}"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert!(!alice.get("/dashboard/").await.body.contains("bobs"));
    // An account she does not belong to cannot be switched to.
    let mut carol = Browser::new(&app);
    carol.join(&app, &email()).await;
    let carols = carol.get("/dashboard/members").await;
    let carols_id = app
        .db
        .list_accounts()
        .await
        .unwrap()
        .last()
        .unwrap()
        .id
        .clone();
    let refused = alice
        .post(
            "/dashboard/account/switch",
            &[("csrf", &home.csrf()), ("account_id", &carols_id)],
        )
        .await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND);
    assert_eq!(carols.status, StatusCode::OK);
}

async fn members_of_other_accounts_are_not_found(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let mut one = Browser::new(&app);
    one.join(&app, &email()).await;
    let mut two = Browser::new(&app);
    let two_email = email();
    two.join(&app, &two_email).await;
    let theirs = member_id(&app, &two_email).await;
    let csrf = one.get("/dashboard/members").await.csrf();
    for (path, form) in [
        (
            format!("/dashboard/members/{theirs}/role"),
            vec![("csrf", csrf.as_str()), ("role", "viewer")],
        ),
        (
            format!("/dashboard/members/{theirs}/remove"),
            vec![("csrf", csrf.as_str())],
        ),
    ] {
        assert_eq!(
            one.post(&path, &form).await.status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    assert_eq!(
        one.get(&format!("/dashboard/members/{theirs}/remove"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    // CSRF on every member form.
    let page = one
        .post(
            "/dashboard/members/invite",
            &[("csrf", "wrong"), ("email", &email()), ("role", "viewer")],
        )
        .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    // Emails and names are escaped.
    let page = one
        .post(
            "/dashboard/members/invite",
            &[
                ("csrf", &csrf),
                ("email", "<script>@x.example"),
                ("role", "viewer"),
            ],
        )
        .await;
    assert!(!page.body.contains("<script>@"), "{}", page.body);
}

/// `admin member list|invite|remove` and `admin user disable`, through the real binary; the activity log says
/// "operator".
async fn the_operator_manages_members(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let cli = Cli {
        url: test_db.url.clone(),
    };
    let app = TestApp::on(test_db).await;
    let owner_email = email();
    let mut owner = Browser::new(&app);
    owner.join(&app, &owner_email).await;
    let account = app.db.find_account(&owner_email).await.unwrap().id;
    let listed = cli.ok(&["admin", "member", "list", "--account", &account]);
    assert_eq!(listed["results"][0]["email"], owner_email.as_str());
    assert_eq!(listed["results"][0]["role"], "owner");
    let address = email();
    let invited = cli.ok(&[
        "admin",
        "member",
        "invite",
        "--account",
        &account,
        "--email",
        &address,
        "--role",
        "admin",
        "--public-url",
        &app.base,
    ]);
    let url = invited["invite_url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{}/dashboard/invite/", app.base)),
        "{url}"
    );
    assert!(invited["expires_at"].as_str().unwrap().ends_with('Z'));
    let path = &url[app.base.len()..];
    let mut admin = accept(&app, path).await;
    assert_eq!(admin.get("/dashboard/members").await.status, StatusCode::OK);
    for bad in [
        vec![
            "admin",
            "member",
            "invite",
            "--account",
            &account,
            "--email",
            "x@example.com",
            "--role",
            "boss",
        ],
        vec![
            "admin",
            "member",
            "invite",
            "--account",
            &account,
            "--email",
            "not-an-email",
            "--role",
            "viewer",
        ],
        vec![
            "admin",
            "member",
            "list",
            "--account",
            "00000000-0000-4000-8000-000000000000",
        ],
        vec![
            "admin",
            "member",
            "remove",
            "--account",
            &account,
            "--email",
            "nobody@example.com",
        ],
        // The last owner stays.
        vec![
            "admin",
            "member",
            "remove",
            "--account",
            &account,
            "--email",
            &owner_email,
        ],
    ] {
        assert!(cli.run(&bad).is_err(), "{bad:?}");
    }
    cli.ok(&[
        "admin",
        "member",
        "remove",
        "--account",
        &account,
        "--email",
        &address,
    ]);
    assert_eq!(admin.get("/dashboard/").await.status, StatusCode::FORBIDDEN);
    // A disabled user is signed out everywhere and cannot sign in.
    cli.ok(&["admin", "user", "disable", "--email", &owner_email]);
    assert_eq!(owner.get("/dashboard/").await.status, StatusCode::SEE_OTHER);
    assert_eq!(
        Browser::new(&app)
            .sign_in(&owner_email, PASSWORD)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    cli.ok(&["admin", "user", "enable", "--email", &owner_email]);
    assert_eq!(
        Browser::new(&app)
            .sign_in(&owner_email, PASSWORD)
            .await
            .status,
        StatusCode::SEE_OTHER
    );
    let log = app.db.audit_log(&account, 50, 0).await.unwrap();
    let by_operator: Vec<&str> = log
        .results
        .iter()
        .filter(|e| e.actor_type == "operator")
        .map(|e| e.action.as_str())
        .collect();
    assert!(
        by_operator.contains(&"member.invited") && by_operator.contains(&"member.removed"),
        "{by_operator:?}"
    );
}

/// The role table as a matrix: for each role and each row past the first, the control is shown exactly when the
/// role may use it, and a request for it works exactly then (else a 403 page that changed nothing).
async fn every_role_every_row(engine: Engine) {
    let Team {
        app,
        mut owner,
        mut viewer,
        mut member,
        mut admin,
        emails,
    } = team(engine).await;
    let account = app.db.find_account(&emails[3]).await.unwrap().id;
    let roles: [(&str, &mut Browser, [bool; 6]); 4] = [
        (
            "viewer",
            &mut viewer,
            [false, false, false, false, false, false],
        ),
        (
            "member",
            &mut member,
            [true, false, false, false, false, false],
        ),
        ("admin", &mut admin, [true, true, true, true, false, true]),
        ("owner", &mut owner, [true, true, true, true, true, true]),
    ];
    // An endpoint of the account's, with one delivery in its log, for the roles that may not add their own.
    let (theirs, theirs_event) = webhook_with_event(&app, &account, "matrix").await;
    for (role, b, may) in roles {
        let [links, groups, key, members, owners, hooks] = may;
        let home = b.get("/dashboard/").await;
        let csrf = home.csrf();
        // Shown?
        assert_eq!(
            home.body.contains(r#"action="/dashboard/links""#),
            links,
            "{role}: new link form"
        );
        let groups_page = b.get("/dashboard/groups").await;
        assert_eq!(
            groups_page.body.contains("Create group"),
            groups,
            "{role}: new group form"
        );
        assert_eq!(
            home.body.contains(r#"href="/dashboard/key""#),
            key,
            "{role}: API key nav"
        );
        assert_eq!(
            home.body.contains(r#"href="/dashboard/members""#),
            members,
            "{role}: Members nav"
        );
        assert_eq!(
            home.body.contains(r#"href="/dashboard/activity""#),
            members,
            "{role}: Activity nav"
        );
        if members {
            let page = b.get("/dashboard/members").await;
            assert_eq!(
                page.body.contains("Rename account"),
                owners,
                "{role}: rename form"
            );
            assert_eq!(
                page.body.contains(r#"<option value="owner""#),
                owners,
                "{role}: owner role offered"
            );
        }
        // Works exactly when allowed.
        let expect =
            |allowed: bool, ok: StatusCode| if allowed { ok } else { StatusCode::FORBIDDEN };
        let before = link_count(&app.db, &account).await;
        let made = create_link(b, &format!("row-{role}")).await;
        assert_eq!(
            made.status,
            expect(links, StatusCode::SEE_OTHER),
            "{role}: create link"
        );
        assert_eq!(
            link_count(&app.db, &account).await,
            before + i64::from(links)
        );
        let groups_before = app.db.group_rows(&account).await.unwrap().len();
        let made = b
            .post(
                "/dashboard/groups",
                &[("csrf", &csrf), ("name", &format!("Row {role}"))],
            )
            .await;
        assert_eq!(
            made.status,
            expect(groups, StatusCode::SEE_OTHER),
            "{role}: create group"
        );
        assert_eq!(
            app.db.group_rows(&account).await.unwrap().len(),
            groups_before + usize::from(groups)
        );
        assert_eq!(
            b.get("/dashboard/key").await.status,
            expect(key, StatusCode::OK),
            "{role}: key page"
        );
        assert_eq!(
            b.get("/dashboard/key/generate").await.status,
            expect(key, StatusCode::OK),
            "{role}: key confirmation"
        );
        assert_eq!(
            b.get("/dashboard/members").await.status,
            expect(members, StatusCode::OK),
            "{role}"
        );
        assert_eq!(
            b.get("/dashboard/activity").await.status,
            expect(members, StatusCode::OK),
            "{role}"
        );
        let invited = b
            .post(
                "/dashboard/members/invite",
                &[("csrf", &csrf), ("email", &email()), ("role", "viewer")],
            )
            .await;
        assert_eq!(
            invited.status,
            expect(members, StatusCode::OK),
            "{role}: invite a viewer"
        );
        let invited = b
            .post(
                "/dashboard/members/invite",
                &[("csrf", &csrf), ("email", &email()), ("role", "owner")],
            )
            .await;
        assert_eq!(
            invited.status,
            expect(owners, StatusCode::OK),
            "{role}: invite an owner"
        );
        let name = format!("Renamed by {role}");
        let renamed = b
            .post(
                "/dashboard/account/rename",
                &[("csrf", &csrf), ("name", &name)],
            )
            .await;
        assert_eq!(
            renamed.status,
            expect(owners, StatusCode::SEE_OTHER),
            "{role}: rename"
        );
        let now = b.get("/dashboard/").await;
        assert_eq!(
            now.body.contains(&name),
            owners,
            "{role}: the name changed only if allowed"
        );
        webhooks_row(&app, &account, role, b, hooks, &theirs, &theirs_event).await;
    }
}

/// An endpoint of `account` (made in the store, on the discard port) with one test ping in its log: its id and
/// the ping's event id.
async fn webhook_with_event(app: &TestApp, account: &str, name: &str) -> (String, String) {
    let new = shortlink_store::NewWebhook {
        url: format!("http://127.0.0.1:9/{name}"),
        // No row of the matrix deletes a group: its log holds the ping only.
        events: vec![shortlink_store::EventType::GroupDeleted],
        description: Some(name.to_owned()),
        secret: webhook_sender::WebhookSecret::generate()
            .expose()
            .to_owned(),
    };
    let e = app
        .db
        .create_webhook(account, &new, &shortlink_store::Actor::ApiKey)
        .await
        .unwrap();
    let due = app
        .db
        .start_webhook_test(account, &e.id, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    let outcome = shortlink_store::Attempted {
        status_code: Some(200),
        duration_ms: 1,
        error: None,
        success: true,
    };
    app.db
        .record_webhook_attempt(&due, &outcome, None)
        .await
        .unwrap();
    (e.id, due.event_id)
}

/// The Webhooks row (admins and owners, like the API key): the nav item is shown, and every webhooks route
/// answers, exactly when the role may; otherwise each is a 403 page that changed nothing.
async fn webhooks_row(
    app: &TestApp,
    account: &str,
    role: &str,
    b: &mut Browser,
    may: bool,
    theirs: &str,
    theirs_event: &str,
) {
    let expect = |ok: StatusCode| if may { ok } else { StatusCode::FORBIDDEN };
    let home = b.get("/dashboard/").await;
    let csrf = home.csrf();
    assert_eq!(
        home.body.contains(r#"href="/dashboard/webhooks""#),
        may,
        "{role}: Webhooks nav"
    );
    assert_eq!(
        b.get("/dashboard/webhooks").await.status,
        expect(StatusCode::OK),
        "{role}: Webhooks page"
    );
    let before = app.db.webhooks(account).await.unwrap();
    let audit_before = app.db.audit_log(account, 1, 0).await.unwrap().total;
    let url = format!("http://127.0.0.1:9/{role}");
    let made = b
        .post(
            "/dashboard/webhooks",
            &[
                ("csrf", csrf.as_str()),
                ("url", url.as_str()),
                ("events", "link.created"),
            ],
        )
        .await;
    assert_eq!(made.status, expect(StatusCode::OK), "{role}: add endpoint");
    assert_eq!(
        made.body.contains("Signing secret"),
        may,
        "{role}: the secret"
    );
    // Allowed roles work on their own endpoint (so that deleting it spares the others); the others are refused on
    // an endpoint that exists.
    let (id, event) = if may {
        webhook_with_event(app, account, &format!("own-{role}")).await
    } else {
        (theirs.to_owned(), theirs_event.to_owned())
    };
    let base = format!("/dashboard/webhooks/{id}");
    for path in [
        base.clone(),
        format!("{base}/rotate"),
        format!("{base}/delete"),
    ] {
        assert_eq!(
            b.get(&path).await.status,
            expect(StatusCode::OK),
            "{role}: GET {path}"
        );
    }
    for (path, ok) in [
        (base.clone(), StatusCode::SEE_OTHER),
        (format!("{base}/test"), StatusCode::SEE_OTHER),
        (
            format!("{base}/deliveries/{event}/redeliver"),
            StatusCode::SEE_OTHER,
        ),
        (format!("{base}/disable"), StatusCode::SEE_OTHER),
        (format!("{base}/enable"), StatusCode::SEE_OTHER),
        (format!("{base}/rotate"), StatusCode::OK),
        (format!("{base}/delete"), StatusCode::SEE_OTHER),
    ] {
        let page = b
            .post(
                &path,
                &[
                    ("csrf", csrf.as_str()),
                    ("url", url.as_str()),
                    ("events", "link.clicked"),
                ],
            )
            .await;
        assert_eq!(
            page.status,
            expect(ok),
            "{role}: POST {path}: {}",
            page.body
        );
        if !may {
            assert!(page.body.contains("Not allowed"), "{role}: POST {path}");
        }
    }
    if may {
        assert!(
            app.db.webhook(account, &id).await.is_err(),
            "{role}: deleted"
        );
    } else {
        assert_eq!(app.db.webhooks(account).await.unwrap(), before, "{role}");
        assert_eq!(
            app.db.audit_log(account, 1, 0).await.unwrap().total,
            audit_before,
            "{role}: no activity"
        );
        assert_eq!(
            app.db
                .webhook_attempts(account, theirs, 10, 0)
                .await
                .unwrap()
                .total,
            1,
            "{role}: no test ping"
        );
    }
}

/// Every form of the teams and webhooks pages refuses a post without the session's CSRF token (403), and changes
/// nothing.
async fn member_forms_need_the_csrf_token(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let mut owner = Browser::new(&app);
    let address = email();
    owner.join(&app, &address).await;
    let other = email();
    accept(&app, &invite(&mut owner, &other, "member").await).await;
    let id = member_id(&app, &other).await;
    let account = app.db.find_account(&address).await.unwrap().id;
    let (hook, event) = webhook_with_event(&app, &account, "csrf").await;
    let hook_before = app.db.webhook(&account, &hook).await.unwrap();
    let hooks = format!("/dashboard/webhooks/{hook}");
    let rows = app.db.audit_log(&account, 100, 0).await.unwrap().total;
    let webhook_forms = [
        (
            "/dashboard/webhooks".to_owned(),
            vec![("url", "http://127.0.0.1:9/x"), ("events", "link.created")],
        ),
        (
            hooks.clone(),
            vec![("url", "http://127.0.0.1:9/x"), ("events", "link.created")],
        ),
        (format!("{hooks}/test"), vec![]),
        (format!("{hooks}/disable"), vec![]),
        (format!("{hooks}/enable"), vec![]),
        (format!("{hooks}/rotate"), vec![]),
        (format!("{hooks}/delete"), vec![]),
        (format!("{hooks}/deliveries/{event}/redeliver"), vec![]),
    ];
    for (path, form) in webhook_forms.into_iter().chain([
        (
            "/dashboard/members/invite".to_owned(),
            vec![("email", "x@example.com"), ("role", "viewer")],
        ),
        (
            format!("/dashboard/members/{id}/role"),
            vec![("role", "admin")],
        ),
        (format!("/dashboard/members/{id}/remove"), vec![]),
        (
            "/dashboard/account/rename".to_owned(),
            vec![("name", "Forged")],
        ),
        (
            "/dashboard/account/switch".to_owned(),
            vec![("account_id", account.as_str())],
        ),
        ("/dashboard/account/leave".to_owned(), vec![]),
    ]) {
        for csrf in [None, Some("forged-token")] {
            let mut f = form.clone();
            if let Some(c) = csrf {
                f.push(("csrf", c));
            }
            let page = owner.post(&path, &f).await;
            assert_eq!(page.status, StatusCode::FORBIDDEN, "{path} {csrf:?}");
        }
    }
    assert_eq!(
        app.db.audit_log(&account, 100, 0).await.unwrap().total,
        rows
    );
    assert_eq!(app.db.members(&account).await.unwrap().len(), 2);
    assert_eq!(app.db.webhooks(&account).await.unwrap(), vec![hook_before]);
    assert_eq!(
        app.db
            .webhook_attempts(&account, &hook, 10, 0)
            .await
            .unwrap()
            .total,
        1,
        "no test ping was sent"
    );
}
