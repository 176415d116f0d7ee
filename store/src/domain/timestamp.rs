//! Points in time as stored (microseconds since the UNIX epoch, UTC) and as shown (ISO 8601, spec 2).

use time::OffsetDateTime;
use time::format_description::FormatItem;
use time::macros::format_description;

/// Spec 2's timestamps: UTC with exactly six fractional digits and a `Z` suffix.
const ISO8601_MICROS: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");

/// A point in time as microseconds since the UNIX epoch, UTC: the stored form on both engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Micros(pub i64);

impl Micros {
    /// The current time.
    pub fn now() -> Self {
        let now = OffsetDateTime::now_utc();
        Self((now.unix_timestamp_nanos() / 1_000) as i64)
    }

    /// Whole seconds since the epoch, rounded down.
    pub fn unix_seconds(self) -> i64 {
        self.0.div_euclid(1_000_000)
    }

    /// ISO 8601 in UTC with exactly six fractional digits and a `Z` suffix (spec 2).
    pub fn to_iso8601(self) -> String {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.0) * 1_000)
            .ok()
            .and_then(|t| t.format(ISO8601_MICROS).ok())
            // Unreachable for values we write (they come from the clock), but never panic.
            .unwrap_or_else(|| "1970-01-01T00:00:00.000000Z".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_six_digits_and_z() {
        assert_eq!(Micros(0).to_iso8601(), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            Micros(1_700_000_000_000_042).to_iso8601(),
            "2023-11-14T22:13:20.000042Z"
        );
        assert_eq!(Micros(-1).to_iso8601(), "1969-12-31T23:59:59.999999Z");
    }

    #[test]
    fn now_is_recent() {
        assert!(Micros::now().unix_seconds() > 1_700_000_000);
    }
}
