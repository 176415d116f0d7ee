//! What every handler shares: the store, the request bound, the client-address rule, the public endpoint's
//! limiter, the edge's secret and the publisher's handle. Its own file so resources depend on it, not on `mod.rs`.

use super::client_ip::IpRateLimiter;
use crate::publisher::PublisherHandle;
use axum::extract::FromRef;
use client_addr::ClientAddrRule;
use secrecy::SecretString;
use shortlink_store::Db;
use std::sync::Arc;
use std::time::Duration;

/// Shared state of every handler.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The database.
    pub db: Db,
    /// How long a request may take before it is answered with 503.
    pub request_timeout: Duration,
    /// Where the client address of a request comes from.
    pub client_ip: ClientAddrRule,
    /// Per-IP limit of the public validation endpoint.
    pub validate_limiter: Arc<IpRateLimiter>,
    /// Secret of the edge worker's calls to `/internal/…`; None disables those routes.
    pub internal_secret: Option<SecretString>,
    /// Per-address limit of wrong-secret requests to `/internal/…`.
    pub internal_auth_limiter: Arc<IpRateLimiter>,
    /// Wakes the publisher after a change, and its counters.
    pub publisher: PublisherHandle,
    /// The origin's public base URL, when configured (the dashboard's cookie and Origin rules).
    pub public_url: Option<String>,
    /// The management writes' budget, the groups' cap and the bound on heavy answers ([`super::limits`]).
    pub limits: super::limits::Limits,
    /// The dashboard's outgoing mail (`--smtp-url`); None: not configured.
    pub mailer: Option<Arc<mailer::Mailer>>,
    /// `--signup open`: the dashboard's "Create account".
    pub signup_open: bool,
    /// The webhook loop's wake-up and settings, and the test pings' sender.
    pub webhooks: crate::webhooks::WebhookHandle,
    /// The import runner's wake-up and the imports' daily budget.
    pub imports: crate::imports::ImportHandle,
    /// Days raw click events are kept (`--click-retention-days`): the raw export says where its range starts.
    pub click_retention_days: u32,
}

impl FromRef<AppState> for ClientAddrRule {
    fn from_ref(state: &AppState) -> Self {
        state.client_ip.clone()
    }
}
