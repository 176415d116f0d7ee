//! Shortlink's outgoing webhooks, one attempt at a time, in the Standard Webhooks format
//! (<https://www.standardwebhooks.com>): `whsec_` secrets, `v1` HMAC-SHA256 signatures in the `webhook-id`,
//! `webhook-timestamp` and `webhook-signature` headers, the specification's retry schedule.
//!
//! Endpoint URLs are given by clients, so every address is checked against SSRF: [`check_url`] when a URL is
//! given, [`resolve_public`] when it is stored, and [`Sender`] at each connection (its DNS resolver drops
//! non-public addresses, so a name that re-resolves to a private address later cannot reach it). The operator's
//! `allow_private` lifts those checks (and allows plain `http`) for receivers on loopback or a private network.
//!
//! The store, the outbox and the delivery loop live elsewhere; this crate knows nothing of accounts or events.

mod addr;
mod secret;
mod send;

pub use addr::{MAX_URL_LEN, UrlError, check_url, is_public, resolve_public};
pub use secret::{SecretError, WebhookSecret, sign};
pub use send::{MAX_RESPONSE_BODY, Outcome, Sender, TIMEOUT, USER_AGENT};
/// The URL type of [`check_url`] and [`Sender::send`], so callers need no `url` dependency of their own.
pub use url::Url;

use std::time::Duration;

/// Standard Webhooks' retry schedule after attempt n (1-based): 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, then
/// None (give up). Eight attempts in all, the last about 27 h 35 min after the first. Attempt 0 is read as 1.
pub fn retry_delay(attempt: u32) -> Option<Duration> {
    const MINUTE: u64 = 60;
    const HOUR: u64 = 60 * MINUTE;
    let secs = match attempt {
        0 | 1 => 5,
        2 => 5 * MINUTE,
        3 => 30 * MINUTE,
        4 => 2 * HOUR,
        5 => 5 * HOUR,
        6 | 7 => 10 * HOUR,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_schedule() {
        let s = Duration::from_secs;
        assert_eq!(retry_delay(1), Some(s(5)));
        assert_eq!(retry_delay(2), Some(s(5 * 60)));
        assert_eq!(retry_delay(3), Some(s(30 * 60)));
        assert_eq!(retry_delay(4), Some(s(2 * 3600)));
        assert_eq!(retry_delay(5), Some(s(5 * 3600)));
        assert_eq!(retry_delay(6), Some(s(10 * 3600)));
        assert_eq!(retry_delay(7), Some(s(10 * 3600)));
        assert_eq!(retry_delay(8), None);
        assert_eq!(retry_delay(u32::MAX), None);
        assert_eq!(retry_delay(0), retry_delay(1));
        let total: Duration = (1..).map_while(retry_delay).sum();
        assert_eq!(total, s(27 * 3600 + 35 * 60 + 5));
    }
}
