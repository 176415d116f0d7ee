use time::OffsetDateTime;

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
        let secs = self.0.div_euclid(1_000_000);
        let micros = self.0.rem_euclid(1_000_000);
        match OffsetDateTime::from_unix_timestamp(secs) {
            Ok(t) => format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
                t.year(),
                u8::from(t.month()),
                t.day(),
                t.hour(),
                t.minute(),
                t.second(),
                micros
            ),
            // Unreachable for values we write (they come from the clock), but never panic.
            Err(_) => "1970-01-01T00:00:00.000000Z".to_owned(),
        }
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
    }

    #[test]
    fn now_is_recent() {
        assert!(Micros::now().unix_seconds() > 1_700_000_000);
    }
}
