//! The dashboard: the web pages where an account holder manages their API key, groups, links, domains and webhooks, served
//! by the origin under `/dashboard/`. Server-rendered HTML (askama, escaped by default), one stylesheet and one
//! small script, all embedded in the binary; every flow but the dynamic-link builder works without JavaScript.
//!
//! Every rule lives in the store: this crate turns forms into the store's validated types and the store's
//! answers into pages, and adds only what a browser needs: sessions, CSRF protection and confirmation steps.

mod assets;
mod chart;
mod client;
mod error;
mod forms;
mod mail;
mod pages;
mod reauth;
mod security;
mod session;
mod smart_form;
mod smart_view;
mod stats_view;
mod views;

pub use error::DashboardError;

use axum::Router;
use axum::routing::{any, get, post};
use shortlink_store::{Attempted, Db, StoreError};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::Notify;

/// The largest form body accepted; a larger one gets 413.
pub const MAX_FORM_BYTES: usize = 16 * 1024;
/// The import form's body: the file (the API's limit) and the multipart framing around it.
pub const MAX_IMPORT_FORM_BYTES: usize = shortlink_store::MAX_IMPORT_BYTES + 64 * 1024;
/// The one route that takes a larger body than a form: the import's file.
pub(crate) const IMPORT_PATH: &str = "/dashboard/links/import";

/// How the dashboard is reached and what it shares with the rest of the origin.
#[derive(Debug, Clone)]
pub struct DashboardState {
    /// The store.
    pub db: Db,
    /// Wakes the publisher after a change, so the edge learns of it at once.
    pub wake: Arc<Notify>,
    /// Mark the session cookie `Secure` (the dashboard is served over https, directly or behind a TLS proxy).
    pub secure_cookies: bool,
    /// The origin's public base URL (`https://admin.example.com`), whose origin a form post may also come from;
    /// posts from the page's own host are always accepted.
    pub public_origin: Option<String>,
    /// Where the client's address comes from (the sign-in and password throttles): the origin's one rule.
    pub client_addr: client_addr::ClientAddrRule,
    /// The account's budget of changes made here (links edited, paused, resumed, deleted; groups created, saved,
    /// rotated, deleted; webhook endpoints added, changed, tested, rotated, deleted, events redelivered) in any
    /// rolling minute, apart from its API key's budget.
    pub write_limit_per_minute: u32,
    /// Most groups an account may have, its default group included.
    pub max_groups_per_account: u32,
    /// Outgoing mail (invitations, password-reset links); None: not configured (`--smtp-url`), and then the
    /// pages show links instead and "Forgot password" says to ask the operator. When set, the origin has a
    /// public URL (`public_origin`), which every mailed link points at.
    pub mailer: Option<Arc<mailer::Mailer>>,
    /// `--signup open`: anyone may create a user and an account of their own ("Create account"); otherwise
    /// people join by invitation only and the sign-up routes answer 404.
    pub signup_open: bool,
    /// What the Webhooks page needs from the origin.
    pub webhooks: DashboardWebhooks,
    /// What the Import page needs from the origin.
    pub imports: DashboardImports,
}

/// What the Import page needs from the origin: the import runner's wake-up and the daily budget.
#[derive(Debug, Clone)]
pub struct DashboardImports {
    /// Poked after an import is queued.
    pub wake: Arc<Notify>,
    /// Links an account may import per UTC day.
    pub limit_per_day: u32,
}

/// What the Webhooks page needs from the origin: the operator's rule on private targets (for the URL checks made
/// before an endpoint is stored) and the origin's test ping, so "Send test event" runs the very code of the API's
/// `POST webhooks/{id}/test` without this crate knowing how a webhook is signed and sent.
#[derive(Debug, Clone)]
pub struct DashboardWebhooks {
    /// `--webhooks-allow-private`: loopback and private targets, and plain `http://`, are accepted.
    pub allow_private: bool,
    /// Sends test pings.
    pub tester: Arc<dyn WebhookTester>,
}

/// The outcome of a test ping: its event id (in the endpoint's delivery log) and what the attempt came to.
pub type TestPing = (String, Attempted);

/// Sends a `ping` to one of an account's webhook endpoints now and records the attempt in its delivery log
/// (implemented by the origin, which owns the sender).
pub trait WebhookTester: std::fmt::Debug + Send + Sync {
    /// Pings endpoint `endpoint_id` of `account_id`; another account's endpoint is [`StoreError::NotFound`].
    fn test<'a>(
        &'a self,
        db: &'a Db,
        account_id: &'a str,
        endpoint_id: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<TestPing, StoreError>> + Send + 'a>>;
}

/// The dashboard's routes (full paths, `/dashboard/…`), with its security headers and its own 404 page, to be
/// merged into the origin's router.
pub fn router(state: DashboardState) -> Router {
    use pages::{
        activity, analytics, auth, domains, groups, imports, invitations, key, link_edit,
        link_export, links, live, members, recovery, signup, webhooks,
    };
    Router::new()
        .route(
            "/dashboard",
            get(|| async { axum::response::Redirect::permanent("/dashboard/") }),
        )
        .route("/dashboard/", get(links::index))
        .route("/dashboard/links", post(links::create))
        .route("/dashboard/links/export", get(link_export::export))
        .route(
            IMPORT_PATH,
            get(imports::page)
                .post(imports::upload)
                .layer(axum::extract::DefaultBodyLimit::max(MAX_IMPORT_FORM_BYTES)),
        )
        .route("/dashboard/links/imports/{id}", get(imports::show))
        .route("/dashboard/links/imports/{id}/status", get(imports::status))
        .route(
            "/dashboard/links/{id}",
            get(links::show).post(link_edit::edit),
        )
        .route("/dashboard/links/{id}/live", get(live::live))
        .route(
            "/dashboard/links/{id}/clicks.csv",
            get(analytics::link_clicks),
        )
        .route(
            "/dashboard/groups/{id}/clicks.csv",
            get(analytics::group_clicks),
        )
        .route("/dashboard/clicks.csv", get(analytics::account_clicks))
        .route("/dashboard/analytics", get(analytics::index))
        .route("/dashboard/links/{id}/pause", post(links::pause))
        .route("/dashboard/links/{id}/resume", post(links::resume))
        .route(
            "/dashboard/links/{id}/delete",
            get(links::confirm_delete).post(links::delete),
        )
        .route("/dashboard/links/{id}/qr.svg", get(links::qr_svg))
        .route("/dashboard/links/{id}/qr.png", get(links::qr_png))
        .route("/dashboard/groups", get(groups::index).post(groups::create))
        .route("/dashboard/groups/{id}", get(groups::show))
        .route(
            "/dashboard/groups/{id}/settings",
            post(groups::save_settings),
        )
        .route(
            "/dashboard/groups/{id}/rotate",
            get(groups::confirm_rotate).post(groups::rotate),
        )
        .route(
            "/dashboard/groups/{id}/delete",
            get(groups::confirm_delete).post(groups::delete),
        )
        .route("/dashboard/key", get(key::show))
        .route(
            "/dashboard/key/generate",
            get(key::confirm_generate).post(key::generate),
        )
        .route(
            "/dashboard/key/regenerate",
            get(key::confirm_regenerate).post(key::regenerate),
        )
        .route(
            "/dashboard/key/revoke",
            get(key::confirm_revoke).post(key::revoke),
        )
        .route("/dashboard/domains", get(domains::index))
        .route(
            "/dashboard/webhooks",
            get(webhooks::index).post(webhooks::create),
        )
        .route(
            "/dashboard/webhooks/{id}",
            get(webhooks::show).post(webhooks::edit),
        )
        .route("/dashboard/webhooks/{id}/test", post(webhooks::test))
        .route("/dashboard/webhooks/{id}/enable", post(webhooks::enable))
        .route("/dashboard/webhooks/{id}/disable", post(webhooks::disable))
        .route(
            "/dashboard/webhooks/{id}/rotate",
            get(webhooks::confirm_rotate).post(webhooks::rotate),
        )
        .route(
            "/dashboard/webhooks/{id}/delete",
            get(webhooks::confirm_delete).post(webhooks::delete),
        )
        .route(
            "/dashboard/webhooks/{id}/deliveries/{event_id}/redeliver",
            post(webhooks::redeliver),
        )
        .route("/dashboard/members", get(members::index))
        .route("/dashboard/members/invite", post(members::invite))
        .route("/dashboard/members/{id}/role", post(members::change_role))
        .route(
            "/dashboard/members/{id}/remove",
            get(members::confirm_remove).post(members::remove),
        )
        .route("/dashboard/account/rename", post(members::rename))
        .route("/dashboard/account/switch", post(members::switch))
        .route(
            "/dashboard/account/leave",
            get(members::confirm_leave).post(members::leave),
        )
        .route("/dashboard/activity", get(activity::index))
        .route("/dashboard/profile", get(auth::profile))
        .route("/dashboard/profile/password", post(auth::change_password))
        .route(
            "/dashboard/sign-in",
            get(auth::sign_in_page).post(auth::sign_in),
        )
        .route("/dashboard/sign-out", post(auth::sign_out))
        .route("/dashboard/sign-up", get(signup::page).post(signup::create))
        .route(
            "/dashboard/forgot-password",
            get(recovery::forgot_page).post(recovery::forgot_post),
        )
        .route(
            "/dashboard/reset/{token}",
            get(recovery::reset_page).post(recovery::reset),
        )
        .route(
            "/dashboard/invite/{token}",
            get(invitations::show).post(invitations::accept),
        )
        .route("/dashboard/assets/{file}", get(assets::serve))
        // Its own 404 page for any other path under /dashboard/ (a route, not a fallback: the origin merges this
        // router into its own, which has the API's fallback).
        .route(
            "/dashboard/{*rest}",
            any(|| async { DashboardError::NotFound }),
        )
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            security::guard,
        ))
        // Forms are small (the largest, a group's settings, is well under 4 KiB): 16 KiB, not axum's 2 MB.
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM_BYTES))
        // Pages and assets gzipped for browsers that ask (all do).
        .layer(tower_http::compression::CompressionLayer::new().gzip(true))
        .with_state(state)
}
