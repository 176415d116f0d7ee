//! Points in time as stored (microseconds since the UNIX epoch, UTC) and as shown (ISO 8601, spec 2).

use super::ValidationError;
use time::OffsetDateTime;
use time::format_description::FormatItem;
use time::format_description::well_known::Rfc3339;
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

    /// Milliseconds since the epoch, rounded up (the edge's clock): an instant stored with microseconds is never
    /// reached early.
    pub fn unix_millis_ceil(self) -> i64 {
        self.0.div_euclid(1_000) + i64::from(self.0.rem_euclid(1_000) != 0)
    }

    /// A client's instant: RFC 3339 in UTC (`Z` or `+00:00`), between the year 1970 and 9999, at most microsecond
    /// precision kept (finer digits are dropped). `field` names it in the error.
    pub fn parse_rfc3339_utc(field: &str, raw: &str) -> Result<Self, ValidationError> {
        let invalid = || {
            ValidationError::new(format!(
                "{field} must be an RFC 3339 time in UTC, e.g. 2030-01-31T12:00:00Z"
            ))
        };
        if raw.len() > 64 {
            return Err(invalid());
        }
        let t = OffsetDateTime::parse(raw, &Rfc3339).map_err(|_| invalid())?;
        if !t.offset().is_utc() || t.year() < 1970 {
            return Err(invalid());
        }
        Ok(Self((t.unix_timestamp_nanos() / 1_000) as i64))
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
    fn parses_client_instants_in_utc_only() {
        let p = |s| Micros::parse_rfc3339_utc("expires_at", s);
        assert_eq!(
            p("2023-11-14T22:13:20Z").unwrap(),
            Micros(1_700_000_000_000_000)
        );
        assert_eq!(
            p("2023-11-14T22:13:20.000042+00:00").unwrap(),
            Micros(1_700_000_000_000_042)
        );
        assert_eq!(
            p("2023-11-14T22:13:20.0000429Z").unwrap(),
            Micros(1_700_000_000_000_042)
        );
        // RFC 3339 5.6 lets applications separate date and time with a space.
        assert_eq!(
            p("2023-11-14 22:13:20Z").unwrap(),
            Micros(1_700_000_000_000_000)
        );
        for bad in [
            "",
            "2023-11-14",
            "2023-11-14T22:13:20",
            "2023-11-14T23:13:20+01:00",
            "1969-12-31T23:59:59Z",
            "2023-13-01T00:00:00Z",
            "tomorrow",
        ] {
            let e = p(bad).unwrap_err();
            assert!(e.0.starts_with("expires_at must be"), "{bad}: {e}");
        }
    }

    #[test]
    fn millis_round_up() {
        assert_eq!(Micros(1_000).unix_millis_ceil(), 1);
        assert_eq!(Micros(1_001).unix_millis_ceil(), 2);
        assert_eq!(Micros(0).unix_millis_ceil(), 0);
    }

    #[test]
    fn now_is_recent() {
        assert!(Micros::now().unix_seconds() > 1_700_000_000);
    }
}
