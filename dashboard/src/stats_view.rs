//! The statistics section of the link, group and account pages (issue 26): a date range ("From", "To", "Apply"),
//! the totals (clicks, unique visitors, bots), charts per day, a table per dimension with a bar per row, and
//! "Export clicks" (CSV of the range's raw events). One view for the three pages (`stats.html`), read by the store's
//! statistics with the API's own range rules ([`StatsQuery`]): a range the API refuses is refused here with its
//! message, and the page shows the default 30 days instead.

use shortlink_store::domain::{Day, StatsQuery};
use shortlink_store::{ClickStats, PlaceCount, ValueCount};

use crate::chart;

/// Rows per table: the statistics' own bound.
const ROWS: usize = shortlink_store::TOP_VALUES as usize;

/// The range a page shows: the query's `from` and `to` (the API's defaults and bounds), or the last 30 days with
/// the reason when the query breaks them.
pub(crate) fn range(query: Option<&str>) -> (Day, Day, Option<String>) {
    let today = Day::today();
    match StatsQuery::parse(Some(&range_params(query)), today) {
        Ok(q) => (q.from, q.to, None),
        Err(e) => {
            let fallback = StatsQuery::parse(None, today).expect("the default range is valid");
            (fallback.from, fallback.to, Some(e.0))
        }
    }
}

/// The query's `from` and `to` alone: a page's other parameters (`done`) and a `format` are not the range's
/// business.
pub(crate) fn range_params(query: Option<&str>) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(
            form_urlencoded::parse(query.unwrap_or_default().as_bytes())
                .filter(|(k, _)| k == "from" || k == "to"),
        )
        .finish()
}

/// A row of a dimension's table: its label (user data: escaped by the template) and its share of the largest.
pub(crate) struct BarRow {
    pub(crate) label: String,
    pub(crate) clicks: i64,
    /// Width of the row's bar, 0–100 (% of the table's largest).
    pub(crate) width: i64,
}

/// A dimension's table.
pub(crate) struct DimensionTable {
    /// `By country`, …
    pub(crate) caption: &'static str,
    /// The first column's heading.
    pub(crate) column: &'static str,
    pub(crate) rows: Vec<BarRow>,
}

/// What `stats.html` shows.
pub(crate) struct StatsSection {
    /// The range as the form shows it, `YYYY-MM-DD`.
    pub(crate) from: String,
    pub(crate) to: String,
    /// Why the asked range was not shown (the API's message).
    pub(crate) range_error: Option<String>,
    /// The page the range form reloads.
    pub(crate) action: String,
    /// "Export clicks": the range's raw events as CSV.
    pub(crate) export_href: String,
    pub(crate) total: i64,
    pub(crate) unique_visitors: i64,
    pub(crate) bots: i64,
    /// SVG markup built from numbers and dates only ([`crate::chart`]).
    pub(crate) chart: String,
    pub(crate) uniques_chart: String,
    pub(crate) tables: Vec<DimensionTable>,
}

fn bars(list: impl Iterator<Item = (String, i64)>) -> Vec<BarRow> {
    let rows: Vec<(String, i64)> = list.take(ROWS).collect();
    let max = rows.iter().map(|r| r.1).max().unwrap_or(0).max(1);
    rows.into_iter()
        .map(|(label, clicks)| BarRow {
            label,
            clicks,
            width: (clicks * 100 + max - 1) / max,
        })
        .collect()
}

fn values(list: &[ValueCount], unknown: &str) -> Vec<BarRow> {
    bars(list.iter().map(|v| {
        (
            v.value.clone().unwrap_or_else(|| unknown.to_owned()),
            v.clicks,
        )
    }))
}

/// A region or city as `Name, CC` (the country alone, or "Unknown", when the name is not known).
fn places(list: &[PlaceCount]) -> Vec<BarRow> {
    bars(list.iter().map(|p| {
        let label = match (&p.name, &p.country) {
            (Some(name), Some(country)) => format!("{name}, {country}"),
            (Some(name), None) => name.clone(),
            (None, Some(country)) => format!("Unknown, {country}"),
            (None, None) => "Unknown".to_owned(),
        };
        (label, p.clicks)
    }))
}

impl StatsSection {
    /// The section of `stats` over `from ..= to`, on the page at `action`, exporting from `export` (a path
    /// without query: the range is added).
    pub(crate) fn new(
        stats: &ClickStats,
        (from, to, range_error): (Day, Day, Option<String>),
        action: String,
        export: &str,
    ) -> Self {
        let (from_text, to_text) = (from.to_iso_date(), to.to_iso_date());
        let none = "None";
        Self {
            export_href: format!("{export}?from={from_text}&to={to_text}"),
            from: from_text,
            to: to_text,
            range_error,
            action,
            total: stats.total,
            unique_visitors: stats.unique_visitors,
            bots: stats.bots,
            chart: chart::clicks_per_day(&stats.by_day, from, to),
            uniques_chart: chart::visitors_per_day(&stats.uniques_by_day, from, to),
            tables: vec![
                DimensionTable {
                    caption: "By country",
                    column: "Country",
                    rows: values(&stats.by_country, "Unknown"),
                },
                DimensionTable {
                    caption: "By region",
                    column: "Region",
                    rows: places(&stats.by_region),
                },
                DimensionTable {
                    caption: "By city",
                    column: "City",
                    rows: places(&stats.by_city),
                },
                DimensionTable {
                    caption: "By device",
                    column: "Device",
                    rows: values(&stats.by_device, "Unknown"),
                },
                DimensionTable {
                    caption: "By browser",
                    column: "Browser",
                    rows: values(&stats.by_browser, "Other"),
                },
                DimensionTable {
                    caption: "By OS",
                    column: "OS",
                    rows: values(&stats.by_os, "Other"),
                },
                DimensionTable {
                    caption: "By referrer",
                    column: "Referrer",
                    rows: values(&stats.by_referrer, "None (direct)"),
                },
                DimensionTable {
                    caption: "By UTM source",
                    column: "utm_source",
                    rows: values(&stats.by_utm.source, none),
                },
                DimensionTable {
                    caption: "By UTM medium",
                    column: "utm_medium",
                    rows: values(&stats.by_utm.medium, none),
                },
                DimensionTable {
                    caption: "By UTM campaign",
                    column: "utm_campaign",
                    rows: values(&stats.by_utm.campaign, none),
                },
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_the_apis_rules() {
        let today = Day::today();
        let (from, to, error) = range(Some("from=2026-01-01&to=2026-01-31&done=saved"));
        assert_eq!(
            (from.to_iso_date(), to.to_iso_date(), error),
            ("2026-01-01".into(), "2026-01-31".into(), None)
        );
        let (from, to, error) = range(None);
        assert_eq!((from, to, error), (today.plus(-29), today, None));
        let (from, to, error) = range(Some("from=2026-02-01&to=2026-01-01"));
        assert_eq!((from, to), (today.plus(-29), today));
        assert_eq!(error.as_deref(), Some("from must not be after to"));
        assert!(range(Some("from=yesterday")).2.is_some());
    }

    #[test]
    fn bars_are_scaled_to_the_largest_and_never_vanish() {
        let rows = bars(
            [
                ("a".to_owned(), 200),
                ("b".to_owned(), 1),
                ("c".to_owned(), 100),
            ]
            .into_iter(),
        );
        let widths: Vec<i64> = rows.iter().map(|r| r.width).collect();
        assert_eq!(widths, [100, 1, 50]);
    }

    #[test]
    fn places_name_their_country() {
        let rows = places(&[
            PlaceCount {
                country: Some("DE".into()),
                name: Some("Bavaria".into()),
                clicks: 2,
            },
            PlaceCount {
                country: Some("FR".into()),
                name: None,
                clicks: 1,
            },
            PlaceCount {
                country: None,
                name: None,
                clicks: 1,
            },
        ]);
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["Bavaria, DE", "Unknown, FR", "Unknown"]);
    }
}
