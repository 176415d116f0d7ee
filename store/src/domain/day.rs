//! UTC calendar days, as the click counters store them (days since 1970-01-01) and as the API shows them
//! (`YYYY-MM-DD`).

use super::ValidationError;
use super::timestamp::Micros;
use time::{Date, Month};

/// Julian day number of 1970-01-01.
const EPOCH_JULIAN_DAY: i64 = 2_440_588;
/// Microseconds in a day.
pub(crate) const DAY_MICROS: i64 = 86_400_000_000;
/// The first day we show: 1970-01-01 (the edge's clock never reports earlier clicks).
pub const MIN_DAY: Day = Day(0);
/// The last day we show: 9999-12-31 (four-digit years only).
pub const MAX_DAY: Day = Day(2_932_896);

/// A UTC day as days since 1970-01-01, between [`MIN_DAY`] and [`MAX_DAY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day(pub i64);

impl Day {
    /// The day of an instant, or None outside 1970-01-01 … 9999-12-31.
    pub fn of(t: Micros) -> Option<Self> {
        Some(Self(t.0.div_euclid(DAY_MICROS))).filter(|d| (MIN_DAY..=MAX_DAY).contains(d))
    }

    /// Today, UTC.
    pub fn today() -> Self {
        Self::of(Micros::now()).unwrap_or(MAX_DAY)
    }

    /// A client's date: exactly `YYYY-MM-DD` (no time, no offset), a real calendar day from 1970-01-01 to
    /// 9999-12-31. `field` names it in the error.
    pub fn parse(field: &str, raw: &str) -> Result<Self, ValidationError> {
        let invalid = || {
            ValidationError::new(format!(
                "{field} must be a UTC date YYYY-MM-DD from 1970-01-01 to 9999-12-31"
            ))
        };
        let b = raw.as_bytes();
        let digits = |r: std::ops::Range<usize>| {
            b[r].iter().try_fold(0u32, |n, c| {
                c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
            })
        };
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return Err(invalid());
        }
        let (Some(y), Some(m), Some(d)) = (digits(0..4), digits(5..7), digits(8..10)) else {
            return Err(invalid());
        };
        let month = u8::try_from(m).ok().and_then(|m| Month::try_from(m).ok());
        let date = month
            .and_then(|m| Date::from_calendar_date(y as i32, m, d as u8).ok())
            .ok_or_else(invalid)?;
        Some(Self(i64::from(date.to_julian_day()) - EPOCH_JULIAN_DAY))
            .filter(|d| (MIN_DAY..=MAX_DAY).contains(d))
            .ok_or_else(invalid)
    }

    /// `YYYY-MM-DD`.
    pub fn to_iso_date(self) -> String {
        i32::try_from(self.0 + EPOCH_JULIAN_DAY)
            .ok()
            .and_then(|j| Date::from_julian_day(j).ok())
            .map(|d| format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day()))
            // Unreachable for the days we store and accept (MIN_DAY..=MAX_DAY), but never panic.
            .unwrap_or_else(|| "1970-01-01".to_owned())
    }

    /// The day `n` days later (negative: earlier), saturating.
    pub fn plus(self, n: i64) -> Self {
        Self(self.0.saturating_add(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_dates() {
        for (s, n) in [
            ("1970-01-01", 0),
            ("1970-01-02", 1),
            ("2027-01-15", 20_833),
            ("2024-02-29", 19_782),
            ("9999-12-31", MAX_DAY.0),
        ] {
            let d = Day::parse("from", s).unwrap();
            assert_eq!(d, Day(n), "{s}");
            assert_eq!(d.to_iso_date(), s);
        }
    }

    #[test]
    fn refuses_anything_but_a_real_date() {
        for bad in [
            "",
            "2027-1-15",
            "2027-01-15T00:00:00Z",
            "2027/01/15",
            "2023-02-29",
            "2027-13-01",
            "2027-00-10",
            "2027-01-00",
            "1969-12-31",
            "+202-01-01",
            "２０２７-01-15",
            "20270115xx",
        ] {
            let e = Day::parse("to", bad).unwrap_err();
            assert!(e.0.starts_with("to must be"), "{bad}: {e}");
        }
    }

    #[test]
    fn days_of_instants() {
        assert_eq!(Day::of(Micros(0)), Some(Day(0)));
        assert_eq!(Day::of(Micros(DAY_MICROS - 1)), Some(Day(0)));
        assert_eq!(Day::of(Micros(1_800_090_000_000_000)), Some(Day(20_834)));
        assert_eq!(Day::of(Micros(-1)), None);
        assert_eq!(Day::of(Micros(i64::MAX)), None);
        assert!(Day::today() > Day(20_000));
    }
}
