//! The client's address (the rule is the `client-addr` crate's, shared with the dashboard), and a per-address
//! limiter for the unauthenticated endpoints.

use axum::extract::{ConnectInfo, FromRef, FromRequestParts};
use axum::http::request::Parts;
use client_addr::ClientAddrRule;
use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;

/// The resolved client address (None only when neither header nor socket says).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientIp(pub(crate) Option<IpAddr>);

impl<S> FromRequestParts<S> for ClientIp
where
    S: Send + Sync,
    ClientAddrRule: FromRef<S>,
{
    // Never fails: without a usable header or a socket, the address is simply unknown.
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Infallible> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        Ok(Self(
            ClientAddrRule::from_ref(state).resolve(&parts.headers, peer),
        ))
    }
}

/// A rate limit per client address, in memory (GCRA, `governor`): each origin process limits on its own, which is
/// enough to stop one client from hammering a public endpoint. IPv6 clients are counted per /64
/// ([`client_addr::limit_key`]).
pub struct IpRateLimiter<C: Clock = DefaultClock> {
    limiter: RateLimiter<IpAddr, DefaultKeyedStateStore<IpAddr>, C, NoOpMiddleware<C::Instant>>,
    clock: C,
}

/// Distinct addresses tracked at most; beyond it addresses whose allowance is full again are forgotten.
const MAX_TRACKED: usize = 100_000;

impl IpRateLimiter {
    /// `burst` requests at once, refilled at `per_minute` a minute (0 counts as 1).
    pub fn new(burst: u32, per_minute: u32) -> Self {
        Self::with_clock(burst, per_minute, DefaultClock::default())
    }
}

impl<C: Clock + Clone> IpRateLimiter<C> {
    fn with_clock(burst: u32, per_minute: u32, clock: C) -> Self {
        let at_least_one = |n: u32| NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::per_minute(at_least_one(per_minute)).allow_burst(at_least_one(burst));
        Self {
            limiter: RateLimiter::dashmap_with_clock(quota, clock.clone()),
            clock,
        }
    }

    /// Takes one request's allowance for `ip`, or says how many whole seconds until one is available.
    pub fn check(&self, ip: Option<IpAddr>) -> Result<(), u64> {
        // Requests with no address at all share one allowance: they still cannot flood.
        let ip = ip.map_or(IpAddr::from([0, 0, 0, 0]), client_addr::limit_key);
        if self.limiter.len() >= MAX_TRACKED {
            self.limiter.retain_recent();
        }
        self.limiter.check_key(&ip).map_err(|not_until| {
            let wait = not_until.wait_time_from(self.clock.now());
            wait.as_secs_f64().ceil().max(1.0) as u64
        })
    }
}

impl<C: Clock> std::fmt::Debug for IpRateLimiter<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpRateLimiter")
            .field("tracked", &self.limiter.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;
    use std::time::Duration;

    #[test]
    fn allowance_drains_and_refills_per_ip() {
        let clock = FakeRelativeClock::default();
        let limiter = IpRateLimiter::with_clock(3, 60, clock.clone());
        let a = Some(IpAddr::from([10, 0, 0, 1]));
        let b = Some(IpAddr::from([10, 0, 0, 2]));
        for _ in 0..3 {
            assert!(limiter.check(a).is_ok());
        }
        assert_eq!(limiter.check(a), Err(1));
        assert!(
            limiter.check(b).is_ok(),
            "another address has its own allowance"
        );
        assert!(
            limiter.check(None).is_ok(),
            "no address: one shared allowance"
        );
        let v6 = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        for _ in 0..3 {
            assert!(limiter.check(v6("2001:db8:0:1::1")).is_ok());
        }
        assert!(
            limiter.check(v6("2001:db8:0:1:ffff::2")).is_err(),
            "one /64, one allowance"
        );
        assert!(limiter.check(v6("2001:db8:0:2::1")).is_ok());
        clock.advance(Duration::from_millis(1_000));
        assert!(limiter.check(a).is_ok(), "one request a second");
        clock.advance(Duration::from_millis(100));
        assert!(limiter.check(a).is_err());
    }

    #[test]
    fn retry_after_counts_whole_seconds() {
        let clock = FakeRelativeClock::default();
        let limiter = IpRateLimiter::with_clock(1, 6, clock.clone());
        let a = Some(IpAddr::from([10, 0, 0, 1]));
        assert!(limiter.check(a).is_ok());
        assert_eq!(limiter.check(a), Err(10), "6 a minute: the next in 10 s");
        clock.advance(Duration::from_millis(9_500));
        assert_eq!(limiter.check(a), Err(1), "half a second rounds up to one");
    }
}
