//! The client's address as the sign-in and password throttles count it: the origin's one rule
//! ([`client_addr::ClientAddrRule`], the same the API uses), keyed per IPv4 address or IPv6 /64.

use crate::DashboardState;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use std::convert::Infallible;
use std::net::SocketAddr;

/// The throttle key of the request's client (`unknown` when neither a trusted header nor the socket says).
pub(crate) struct ClientKey(pub(crate) String);

impl FromRequestParts<DashboardState> for ClientKey {
    type Rejection = Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &DashboardState,
    ) -> Result<Self, Infallible> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        Ok(ClientKey(
            state.client_addr.resolve(&parts.headers, peer).map_or_else(
                || "unknown".to_owned(),
                |ip| client_addr::limit_key(ip).to_string(),
            ),
        ))
    }
}
