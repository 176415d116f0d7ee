//! The client's IP address, and a per-IP limiter for the unauthenticated endpoint.

use super::error::ApiError;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::Instant;

/// Where the client address comes from. Behind a proxy or CDN the socket peer is the proxy,
/// so the operator names the header it sets (e.g. `CF-Connecting-IP`); trusting a header
/// that no proxy overwrites would let clients pick their own address, so it is opt-in.
#[derive(Debug, Clone, Default)]
pub struct ClientIpSource {
    /// Lowercase header name, or None for the socket peer address.
    pub header: Option<String>,
}

/// The resolved client address (None only when neither header nor socket says).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientIp(pub(crate) Option<IpAddr>);

impl FromRequestParts<super::AppState> for ClientIp {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &super::AppState,
    ) -> Result<Self, ApiError> {
        if let Some(name) = &state.client_ip.header {
            // X-Forwarded-For may hold a chain; the left-most entry is the original client.
            let from_header = parts
                .headers
                .get(name.as_str())
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(',').next())
                .and_then(|v| v.trim().parse().ok());
            if from_header.is_some() {
                return Ok(Self(from_header));
            }
        }
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        Ok(Self(peer))
    }
}

/// A token bucket per client IP, in memory: each origin process limits on its own, which
/// is enough to stop one client from hammering the public endpoint.
#[derive(Debug)]
pub struct IpRateLimiter {
    burst: f64,
    per_second: f64,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

/// Distinct addresses tracked at most; beyond it idle (full) buckets are dropped first.
const MAX_TRACKED: usize = 100_000;

impl IpRateLimiter {
    /// `burst` requests at once, refilled at `per_minute` a minute.
    pub fn new(burst: u32, per_minute: u32) -> Self {
        Self {
            burst: f64::from(burst),
            per_second: f64::from(per_minute) / 60.0,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token for `ip`, or says how many seconds until one is available.
    pub fn check(&self, ip: Option<IpAddr>, now: Instant) -> Result<(), u64> {
        // Requests with no address at all share one bucket: they still cannot flood.
        let ip = ip.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= MAX_TRACKED && !buckets.contains_key(&ip) {
            let (burst, rate) = (self.burst, self.per_second);
            buckets.retain(|_, (tokens, at)| {
                *tokens + now.duration_since(*at).as_secs_f64() * rate < burst
            });
        }
        let (tokens, at) = buckets.entry(ip).or_insert((self.burst, now));
        *tokens =
            (*tokens + now.duration_since(*at).as_secs_f64() * self.per_second).min(self.burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *tokens) / self.per_second).ceil().max(1.0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bucket_drains_and_refills_per_ip() {
        let limiter = IpRateLimiter::new(3, 60);
        let t0 = Instant::now();
        let a = Some(IpAddr::from([10, 0, 0, 1]));
        let b = Some(IpAddr::from([10, 0, 0, 2]));
        for _ in 0..3 {
            assert!(limiter.check(a, t0).is_ok());
        }
        assert_eq!(limiter.check(a, t0), Err(1));
        assert!(
            limiter.check(b, t0).is_ok(),
            "another address has its own bucket"
        );
        assert!(
            limiter.check(a, t0 + Duration::from_millis(1_000)).is_ok(),
            "one token a second"
        );
        assert!(limiter.check(a, t0 + Duration::from_millis(1_100)).is_err());
    }
}
