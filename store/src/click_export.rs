//! The raw click events of a link, a group or a whole account (issue 26), oldest first, as NDJSON or CSV: read a
//! batch at a time by keyset (`at`, `id`) while the client reads, so memory stays at one batch whatever the count.
//! An event holds what [`crate::clicks`] stores: never an address, the User-Agent or a visitor hash, since none is
//! stored. Bots are not events (they are counted apart), so they are not exported.

use std::sync::Arc;

use futures_util::Stream;
use sqlx::Row;
use tokio::sync::Semaphore;

use crate::click_stats::{StatsScope, owns};
use crate::csv;
use crate::domain::{ClickExportFormat, Day, Micros};
use crate::error::StoreError;
use crate::pool::Db;

/// Microseconds in a day.
const DAY_MICROS: i64 = 86_400_000_000;

/// The columns of the CSV export, in order; the NDJSON objects have the same fields.
pub const CLICK_EXPORT_COLUMNS: &str = "at,link_id,country,region,city,device,browser,os,referer_host,\
     utm_source,utm_medium,utm_campaign,unique";

/// What an export is of, owned (a stream outlives the request's borrows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportScope {
    /// One of the account's links.
    Link(String),
    /// One of the account's groups: the events attributed to it.
    Group(String),
    /// Every event of the account.
    Account,
}

impl ExportScope {
    fn as_stats(&self) -> StatsScope<'_> {
        match self {
            Self::Link(id) => StatsScope::Link(id),
            Self::Group(id) => StatsScope::Group(id),
            Self::Account => StatsScope::Account,
        }
    }
}

/// One stored click event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawClick {
    id: i64,
    /// When (UNIX µs).
    pub at: i64,
    /// The link; `None` for a dynamic link's click.
    pub link_id: Option<String>,
    /// ISO 3166-1 alpha-2, when known.
    pub country: Option<String>,
    /// Cloudflare's region name, when known.
    pub region: Option<String>,
    /// Cloudflare's city name, when known.
    pub city: Option<String>,
    /// `mobile`, `tablet`, `desktop` or `other`.
    pub device: String,
    /// `None` for events stored before browsers were told (migration 0020).
    pub browser: Option<String>,
    /// Likewise.
    pub os: Option<String>,
    /// The `Referer`'s host, when there was one.
    pub referer_host: Option<String>,
    /// The visited URL's `utm_source`, when it had one.
    pub utm_source: Option<String>,
    /// Its `utm_medium`.
    pub utm_medium: Option<String>,
    /// Its `utm_campaign`.
    pub utm_campaign: Option<String>,
    /// Whether it was the visitor's first click on the link that UTC day; `None` where that is not known.
    pub unique: Option<bool>,
}

/// One batch of an export, and where the next starts.
#[derive(Debug)]
pub struct ClickBatch {
    /// The events, oldest first.
    pub clicks: Vec<RawClick>,
    /// The last event's (`at`, `id`), when the batch was full (there may be more).
    next: Option<(i64, i64)>,
}

impl Db {
    /// A batch of at most `limit` of `scope`'s events on the days `from ..= to`, oldest first (then in the order
    /// they were stored), after `after` (the previous batch's [`ClickBatch`] cursor); `None` when the link or group
    /// is not the account's (or does not exist), checked with the first batch.
    pub async fn click_export_batch(
        &self,
        account_id: &str,
        scope: &ExportScope,
        (from, to): (Day, Day),
        after: Option<(i64, i64)>,
        limit: u32,
    ) -> Result<Option<ClickBatch>, StoreError> {
        let mut conn = self.read.acquire().await?;
        if after.is_none() && !owns(&mut conn, account_id, scope.as_stats()).await? {
            return Ok(None);
        }
        // Just before the range's first instant: the one query shape serves the first batch too.
        let (after_at, after_id) = after.unwrap_or((from.0 * DAY_MICROS - 1, i64::MAX));
        let end = (to.0 + 1) * DAY_MICROS;
        // The link's index (link_id, at), the account's (account_id, at) for the account and its groups; `at >= $2`
        // (implied by the row comparison) lets the engines start the index scan at the cursor.
        let (condition, owner) = match scope {
            ExportScope::Link(id) => ("link_id = $1", id.as_str()),
            ExportScope::Group(id) => ("account_id = $6 AND group_id = $1", id.as_str()),
            ExportScope::Account => ("account_id = $1", account_id),
        };
        let sql = format!(
            "SELECT id, at, link_id, country, region, city, device, browser, os, referer_host, utm_source, \
             utm_medium, utm_campaign, first_visit FROM clicks \
             WHERE {condition} AND at >= $2 AND (at, id) > ($2, $3) AND at < $4 ORDER BY at, id LIMIT $5"
        );
        let mut q = sqlx::query(&sql)
            .bind(owner)
            .bind(after_at)
            .bind(after_id)
            .bind(end)
            .bind(i64::from(limit));
        if let ExportScope::Group(_) = scope {
            q = q.bind(account_id);
        }
        let mut clicks = Vec::with_capacity(limit as usize);
        for r in q.fetch_all(&mut *conn).await? {
            clicks.push(RawClick {
                id: r.try_get("id")?,
                at: r.try_get("at")?,
                link_id: r.try_get("link_id")?,
                country: r.try_get("country")?,
                region: r.try_get("region")?,
                city: r.try_get("city")?,
                device: r.try_get("device")?,
                browser: r.try_get("browser")?,
                os: r.try_get("os")?,
                referer_host: r.try_get("referer_host")?,
                utm_source: r.try_get("utm_source")?,
                utm_medium: r.try_get("utm_medium")?,
                utm_campaign: r.try_get("utm_campaign")?,
                unique: r.try_get::<Option<i64>, _>("first_visit")?.map(|v| v != 0),
            });
        }
        let next = (clicks.len() == limit as usize)
            .then(|| clicks.last().map(|c| (c.at, c.id)))
            .flatten();
        Ok(Some(ClickBatch { clicks, next }))
    }
}

/// One NDJSON line: the event's fields in the CSV's order.
#[derive(serde::Serialize)]
struct Line<'a> {
    at: &'a str,
    link_id: Option<&'a str>,
    country: Option<&'a str>,
    region: Option<&'a str>,
    city: Option<&'a str>,
    device: &'a str,
    browser: Option<&'a str>,
    os: Option<&'a str>,
    referer_host: Option<&'a str>,
    utm_source: Option<&'a str>,
    utm_medium: Option<&'a str>,
    utm_campaign: Option<&'a str>,
    unique: Option<bool>,
}

/// Appends a batch in `format`.
fn write_batch(out: &mut String, format: ClickExportFormat, batch: &ClickBatch) {
    for c in &batch.clicks {
        let at = Micros(c.at).to_iso8601();
        match format {
            ClickExportFormat::Ndjson => {
                let line = Line {
                    at: &at,
                    link_id: c.link_id.as_deref(),
                    country: c.country.as_deref(),
                    region: c.region.as_deref(),
                    city: c.city.as_deref(),
                    device: &c.device,
                    browser: c.browser.as_deref(),
                    os: c.os.as_deref(),
                    referer_host: c.referer_host.as_deref(),
                    utm_source: c.utm_source.as_deref(),
                    utm_medium: c.utm_medium.as_deref(),
                    utm_campaign: c.utm_campaign.as_deref(),
                    unique: c.unique,
                };
                // Serialising a borrowed struct, not a `json!` map: no allocation per field (twice the rate).
                if let Ok(text) = serde_json::to_string(&line) {
                    out.push_str(&text);
                }
                out.push('\n');
            }
            ClickExportFormat::Csv => {
                fn o(v: &Option<String>) -> &str {
                    v.as_deref().unwrap_or_default()
                }
                let unique = match c.unique {
                    Some(true) => "true",
                    Some(false) => "false",
                    None => "",
                };
                csv::row(
                    out,
                    &[
                        &at,
                        o(&c.link_id),
                        o(&c.country),
                        o(&c.region),
                        o(&c.city),
                        &c.device,
                        o(&c.browser),
                        o(&c.os),
                        o(&c.referer_host),
                        o(&c.utm_source),
                        o(&c.utm_medium),
                        o(&c.utm_campaign),
                        unique,
                    ],
                );
            }
        }
    }
}

/// An export as a stream of text chunks: the CSV header (if any) and `first` (the batch the caller read before
/// answering, so that a failure there is still an error answer), then each next batch, read only when the stream
/// is polled for it, that is, as the client takes the body. `bound`, when given, is held while each later batch is
/// read and written; nothing is held between batches.
#[allow(clippy::too_many_arguments)]
pub fn click_export_stream(
    db: Db,
    account_id: String,
    scope: ExportScope,
    range: (Day, Day),
    format: ClickExportFormat,
    first: ClickBatch,
    batch: u32,
    bound: Option<Arc<Semaphore>>,
) -> impl Stream<Item = Result<String, StoreError>> + Send + 'static {
    use futures_util::StreamExt as _;
    let mut head = match format {
        ClickExportFormat::Csv => format!("{CLICK_EXPORT_COLUMNS}\r\n"),
        ClickExportFormat::Ndjson => String::new(),
    };
    write_batch(&mut head, format, &first);
    let rest = futures_util::stream::unfold(first.next, move |cursor| {
        let (db, account_id, scope, bound) =
            (db.clone(), account_id.clone(), scope.clone(), bound.clone());
        async move {
            let cursor = cursor?;
            let _place = match &bound {
                Some(b) => b.clone().acquire_owned().await.ok(),
                None => None,
            };
            match db
                .click_export_batch(&account_id, &scope, range, Some(cursor), batch)
                .await
            {
                Ok(Some(b)) => {
                    let mut chunk = String::new();
                    write_batch(&mut chunk, format, &b);
                    Some((Ok(chunk), b.next))
                }
                Ok(None) => None,
                // The error ends the stream (and the response, cut short).
                Err(e) => Some((Err(e), None)),
            }
        }
    });
    // Fused: a body may be polled again after its end, which `unfold` answers with a panic.
    futures_util::stream::once(async move { Ok(head) })
        .chain(rest)
        .fuse()
}
