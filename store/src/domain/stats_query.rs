//! The query of the statistics endpoints and of the raw click export: a range of UTC days (`from`, `to`, both
//! inclusive) and the `format`.

use super::ValidationError;
use super::day::Day;

/// Days in the default range: the last 30 days, ending today.
pub const DEFAULT_RANGE_DAYS: i64 = 30;
/// Most days one request may span (ten years and then some): bounds the work and the answer.
pub const MAX_RANGE_DAYS: i64 = 3_660;

/// How the statistics are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsFormat {
    /// `application/json` (the default).
    Json,
    /// `text/csv`.
    Csv,
}

/// The validated query of a statistics endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatsQuery {
    /// First day counted.
    pub from: Day,
    /// Last day counted (inclusive).
    pub to: Day,
    /// Answer format.
    pub format: StatsFormat,
}

impl StatsQuery {
    /// Parses a raw query string; `today` is the default end. Unknown parameters are ignored (clients add cache
    /// busters); a known parameter given twice is refused, since we could not tell which one was meant. Each
    /// error names its parameter.
    pub fn parse(raw: Option<&str>, today: Day) -> Result<Self, ValidationError> {
        let (from, to, format) = range_and_format(raw, today)?;
        let format = match format.as_deref() {
            None | Some("json") => StatsFormat::Json,
            Some("csv") => StatsFormat::Csv,
            Some(_) => return Err(ValidationError::new("format must be json or csv")),
        };
        Ok(Self { from, to, format })
    }
}

/// How raw click events are exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClickExportFormat {
    /// `application/x-ndjson`, one object per event (the default).
    Ndjson,
    /// `text/csv` with a header row.
    Csv,
}

/// The validated query of a raw click export: the statistics' range, `format` `ndjson` or `csv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClickExportQuery {
    /// First day exported.
    pub from: Day,
    /// Last day exported (inclusive).
    pub to: Day,
    /// Answer format.
    pub format: ClickExportFormat,
}

impl ClickExportQuery {
    /// Parses a raw query string by the statistics' rules ([`StatsQuery::parse`]), but for the format.
    pub fn parse(raw: Option<&str>, today: Day) -> Result<Self, ValidationError> {
        let (from, to, format) = range_and_format(raw, today)?;
        let format = match format.as_deref() {
            None | Some("ndjson") => ClickExportFormat::Ndjson,
            Some("csv") => ClickExportFormat::Csv,
            Some(_) => return Err(ValidationError::new("format must be ndjson or csv")),
        };
        Ok(Self { from, to, format })
    }
}

/// The range of a query (defaults and bounds checked) and its raw `format`, if given.
fn range_and_format(
    raw: Option<&str>,
    today: Day,
) -> Result<(Day, Day, Option<String>), ValidationError> {
    let (mut from, mut to, mut format) = (None, None, None);
    for (k, v) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        let slot = match k.as_ref() {
            "from" => &mut from,
            "to" => &mut to,
            "format" => &mut format,
            _ => continue,
        };
        if slot.replace(v).is_some() {
            return Err(ValidationError::new(format!("{k} is given more than once")));
        }
    }
    let to = to
        .map(|v| Day::parse("to", &v))
        .transpose()?
        .unwrap_or(today);
    let from = match from {
        Some(v) => Day::parse("from", &v)?,
        None => Day(to.0.saturating_sub(DEFAULT_RANGE_DAYS - 1).max(0)),
    };
    if from > to {
        return Err(ValidationError::new("from must not be after to"));
    }
    if to.0 - from.0 + 1 > MAX_RANGE_DAYS {
        return Err(ValidationError::new(format!(
            "from and to must span at most {MAX_RANGE_DAYS} days"
        )));
    }
    Ok((from, to, format.map(|f| f.into_owned())))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TODAY: Day = Day(20_000);

    fn q(s: &str) -> Result<StatsQuery, ValidationError> {
        StatsQuery::parse(Some(s), TODAY)
    }

    #[test]
    fn click_exports_take_ndjson_or_csv_over_the_same_ranges() {
        let e = |s: &str| ClickExportQuery::parse(Some(s), TODAY);
        let d = e("").unwrap();
        assert_eq!(
            (d.from, d.to, d.format),
            (Day(TODAY.0 - 29), TODAY, ClickExportFormat::Ndjson)
        );
        assert_eq!(e("format=csv").unwrap().format, ClickExportFormat::Csv);
        assert_eq!(
            e("format=json").unwrap_err().0,
            "format must be ndjson or csv"
        );
        assert_eq!(
            e("from=2024-01-02&to=2024-01-01").unwrap_err().0,
            "from must not be after to"
        );
        assert!(e("to=x").is_err() && e("format=csv&format=csv").is_err());
    }

    #[test]
    fn defaults_to_the_last_30_days_as_json() {
        let d = StatsQuery::parse(None, TODAY).unwrap();
        assert_eq!(
            (d.from, d.to, d.format),
            (Day(19_971), TODAY, StatsFormat::Json)
        );
        assert_eq!(q("x=1&fmt=csv").unwrap(), d);
        let to = q("to=2000-01-31").unwrap();
        assert_eq!(
            (to.from.to_iso_date(), to.to.to_iso_date()),
            ("2000-01-02".into(), "2000-01-31".into())
        );
        assert_eq!(q("to=1970-01-05").unwrap().from, Day(0));
        let from = q("from=2024-01-01").unwrap();
        assert_eq!((from.from, from.to), (Day(19_723), TODAY));
        assert_eq!(q("format=csv").unwrap().format, StatsFormat::Csv);
        assert_eq!(q("format=json").unwrap().format, StatsFormat::Json);
    }

    #[test]
    fn bounds_are_inclusive_and_limited() {
        let one = q("from=2024-01-01&to=2024-01-01").unwrap();
        assert_eq!(one.from, one.to);
        let longest = q("from=2000-01-01&to=2010-01-07").unwrap();
        assert_eq!(longest.to.0 - longest.from.0 + 1, MAX_RANGE_DAYS);
        let e = q("from=2000-01-01&to=2010-01-08").unwrap_err();
        assert!(e.0.contains("from and to"), "{e}");
    }

    #[test]
    fn each_error_names_its_parameter() {
        for (bad, param) in [
            ("from=2024-01-02&to=2024-01-01", "from"),
            ("from=yesterday", "from"),
            ("to=2024-02-30", "to"),
            ("from=2024-01-01&from=2024-01-02", "from"),
            ("to=&", "to"),
            ("format=xml", "format"),
            ("format=CSV", "format"),
            ("format=csv&format=csv", "format"),
            ("from=2026-01-01", "from"),
        ] {
            let e = StatsQuery::parse(Some(bad), Day(19_000)).unwrap_err();
            assert!(e.0.starts_with(param), "{bad}: {e}");
        }
    }
}
