//! The API key's creation limit (spec 8): 100 successful creations in any rolling hour. The arithmetic from what
//! the database counted to what the `X-RateLimit-*` headers say, kept apart from the SQL so it is tested alone.

/// Successful creations allowed per key in any rolling window (spec 8).
pub const RATE_LIMIT: u32 = 100;
/// The window: one hour, in microseconds.
const WINDOW_MICROS: i64 = 3_600 * 1_000_000;
/// The rate-limit state after a request, for the `X-RateLimit-*` headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitState {
    /// Creations allowed per window.
    pub limit: u32,
    /// Creations left right now.
    pub remaining: u32,
    /// UNIX second at which the oldest counted creation leaves the window.
    pub reset_at: i64,
    /// Seconds until one more creation is allowed (0 when one is allowed now).
    pub retry_after: i64,
}

impl RateLimitState {
    /// The state at `now` (UNIX µs) for a key that created `used` links in the window, the oldest at `oldest`.
    pub(crate) fn from_window(used: i64, oldest: Option<i64>, now: i64) -> Self {
        let remaining = u32::try_from(i64::from(RATE_LIMIT) - used).unwrap_or(0);
        // Another origin process may have stamped its creation a moment after our `now` (it read its clock later
        // but committed first): such a creation counts as made now, so the wait never exceeds the window.
        let oldest = oldest.map(|t| t.min(now));
        let frees_at = oldest.map(|t| t + WINDOW_MICROS).unwrap_or(now);
        Self {
            limit: RATE_LIMIT,
            remaining,
            reset_at: round_up_seconds(frees_at),
            retry_after: if remaining == 0 {
                round_up_seconds(frees_at - now).max(1)
            } else {
                0
            },
        }
    }

    /// The state after one more creation at `now`.
    pub(crate) fn after_creation(self, now: i64) -> Self {
        Self {
            remaining: self.remaining.saturating_sub(1),
            // With nothing counted before, this creation is the oldest in the window.
            reset_at: if self.remaining == RATE_LIMIT {
                round_up_seconds(now + WINDOW_MICROS)
            } else {
                self.reset_at
            },
            ..self
        }
    }

    /// The start of the window ending at `now`: creations after it count.
    pub(crate) fn window_start(now: i64) -> i64 {
        now - WINDOW_MICROS
    }
}

fn round_up_seconds(micros: i64) -> i64 {
    (micros + 999_999).div_euclid(1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = WINDOW_MICROS;
    const NOW: i64 = 1_800_000_000_000_000;

    #[test]
    fn an_unused_key_has_the_whole_limit() {
        let s = RateLimitState::from_window(0, None, NOW);
        assert_eq!((s.remaining, s.retry_after), (100, 0));
        let after = s.after_creation(NOW);
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
        let s = RateLimitState::from_window(100, Some(oldest), NOW);
        assert_eq!(s.remaining, 0);
        assert_eq!(s.retry_after, 2, "rounded up to whole seconds");
        assert_eq!(s.reset_at, (oldest + HOUR).div_euclid(1_000_000) + 1);
        assert_eq!(
            RateLimitState::from_window(130, Some(oldest), NOW).remaining,
            0
        );
    }

    #[test]
    fn a_creation_stamped_after_now_by_another_process_waits_one_window_at_most() {
        let s = RateLimitState::from_window(100, Some(NOW + 700), NOW);
        assert_eq!(s.retry_after, 3_600);
        assert_eq!(s.reset_at, (NOW + HOUR) / 1_000_000);
    }

    #[test]
    fn later_creations_keep_the_reset_time() {
        let oldest = NOW - 10 * 60 * 1_000_000;
        let s = RateLimitState::from_window(40, Some(oldest), NOW);
        assert_eq!(s.after_creation(NOW).reset_at, s.reset_at);
        assert_eq!(s.after_creation(NOW).remaining, 59);
    }
}
