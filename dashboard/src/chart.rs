//! The link page's chart of clicks per day, drawn on the server as SVG: no script, no chart library, readable by
//! screen readers (a title, and the numbers in a description). Only numbers and ISO dates go into the markup.

use shortlink_store::DayCount;
use shortlink_store::domain::Day;
use std::fmt::Write;

const WIDTH: i64 = 720;
const HEIGHT: i64 = 200;
const LEFT: i64 = 40;
const BOTTOM: i64 = 24;
const TOP: i64 = 12;

/// An SVG bar chart of `counts` for every day from `from` to `to` (days without clicks are zero bars).
pub(crate) fn clicks_per_day(counts: &[DayCount], from: Day, to: Day) -> String {
    let days: Vec<(Day, i64)> = (0..=(to.0 - from.0).max(0))
        .map(|i| {
            let day = from.plus(i);
            let clicks = counts.iter().find(|c| c.day == day).map_or(0, |c| c.clicks);
            (day, clicks)
        })
        .collect();
    let max = days.iter().map(|(_, c)| *c).max().unwrap_or(0).max(1);
    let n = i64::try_from(days.len()).unwrap_or(1).max(1);
    let plot_w = WIDTH - LEFT - 8;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let slot = plot_w as f64 / n as f64;
    let total: i64 = days.iter().map(|(_, c)| c).sum();
    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="chart-title chart-desc" xmlns="http://www.w3.org/2000/svg"><title id="chart-title">Clicks per day</title><desc id="chart-desc">{total} clicks from {} to {}, at most {max} on one day.</desc>"##,
        from.to_iso_date(),
        to.to_iso_date(),
    );
    // Gridlines at 0, half and the maximum, labelled.
    // The middle line is at a whole number of clicks, placed where that number is (not at half height).
    let mid = max / 2;
    let mut lines = vec![0, max];
    if mid != 0 && mid != max {
        lines.push(mid);
    }
    for value in lines {
        let y = TOP + plot_h - value * plot_h / max;
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{}" y1="{y}" y2="{y}" stroke="#e3e6ec"/><text x="{}" y="{}" font-size="13" text-anchor="end" fill="#5b6472">{value}</text>"##,
            WIDTH - 8,
            LEFT - 6,
            y + 4
        );
    }
    for (i, (day, clicks)) in days.iter().enumerate() {
        let h = (*clicks as f64 / max as f64 * plot_h as f64).round();
        let x = LEFT as f64 + slot * i as f64 + slot * 0.15;
        let y = (TOP + plot_h) as f64 - h;
        let _ = write!(
            svg,
            r##"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" rx="2" fill="#3b5bdb"><title>{}: {clicks}</title></rect>"##,
            slot * 0.7,
            day.to_iso_date()
        );
    }
    // The first and last dates under the axis.
    let _ = write!(
        svg,
        r##"<text x="{LEFT}" y="{}" font-size="13" fill="#5b6472">{}</text><text x="{}" y="{}" font-size="13" text-anchor="end" fill="#5b6472">{}</text></svg>"##,
        HEIGHT - 6,
        from.to_iso_date(),
        WIDTH - 8,
        HEIGHT - 6,
        to.to_iso_date()
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
    fn no_clicks_draws_an_empty_chart() {
        let svg = clicks_per_day(&[], Day(20_000), Day(20_029));
        assert_eq!(svg.matches("<rect").count(), 30);
        assert!(svg.contains("0 clicks"));
        // The zero line and the top line are labelled even with nothing to show.
        assert!(
            svg.contains(">0</text>") && svg.contains(">1</text>"),
            "{svg}"
        );
    }
}
