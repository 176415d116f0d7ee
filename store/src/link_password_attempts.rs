//! The throttle on a link's password form (issue 25): at most [`THROTTLE_FAILURES`] wrong (or unfinished) attempts
//! per link and visitor address in any [`THROTTLE_WINDOW_MICROS`], exact under concurrency.
//!
//! The worker verifies the password itself (the hash is in the link's KV record) but cannot count attempts: each
//! isolate sees only its own visitors. So it reserves an attempt here before deriving anything, with the same
//! serialised reservation as the dashboard's sign-in ([`crate::password_throttle`]): of any number of parallel
//! guesses, exactly the remaining budget gets through. A right password gives its attempt back; a wrong one leaves
//! it counted. The address is the visitor's as Cloudflare saw it, as the caller's limit key (an IPv6 client by its
//! /64, so rotating through one's own addresses does not multiply the budget).

use std::net::IpAddr;

use crate::error::StoreError;
use crate::password_throttle::{Reserved, THROTTLE_FAILURES, THROTTLE_WINDOW_MICROS};
use crate::pool::Db;

/// Whether a visitor may try a password now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkAttempt {
    /// Go ahead: the attempt is counted, at this instant (UNIX µs), until [`Db::give_back_link_attempt`].
    Go(i64),
    /// The visitor has used the window's [`THROTTLE_FAILURES`] attempts: seconds until the oldest leaves it.
    Throttled(i64),
}

/// The throttle's subject for a link (its host and code, as the worker normalised them) and a visitor address.
/// Host and code are bounded by the caller (253 and 64 characters); the address is a parsed IP, so the subject is
/// bounded too.
fn subject(host: &str, code: &str, address: IpAddr) -> String {
    format!("link:{host}/{code}|ip:{address}")
}

impl Db {
    /// Reserves one password attempt on the link `host`/`code` for the visitor at `address`, at `now` (UNIX µs).
    pub async fn reserve_link_attempt(
        &self,
        host: &str,
        code: &str,
        address: IpAddr,
        now: i64,
    ) -> Result<LinkAttempt, StoreError> {
        let subjects = [subject(host, code, address)];
        Ok(match self.reserve_check(&subjects, now).await? {
            Reserved::Go(_) => LinkAttempt::Go(now),
            Reserved::Throttled(secs) => LinkAttempt::Throttled(secs),
        })
    }

    /// Gives back the attempt reserved at `at` (the password was right). Giving back one that is not there (given
    /// back already, or pruned) changes nothing.
    pub async fn give_back_link_attempt(
        &self,
        host: &str,
        code: &str,
        address: IpAddr,
        at: i64,
    ) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM sign_in_failures WHERE subject = $1 AND at = $2")
            .bind(subject(host, code, address))
            .bind(at)
            .execute(&self.write)
            .await?;
        Ok(())
    }
}

// The contract's numbers: 10 wrong attempts per 15 minutes.
const _: () = assert!(THROTTLE_FAILURES == 10 && THROTTLE_WINDOW_MICROS == 15 * 60 * 1_000_000);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_name_the_link_and_the_address() {
        let v6: IpAddr = "2001:db8:1:2::".parse().unwrap();
        assert_eq!(subject("h", "c", v6), "link:h/c|ip:2001:db8:1:2::");
        let v4: IpAddr = "203.0.113.9".parse().unwrap();
        assert_eq!(
            subject("go.example", "abc", v4),
            "link:go.example/abc|ip:203.0.113.9"
        );
        assert_ne!(
            subject("go.example", "abd", v4),
            subject("go.example", "abc", v4)
        );
    }
}
