//! The link page's chart of clicks per day, drawn on the server as SVG: no script, no chart library, readable by
//! screen readers (a title, and the numbers in a description). Only numbers and ISO dates go into the markup.

use shortlink_store::domain::Day;
use shortlink_store::{DayCount, LastHour};
use std::fmt::Write;

const WIDTH: i64 = 720;
const HEIGHT: i64 = 200;
const LEFT: i64 = 40;
/// Room for the values again on the right: on a phone the chart is wider than the screen and opens scrolled to its
/// end (today), where the left-hand values are out of view.
const RIGHT: i64 = 40;
const BOTTOM: i64 = 24;
const TOP: i64 = 12;

/// An SVG bar chart of `counts` for every day from `from` to `to` (days without clicks are zero bars).
pub(crate) fn clicks_per_day(counts: &[DayCount], from: Day, to: Day) -> String {
    per_day("chart", "Clicks per day", "clicks", counts, from, to)
}

/// The unique visitors of every day from `from` to `to` (`counts` hold each day's visitors).
pub(crate) fn visitors_per_day(counts: &[DayCount], from: Day, to: Day) -> String {
    per_day(
        "uniques-chart",
        "Unique visitors per day",
        "unique visitors",
        counts,
        from,
        to,
    )
}

/// Most bars a chart draws: a longer range (the statistics take up to ten years) adds up several days per bar.
const MAX_BARS: i64 = 120;

/// A bar per day from `from` to `to` of `counts` (missing days are zero bars), `noun` naming what is counted; past
/// [`MAX_BARS`] days, a bar per run of days (labelled with its first), so a year is a few kilobytes of SVG.
fn per_day(id: &str, title: &str, noun: &str, counts: &[DayCount], from: Day, to: Day) -> String {
    let span = (to.0 - from.0).max(0) + 1;
    let per_bar = (span + MAX_BARS - 1) / MAX_BARS;
    let by_day: std::collections::HashMap<Day, i64> =
        counts.iter().map(|c| (c.day, c.clicks)).collect();
    let days: Vec<(String, i64)> = (0..span)
        .step_by(usize::try_from(per_bar).unwrap_or(1))
        .map(|i| {
            let first = from.plus(i);
            let n = (0..per_bar.min(span - i))
                .map(|j| by_day.get(&first.plus(j)).copied().unwrap_or(0))
                .sum();
            (first.to_iso_date(), n)
        })
        .collect();
    let total: i64 = days.iter().map(|(_, c)| c).sum();
    let max = days.iter().map(|(_, c)| *c).max().unwrap_or(0).max(1);
    bar_chart(
        id,
        title,
        &format!(
            "{total} {noun} from {} to {}, at most {max} {}.",
            from.to_iso_date(),
            to.to_iso_date(),
            if per_bar == 1 {
                "on one day".to_owned()
            } else {
                format!("in one bar of {per_bar} days")
            }
        ),
        &days,
    )
}

/// The live view's chart: a bar per minute of the last hour, labelled in UTC (`14:05`).
pub(crate) fn clicks_per_minute(hour: &LastHour) -> String {
    let bars: Vec<(String, i64)> = hour
        .minutes
        .iter()
        .map(|m| (minute_label(m.minute), m.clicks))
        .collect();
    let max = bars.iter().map(|(_, c)| *c).max().unwrap_or(0).max(1);
    let (first, last) = (
        bars.first().map(|b| b.0.clone()).unwrap_or_default(),
        bars.last().map(|b| b.0.clone()).unwrap_or_default(),
    );
    bar_chart(
        "live-chart",
        "Clicks per minute",
        &format!(
            "{} clicks in the last {} minutes, from {first} to {last} UTC, at most {max} in one minute.",
            hour.total,
            hour.minutes.len()
        ),
        &bars,
    )
}

/// `HH:MM` (UTC) of a minute counted from 1970-01-01T00:00Z.
fn minute_label(minute: i64) -> String {
    let of_day = minute.rem_euclid(24 * 60);
    format!("{:02}:{:02}", of_day / 60, of_day % 60)
}

/// An SVG bar chart of `bars` (label, value), scaled to the largest, with `title` and `desc` for screen readers
/// (ids `{id}-title` and `{id}-desc`, unique on the page) and the first and last labels under the axis. Labels are
/// dates and times only: nothing typed by a user goes into the markup.
fn bar_chart(id: &str, title: &str, desc: &str, bars: &[(String, i64)]) -> String {
    let max = bars.iter().map(|(_, c)| *c).max().unwrap_or(0).max(1);
    let n = i64::try_from(bars.len()).unwrap_or(1).max(1);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let slot = plot_w as f64 / n as f64;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="{id}-title {id}-desc" xmlns="http://www.w3.org/2000/svg"><title id="{id}-title">{title}</title><desc id="{id}-desc">{desc}</desc>"##,
    );
    // Gridlines at 0, half and the maximum, labelled on both sides (see RIGHT).
    // The middle line is at a whole number of clicks, placed where that number is (not at half height).
    let mid = max / 2;
    let mut lines = vec![0, max];
    if mid != 0 && mid != max {
        lines.push(mid);
    }
    let right = WIDTH - RIGHT;
    for value in lines {
        let y = TOP + plot_h - value * plot_h / max;
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{right}" y1="{y}" y2="{y}" stroke="#e3e6ec"/><text x="{}" y="{label_y}" font-size="13" text-anchor="end" fill="#5b6472">{value}</text><text x="{}" y="{label_y}" font-size="13" fill="#5b6472" aria-hidden="true">{value}</text>"##,
            LEFT - 6,
            right + 6,
            label_y = y + 4,
        );
    }
    for (i, (label, clicks)) in bars.iter().enumerate() {
        let h = (*clicks as f64 / max as f64 * plot_h as f64).round();
        let x = LEFT as f64 + slot * i as f64 + slot * 0.15;
        let y = (TOP + plot_h) as f64 - h;
        let _ = write!(
            svg,
            r##"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" rx="2" fill="#3b5bdb"><title>{label}: {clicks}</title></rect>"##,
            slot * 0.7,
        );
    }
    // The first and last labels under the axis.
    let first = bars.first().map(|b| b.0.as_str()).unwrap_or_default();
    let last = bars.last().map(|b| b.0.as_str()).unwrap_or_default();
    let _ = write!(
        svg,
        r##"<text x="{LEFT}" y="{}" font-size="13" fill="#5b6472">{first}</text><text x="{}" y="{}" font-size="13" text-anchor="end" fill="#5b6472">{last}</text></svg>"##,
        HEIGHT - 6,
        WIDTH - RIGHT,
        HEIGHT - 6,
    );
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bar_per_day_scaled_to_the_busiest() {
        let from = Day(20_000);
        let to = from.plus(2);
        let svg = clicks_per_day(
            &[
                DayCount {
                    day: from.plus(1),
                    clicks: 4,
                },
                DayCount { day: to, clicks: 2 },
            ],
            from,
            to,
        );
        assert!(svg.contains("<title id=\"chart-title\">Clicks per day</title>"));
        assert_eq!(svg.matches("<rect").count(), 3);
        assert!(svg.contains(&format!("{}: 4</title>", from.plus(1).to_iso_date())));
        assert!(svg.contains("6 clicks from"));
        // The busiest day fills the plot; an empty day has no height.
        assert!(svg.contains(&format!("height=\"{:.1}\"", (HEIGHT - TOP - BOTTOM) as f64)));
        assert!(svg.contains("height=\"0.0\""));
    }

    #[test]
    fn a_long_range_adds_up_days_per_bar() {
        let from = Day(20_000);
        let to = from.plus(364);
        let counts: Vec<DayCount> = (0..365)
            .map(|i| DayCount {
                day: from.plus(i),
                clicks: 1,
            })
            .collect();
        let svg = visitors_per_day(&counts, from, to);
        // 365 days, 4 a bar: 92 bars, the last of one day.
        assert_eq!(svg.matches("<rect").count(), 92);
        assert!(svg.contains(&format!("{}: 4</title>", from.to_iso_date())));
        assert!(svg.contains(&format!("{}: 1</title>", to.to_iso_date())));
        assert!(
            svg.contains("365 unique visitors from")
                && svg.contains("at most 4 in one bar of 4 days"),
            "{svg}"
        );
        assert!(svg.contains("<title id=\"uniques-chart-title\">Unique visitors per day</title>"));
    }

    #[test]
    fn a_bar_per_minute_labelled_in_utc() {
        let hour = LastHour {
            first_minute: 60 * 24 * 20_000 + 14 * 60 + 5,
            minutes: (0..60)
                .map(|i| shortlink_store::MinuteCount {
                    minute: 60 * 24 * 20_000 + 14 * 60 + 5 + i,
                    clicks: i64::from(i == 59) * 3,
                })
                .collect(),
            total: 3,
        };
        let svg = clicks_per_minute(&hour);
        assert_eq!(svg.matches("<rect").count(), 60);
        assert!(svg.contains("<title id=\"live-chart-title\">Clicks per minute</title>"));
        assert!(
            svg.contains("3 clicks in the last 60 minutes, from 14:05 to 15:04 UTC"),
            "{svg}"
        );
        assert!(svg.contains("<title>15:04: 3</title>"));
        assert_eq!(minute_label(-1), "23:59");
    }

    #[test]
    fn no_clicks_draws_an_empty_chart() {
        let svg = clicks_per_day(&[], Day(20_000), Day(20_029));
        assert_eq!(svg.matches("<rect").count(), 30);
        assert!(svg.contains("0 clicks"));
        // The zero line and the top line are labelled even with nothing to show, on both sides.
        assert_eq!(svg.matches(">0</text>").count(), 2, "{svg}");
        assert_eq!(svg.matches(">1</text>").count(), 2, "{svg}");
    }
}
