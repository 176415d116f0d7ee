//! Rolling-window limits: at most `limit` uses in any window of a fixed length, counted in the database by the
//! caller (a creation's own links, a write budget's rows). This file is the arithmetic from what was counted to
//! what the `X-RateLimit-*` headers say, kept apart from the SQL so it is tested alone. Two windows use it: the
//! API key's creations (spec 8: 100 in any rolling hour, [`RateWindow::CREATIONS`]) and the management writes'
//! budget ([`crate::write_budget`], per minute).

/// Successful creations allowed per key in any rolling window (spec 8).
pub const RATE_LIMIT: u32 = 100;
/// The creations' window: one hour, in microseconds.
const HOUR_MICROS: i64 = 3_600 * 1_000_000;
/// The write budget's window: one minute, in microseconds.
const MINUTE_MICROS: i64 = 60 * 1_000_000;

/// A limit and its window: at most `limit` uses in any `micros` microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateWindow {
    /// Uses allowed per window.
    pub limit: u32,
    /// The window's length in microseconds.
    pub micros: i64,
}

impl RateWindow {
    /// create-link's limit (spec 8): 100 successful creations in any rolling hour, per key.
    pub const CREATIONS: Self = Self {
        limit: RATE_LIMIT,
        micros: HOUR_MICROS,
    };

    /// `limit` uses in any rolling minute.
    pub const fn per_minute(limit: u32) -> Self {
        Self {
            limit,
            micros: MINUTE_MICROS,
        }
    }

    /// The start of the window ending at `now`: uses after it count.
    pub(crate) fn start(self, now: i64) -> i64 {
        now - self.micros
    }

    /// The state at `now` (UNIX µs) for a subject that used `used` of the window, the oldest use at `oldest`.
    pub(crate) fn state(self, used: i64, oldest: Option<i64>, now: i64) -> RateLimitState {
        let remaining = u32::try_from(i64::from(self.limit) - used).unwrap_or(0);
        // Another origin process may have stamped its use a moment after our `now` (it read its clock later
        // but committed first): such a use counts as made now, so the wait never exceeds the window.
        let oldest = oldest.map(|t| t.min(now));
        let frees_at = oldest.map(|t| t + self.micros).unwrap_or(now);
        RateLimitState {
            limit: self.limit,
            remaining,
            reset_at: round_up_seconds(frees_at),
            retry_after: if remaining == 0 {
                round_up_seconds(frees_at - now).max(1)
            } else {
                0
            },
        }
    }
}

/// The rate-limit state after a request, for the `X-RateLimit-*` headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitState {
    /// Uses allowed per window.
    pub limit: u32,
    /// Uses left right now.
    pub remaining: u32,
    /// UNIX second at which the oldest counted use leaves the window.
    pub reset_at: i64,
    /// Seconds until one more use is allowed (0 when one is allowed now).
    pub retry_after: i64,
}

impl RateLimitState {
    /// The state after one more use at `now`, in `window` (the one this state was computed in).
    pub(crate) fn after_use(self, window: RateWindow, now: i64) -> Self {
        Self {
            remaining: self.remaining.saturating_sub(1),
            // With nothing counted before, this use is the oldest in the window.
            reset_at: if self.remaining == self.limit {
                round_up_seconds(now + window.micros)
            } else {
                self.reset_at
            },
            ..self
        }
    }
}

fn round_up_seconds(micros: i64) -> i64 {
    (micros + 999_999).div_euclid(1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = HOUR_MICROS;
    const NOW: i64 = 1_800_000_000_000_000;
    const W: RateWindow = RateWindow::CREATIONS;

    #[test]
    fn an_unused_key_has_the_whole_limit() {
        let s = W.state(0, None, NOW);
        assert_eq!((s.remaining, s.retry_after), (100, 0));
        let after = s.after_use(W, NOW);
        assert_eq!(after.remaining, 99);
        assert_eq!(
            after.reset_at,
            (NOW + HOUR) / 1_000_000,
            "the first creation opens the window"
        );
    }

    #[test]
    fn a_used_up_key_waits_for_its_oldest_creation() {
        let oldest = NOW - HOUR + 1_500_000; // leaves the window in 1.5 s
        let s = W.state(100, Some(oldest), NOW);
        assert_eq!(s.remaining, 0);
        assert_eq!(s.retry_after, 2, "rounded up to whole seconds");
        assert_eq!(s.reset_at, (oldest + HOUR).div_euclid(1_000_000) + 1);
        assert_eq!(W.state(130, Some(oldest), NOW).remaining, 0);
    }

    #[test]
    fn a_creation_stamped_after_now_by_another_process_waits_one_window_at_most() {
        let s = W.state(100, Some(NOW + 700), NOW);
        assert_eq!(s.retry_after, 3_600);
        assert_eq!(s.reset_at, (NOW + HOUR) / 1_000_000);
    }

    #[test]
    fn later_creations_keep_the_reset_time() {
        let oldest = NOW - 10 * 60 * 1_000_000;
        let s = W.state(40, Some(oldest), NOW);
        assert_eq!(s.after_use(W, NOW).reset_at, s.reset_at);
        assert_eq!(s.after_use(W, NOW).remaining, 59);
    }

    #[test]
    fn a_minute_window_has_its_own_limit_and_length() {
        let w = RateWindow::per_minute(600);
        assert_eq!(w.start(NOW), NOW - 60_000_000);
        let fresh = w.state(0, None, NOW).after_use(w, NOW);
        assert_eq!((fresh.limit, fresh.remaining), (600, 599));
        assert_eq!(fresh.reset_at, (NOW + 60_000_000) / 1_000_000);
        let oldest = NOW - 59_500_000; // leaves the window in 0.5 s
        let full = w.state(600, Some(oldest), NOW);
        assert_eq!((full.remaining, full.retry_after), (0, 1));
        assert_eq!(w.state(599, Some(oldest), NOW).remaining, 1);
    }
}
