//! Click reports from the edge: each report's raw events and its day digests of links, groups and accounts
//! ([`crate::digests`]), and the webhooks' `link.clicked` events, written in one transaction, and at most once
//! per batch id.
//!
//! Built for throughput (reports of up to 1,000 events, tens of thousands of events a second on two cores): each
//! distinct link (host, short code) and group of a report is looked up once, a day's clicks are added up in
//! memory so that each digest row is written once per report, and rows go in multi-row statements
//! ([`crate::sql_chunks`]). The raw events are written first (their foreign key locks each link against
//! deletion), then the link, group and account digests, each table in the order of its key: concurrent reports,
//! and a link deletion (the link, then its digests, its groups', its account's), take their locks in one order
//! and never deadlock on PostgreSQL.
//!
//! Events the edge flagged as bots are counted apart: a day row's `bots`, no raw event, no dimension, not in the
//! links' totals nor in webhooks, so they never reach a statistic's `total`.

use crate::digests::write::{self, DayKey, Delta};
use crate::digests::{Dimension, Scope};
use crate::domain::{ClickBatchId, Day, Micros};
use crate::error::{StoreError, is_unique_violation};
use crate::outbox;
use crate::sql_chunks::{MultiRow, in_lists};
use crate::unique_visitors::{VisitorKey, countable_day, first_visits};
use crate::user_agent;
use crate::webhooks::{self, EventType};
use kv_model::{
    ClickEvent, MAX_FACT_CHARS, MAX_USER_AGENT_BYTES, SHORT_CODE_MAX_LEN, is_visitor_hash,
    truncate_bytes, truncate_chars,
};
use sqlx::{AnyConnection, Row};
use std::collections::{BTreeMap, HashMap, HashSet};

/// What became of a click report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ingested {
    /// This many events were stored (bot events, counted apart, included); the others named no existing link or
    /// group, or a time before 1970 or after 9999.
    Stored(usize),
    /// The report's batch id was counted before: nothing was stored again.
    Duplicate,
}

/// Longest host (DNS's limit): a longer one names no domain, and is no referrer host.
const MAX_HOST: usize = 253;
/// Length of a group id (a hyphenated UUID).
const GROUP_ID_LEN: usize = 36;
/// Longest event id kept (a Queues message id is 32 hex characters).
const MAX_EVENT_ID: usize = 64;

/// An event as stored: normalised, bounded, and with a time the digests can place on a day.
pub(crate) struct Event {
    /// Lowercase host and short code of a persistent link; `None` for a dynamic link.
    link: Option<(String, String)>,
    /// Lowercase group id (used only for dynamic links: a link's group is the link's own).
    group_id: String,
    /// Microseconds.
    at: i64,
    day: Day,
    /// Two ASCII letters or digits, uppercase.
    country: Option<String>,
    referer_host: Option<String>,
    device: &'static str,
    /// From the User-Agent ([`user_agent`]), which is not kept; `other` when none was sent.
    browser: &'static str,
    os: &'static str,
    /// Region and city names ([`fact`]).
    region: Option<String>,
    city: Option<String>,
    /// The digest values of region and city: the country, a TAB, the name (each '' when unknown): a region's
    /// name is only unique within its country.
    region_key: String,
    city_key: String,
    utm_source: Option<String>,
    utm_medium: Option<String>,
    utm_campaign: Option<String>,
    /// A request the edge recognised as a bot: counted in `bots` only.
    bot: bool,
    /// The event's own id, when the sender gave one ([`MAX_EVENT_ID`] printable ASCII characters at most; another
    /// id counts as none).
    id: Option<String>,
    /// The visitor's hash for the day ([`kv_model::visitor`]); anything else counts as none.
    visitor: Option<String>,
}

impl Event {
    fn normalize(e: ClickEvent) -> Option<Self> {
        // Names with control characters name nothing (and a NUL is an encoding error on PostgreSQL, which would
        // fail the whole report over one event).
        let control = |s: &str| s.chars().any(char::is_control);
        if control(&e.host) || control(&e.group_id) || e.short_code.as_deref().is_some_and(control)
        {
            return None;
        }
        let at = e.at.checked_mul(1_000)?;
        let day = Day::of(Micros(at))?;
        let link = match e.short_code {
            Some(code) if code.len() > SHORT_CODE_MAX_LEN || e.host.len() > MAX_HOST => {
                return None;
            }
            Some(code) => Some((e.host.to_ascii_lowercase(), code.to_ascii_lowercase())),
            None if e.group_id.len() > GROUP_ID_LEN => return None,
            None => None,
        };
        let ua =
            e.ua.as_deref()
                .map(|ua| truncate_bytes(ua, MAX_USER_AGENT_BYTES));
        let country: Option<String> = e
            .country
            .filter(|c| c.len() == 2 && c.bytes().all(|b| b.is_ascii_alphanumeric()))
            .map(|c| c.to_ascii_uppercase());
        let region = fact(e.region);
        let city = fact(e.city);
        let place = |name: &Option<String>| {
            format!(
                "{}\t{}",
                country.as_deref().unwrap_or_default(),
                name.as_deref().unwrap_or_default()
            )
        };
        Some(Self {
            link,
            group_id: e.group_id.to_ascii_lowercase(),
            at,
            day,
            region_key: place(&region),
            city_key: place(&city),
            country,
            region,
            city,
            browser: ua.map_or("other", user_agent::browser),
            os: ua.map_or("other", user_agent::os),
            utm_source: fact(e.utm_source),
            utm_medium: fact(e.utm_medium),
            utm_campaign: fact(e.utm_campaign),
            bot: e.bot,
            // Visitors choose their Referer: anything that cannot be a host is dropped, not stored.
            referer_host: e
                .referer_host
                .filter(|h| {
                    !h.is_empty()
                        && h.len() <= MAX_HOST
                        && !h.chars().any(|c| c.is_whitespace() || c.is_control())
                })
                .map(|h| h.to_ascii_lowercase()),
            device: e.device.as_str(),
            visitor: e.visitor.filter(|v| is_visitor_hash(v)),
            id: e.id.filter(|id| {
                !id.is_empty()
                    && id.len() <= MAX_EVENT_ID
                    && id.bytes().all(|b| b.is_ascii_graphic())
            }),
        })
    }
}

/// A region, city or UTM value as stored: trimmed, cut to [`MAX_FACT_CHARS`] characters (the worker cuts them
/// too; a longer one is kept shortened rather than the event refused), and dropped (unknown) when empty or
/// holding control characters, which no place name or campaign has (and a NUL would fail the report on
/// PostgreSQL).
fn fact(value: Option<String>) -> Option<String> {
    let value = value?;
    let value = value.trim();
    if value.is_empty() || value.chars().any(char::is_control) {
        return None;
    }
    Some(truncate_chars(value, MAX_FACT_CHARS).trim_end().to_owned())
}

/// Whom a click counts for: a link, or a group's dynamic links.
struct Target {
    account_id: String,
    group_id: String,
    link_id: Option<String>,
    /// The link's click limit (issue 25), if any.
    max_clicks: Option<i64>,
}

/// The targets of a report's events, each looked up once.
#[derive(Default)]
struct Targets {
    list: Vec<Target>,
    links: HashMap<(String, String), usize>,
    groups: HashMap<String, usize>,
}

impl Targets {
    async fn resolve(conn: &mut AnyConnection, events: &[&Event]) -> Result<Self, StoreError> {
        let mut targets = Self::default();
        let mut codes_by_host: BTreeMap<&str, HashSet<&str>> = BTreeMap::new();
        let mut groups: HashSet<&str> = HashSet::new();
        for e in events.iter().copied() {
            match &e.link {
                Some((host, code)) => {
                    codes_by_host.entry(host).or_default().insert(code);
                }
                None => {
                    groups.insert(&e.group_id);
                }
            }
        }
        let hosts: Vec<&str> = codes_by_host.keys().copied().collect();
        let mut domains: Vec<(String, String)> = Vec::new();
        for (list, binds) in in_lists(&hosts, 1) {
            let sql = format!("SELECT id, host FROM domains WHERE host IN ({list})");
            let mut q = sqlx::query(&sql);
            for b in binds {
                q = q.bind(b);
            }
            for r in q.fetch_all(&mut *conn).await? {
                domains.push((r.try_get("id")?, r.try_get("host")?));
            }
        }
        for (domain_id, host) in domains {
            let Some(codes) = codes_by_host.get(host.as_str()) else {
                continue;
            };
            let codes: Vec<&str> = codes.iter().copied().collect();
            for (list, binds) in in_lists(&codes, 2) {
                let sql = format!(
                    "SELECT id, account_id, group_id, short_code, max_clicks FROM links \
                     WHERE domain_id = $1 AND short_code IN ({list})"
                );
                let mut q = sqlx::query(&sql).bind(&domain_id);
                for b in binds {
                    q = q.bind(b);
                }
                for r in q.fetch_all(&mut *conn).await? {
                    targets
                        .links
                        .insert((host.clone(), r.try_get("short_code")?), targets.list.len());
                    targets.list.push(Target {
                        account_id: r.try_get("account_id")?,
                        group_id: r.try_get("group_id")?,
                        link_id: Some(r.try_get("id")?),
                        max_clicks: r.try_get("max_clicks")?,
                    });
                }
            }
        }
        let groups: Vec<&str> = groups.into_iter().collect();
        for (list, binds) in in_lists(&groups, 1) {
            let sql = format!("SELECT id, account_id FROM groups WHERE id IN ({list})");
            let mut q = sqlx::query(&sql);
            for b in binds {
                q = q.bind(b);
            }
            for r in q.fetch_all(&mut *conn).await? {
                let id: String = r.try_get("id")?;
                targets.groups.insert(id.clone(), targets.list.len());
                targets.list.push(Target {
                    account_id: r.try_get("account_id")?,
                    group_id: id,
                    link_id: None,
                    max_clicks: None,
                });
            }
        }
        Ok(targets)
    }

    /// The event's target, when its link or group exists.
    fn of(&self, e: &Event) -> Option<usize> {
        match &e.link {
            Some(key) => self.links.get(key).copied(),
            None => self.groups.get(&e.group_id).copied(),
        }
    }
}

/// Records the batch id; false when it was recorded before (by a committed report, or by a concurrent one that
/// commits first: PostgreSQL makes the later insert wait for it).
async fn claim_batch(conn: &mut AnyConnection, id: &ClickBatchId) -> Result<bool, StoreError> {
    let claimed = sqlx::query(
        "INSERT INTO click_batches (batch_id, received_at) VALUES ($1, $2) ON CONFLICT (batch_id) DO NOTHING",
    )
    .bind(id.as_str())
    .bind(Micros::now().0)
    .execute(&mut *conn)
    .await;
    match claimed {
        Ok(done) => Ok(done.rows_affected() == 1),
        // Belt and braces: whichever way the engine reports the race, the loser is a duplicate.
        Err(e) if is_unique_violation(&e) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Records the event ids of `ids` (distinct) and returns those recorded now: an id recorded before (by a committed
/// report, or by a concurrent one that commits first: PostgreSQL makes the later insert wait for it) is left out.
async fn claim_event_ids(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    ids: &[&str],
) -> Result<HashSet<String>, StoreError> {
    let mut claimed = HashSet::with_capacity(ids.len());
    let now = Micros::now().0;
    let mut rest = ids;
    for n in multi_row.chunks(ids.len(), 2) {
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        let sql = format!(
            "INSERT INTO click_event_ids (id, received_at) VALUES {} ON CONFLICT (id) DO NOTHING RETURNING id",
            multi_row.values(n, 2)
        );
        let mut q = sqlx::query(&sql);
        for id in chunk {
            q = q.bind(*id).bind(now);
        }
        for row in q.fetch_all(&mut *conn).await? {
            claimed.insert(row.try_get("id")?);
        }
    }
    Ok(claimed)
}

async fn insert_events(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    targets: &[Target],
    clicks: &[(usize, &Event)],
    first: &[Option<bool>],
) -> Result<(), StoreError> {
    let rows: Vec<(&(usize, &Event), Option<i64>)> = clicks
        .iter()
        .zip(first.iter().map(|f| f.map(i64::from)))
        .collect();
    for (chunk, values) in multi_row.split(&rows, 15) {
        let sql = format!(
            "INSERT INTO clicks (account_id, link_id, group_id, at, country, referer_host, device, \
             browser, os, region, city, utm_source, utm_medium, utm_campaign, first_visit) VALUES {values}"
        );
        let mut q = sqlx::query(&sql);
        for ((t, e), first_visit) in chunk {
            let target = &targets[*t];
            q = q
                .bind(target.account_id.as_str())
                .bind(target.link_id.as_deref())
                .bind(target.group_id.as_str())
                .bind(e.at)
                .bind(e.country.as_deref())
                .bind(e.referer_host.as_deref())
                .bind(e.device)
                .bind(e.browser)
                .bind(e.os)
                .bind(e.region.as_deref())
                .bind(e.city.as_deref())
                .bind(e.utm_source.as_deref())
                .bind(e.utm_medium.as_deref())
                .bind(e.utm_campaign.as_deref())
                .bind(*first_visit);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

/// Adds a report's clicks to its links' totals of all time (`link_click_totals`, read by the list's `sort=clicks`,
/// the export and the click limit). Right after the raw events, before the digests: a link deletion deletes the
/// link row, then (cascading) its totals, then touches the digests, so the lock order stays the module's. On
/// PostgreSQL the rows are locked in id order first, so two reports touching the same links never wait on each
/// other in a cycle; the update itself is one statement per chunk, `VALUES` rows joined by id (`column1`,
/// `column2` on both engines).
async fn add_to_link_totals(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    targets: &[Target],
    clicks: &[(usize, &Event)],
) -> Result<(), StoreError> {
    let mut totals: BTreeMap<&str, i64> = BTreeMap::new();
    for (t, _) in clicks {
        if let Some(link) = &targets[*t].link_id {
            *totals.entry(link).or_default() += 1;
        }
    }
    let totals: Vec<(&str, i64)> = totals.into_iter().collect();
    if !multi_row.anonymous {
        let ids: Vec<&str> = totals.iter().map(|(id, _)| *id).collect();
        for (placeholders, chunk) in in_lists(&ids, 1) {
            let sql = format!(
                "SELECT link_id FROM link_click_totals WHERE link_id IN ({placeholders}) \
                 ORDER BY link_id FOR NO KEY UPDATE"
            );
            let mut q = sqlx::query(&sql);
            for id in chunk {
                q = q.bind(id);
            }
            q.fetch_all(&mut *conn).await?;
        }
    }
    // The new totals are read back only when a link of the report has a click limit (most reports have none, and
    // reading back hundreds of rows costs a row conversion each).
    let limited = targets.iter().any(|t| t.max_clicks.is_some());
    let returning = if limited {
        " RETURNING link_click_totals.link_id AS id, link_click_totals.clicks AS clicks"
    } else {
        ""
    };
    let mut now: BTreeMap<String, i64> = BTreeMap::new();
    let mut rest = totals.as_slice();
    for n in multi_row.chunks(totals.len(), 2) {
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        let sql = format!(
            "UPDATE link_click_totals SET clicks = link_click_totals.clicks + v.column2 FROM (VALUES {}) AS v \
             WHERE link_click_totals.link_id = v.column1{returning}",
            multi_row.values(n, 2)
        );
        let mut q = sqlx::query(&sql);
        for (id, n) in chunk {
            q = q.bind(*id).bind(*n);
        }
        if !limited {
            q.execute(&mut *conn).await?;
            continue;
        }
        for row in q.fetch_all(&mut *conn).await? {
            now.insert(row.try_get("id")?, row.try_get("clicks")?);
        }
    }
    // Links at or past their click limit (issue 25's max_clicks, as read with the report's targets) after this
    // report. Every report that finds a link there republishes it, not only the one that crossed: a limit lowered
    // by a PATCH committed while this report ran is then still acted on by the next report, and past the limit the
    // edge sends few clicks (those already in flight), so the republishing is bounded.
    let exhausted: Vec<String> = targets
        .iter()
        .filter_map(|t| Some((t.link_id.as_ref()?, t.max_clicks?)))
        .filter(|(id, max)| now.get(id.as_str()).is_some_and(|clicks| clicks >= max))
        .map(|(id, _)| id.clone())
        .collect();
    republish_exhausted(conn, &exhausted).await
}

/// Puts the KV keys of links that just reached their click limit in the outbox, in the report's transaction:
/// their records are then published as expired ([`crate::Db::link_record`]).
async fn republish_exhausted(conn: &mut AnyConnection, ids: &[String]) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut keys = Vec::with_capacity(ids.len());
    for (placeholders, chunk) in in_lists(&ids, 1) {
        let sql = format!(
            "SELECT d.host, l.short_code FROM links l JOIN domains d ON d.id = l.domain_id \
             WHERE l.id IN ({placeholders})"
        );
        let mut q = sqlx::query(&sql);
        for id in chunk {
            q = q.bind(id);
        }
        for r in q.fetch_all(&mut *conn).await? {
            keys.push(kv_model::link_key(
                &r.try_get::<String, _>("host")?,
                &r.try_get::<String, _>("short_code")?,
            ));
        }
    }
    // in_lists pads with repeats of the last id.
    keys.sort_unstable();
    keys.dedup();
    outbox::enqueue(conn, &keys).await
}

/// The report's bot events whose link still exists. Their links are locked as a raw click's foreign key locks
/// its link (PostgreSQL; `FOR KEY SHARE`, in id order), so a link deleted meanwhile is either gone here, or
/// deleted after this report commits and its bots taken out with the rest. SQLite's one writer makes the lookup in
/// [`Targets::resolve`] enough.
async fn bots_of_existing_links<'e>(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    targets: &[Target],
    bots: Vec<(usize, &'e Event)>,
) -> Result<Vec<(usize, &'e Event)>, StoreError> {
    if multi_row.anonymous {
        return Ok(bots);
    }
    let mut ids: Vec<&str> = bots
        .iter()
        .filter_map(|(t, _)| targets[*t].link_id.as_deref())
        .collect();
    if ids.is_empty() {
        return Ok(bots);
    }
    ids.sort_unstable();
    ids.dedup();
    let mut alive: HashSet<String> = HashSet::with_capacity(ids.len());
    for (placeholders, chunk) in in_lists(&ids, 1) {
        let sql =
            format!("SELECT id FROM links WHERE id IN ({placeholders}) ORDER BY id FOR KEY SHARE");
        let mut q = sqlx::query(&sql);
        for id in chunk {
            q = q.bind(id);
        }
        for row in q.fetch_all(&mut *conn).await? {
            alive.insert(row.try_get("id")?);
        }
    }
    Ok(bots
        .into_iter()
        .filter(|(t, _)| {
            targets[*t]
                .link_id
                .as_ref()
                .is_none_or(|id| alive.contains(id))
        })
        .collect())
}

/// The digest values one click adds one to: one value of every dimension.
fn dimensions(e: &Event) -> [(Dimension, &str); 10] {
    fn or_empty(v: &Option<String>) -> &str {
        v.as_deref().unwrap_or_default()
    }
    [
        (Dimension::COUNTRY, or_empty(&e.country)),
        (Dimension::DEVICE, e.device),
        (Dimension::REFERRER, or_empty(&e.referer_host)),
        (Dimension::BROWSER, e.browser),
        (Dimension::OS, e.os),
        (Dimension::REGION, e.region_key.as_str()),
        (Dimension::CITY, e.city_key.as_str()),
        (Dimension::UTM_SOURCE, or_empty(&e.utm_source)),
        (Dimension::UTM_MEDIUM, or_empty(&e.utm_medium)),
        (Dimension::UTM_CAMPAIGN, or_empty(&e.utm_campaign)),
    ]
}

/// Adds a report's clicks, and its bot events (in `bots` only), to the day digests of their links, groups and
/// accounts ([`crate::digests`]): added up in memory per link, group and account and day, and stored as a delta
/// row each, which the origin folds into the day rows in the background.
async fn count(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    targets: &[Target],
    clicks: &[(usize, &Event)],
    first: &[Option<bool>],
    bots: &[(usize, &Event)],
) -> Result<(), StoreError> {
    let mut links: BTreeMap<DayKey<'_>, Delta<'_>> = BTreeMap::new();
    let mut groups: BTreeMap<DayKey<'_>, Delta<'_>> = BTreeMap::new();
    let mut accounts: BTreeMap<DayKey<'_>, Delta<'_>> = BTreeMap::new();
    let all = clicks
        .iter()
        .zip(first)
        .map(|(c, first)| (c, false, *first == Some(true)))
        .chain(bots.iter().map(|b| (b, true, false)));
    for ((t, e), bot, first_visit) in all {
        let target = &targets[*t];
        let mut keys = vec![
            (&mut groups, (target.group_id.as_str(), e.day.0, "")),
            (&mut accounts, (target.account_id.as_str(), e.day.0, "")),
        ];
        if let Some(link) = &target.link_id {
            keys.push((
                &mut links,
                (link.as_str(), e.day.0, target.group_id.as_str()),
            ));
        }
        for (map, key) in keys {
            let change = map.entry(key).or_default();
            if bot {
                change.bots += 1;
                continue;
            }
            change.clicks += 1;
            change.uniques += i64::from(first_visit);
            for (dimension, value) in dimensions(e) {
                change.tally.add(dimension, value, 1);
            }
        }
    }
    write::add_deltas(
        conn,
        multi_row,
        [
            (Scope::LINKS, &links),
            (Scope::GROUPS, &groups),
            (Scope::ACCOUNTS, &accounts),
        ],
    )
    .await
}

/// One click report, normalised, as it waits to be stored.
pub(crate) struct Report {
    pub(crate) batch: Option<ClickBatchId>,
    pub(crate) events: Vec<Event>,
}

impl Report {
    pub(crate) fn new(batch: Option<&ClickBatchId>, events: Vec<ClickEvent>) -> Self {
        Self {
            batch: batch.cloned(),
            events: events.into_iter().filter_map(Event::normalize).collect(),
        }
    }
}

/// Stores reports in the caller's transaction and returns each one's outcome: a report whose batch id was
/// claimed before (by a committed transaction, by a concurrent one that commits first, or by an earlier report
/// of this call) stores nothing.
pub(crate) async fn record_reports(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    reports: &[Report],
) -> Result<Vec<Ingested>, StoreError> {
    // Batch ids are claimed in id order: on PostgreSQL two transactions of the click writer holding deliveries of
    // the same reports then wait for each other in one order, never in a cycle (a deadlock would fail both).
    let mut fresh = vec![true; reports.len()];
    let mut order: Vec<(&ClickBatchId, usize)> = reports
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((r.batch.as_ref()?, i)))
        .collect();
    order.sort_unstable_by(|a, b| a.0.as_str().cmp(b.0.as_str()).then(a.1.cmp(&b.1)));
    for (id, i) in order {
        fresh[i] = claim_batch(conn, id).await?;
    }
    let counted = || {
        reports
            .iter()
            .zip(&fresh)
            .filter(|(_, fresh)| **fresh)
            .map(|(r, _)| r)
    };
    // Events with ids count once each, whatever report carries them: claim the ids first, and keep an event
    // only if its id was claimed now, and not by an earlier event of this call.
    let mut ids: Vec<&str> = counted()
        .flat_map(|r| &r.events)
        .filter_map(|e| e.id.as_deref())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let mut claimed = if ids.is_empty() {
        HashSet::new()
    } else {
        claim_event_ids(conn, multi_row, &ids).await?
    };
    let mut first_time = |e: &Event| e.id.as_ref().is_none_or(|id| claimed.remove(id));
    let new_events: Vec<Vec<&Event>> = reports
        .iter()
        .zip(&fresh)
        .map(|(r, fresh)| {
            if *fresh {
                r.events.iter().filter(|e| first_time(e)).collect()
            } else {
                Vec::new()
            }
        })
        .collect();
    let events: Vec<&Event> = new_events.iter().flatten().copied().collect();
    let targets = Targets::resolve(conn, &events).await?;
    let mut clicks: Vec<(usize, &Event)> = Vec::with_capacity(events.len());
    let mut bots: Vec<(usize, &Event)> = Vec::new();
    let mut outcomes = Vec::with_capacity(reports.len());
    let mut stored = Vec::with_capacity(reports.len());
    for (events, fresh) in new_events.iter().zip(&fresh) {
        if !fresh {
            outcomes.push(Ingested::Duplicate);
            continue;
        }
        let (before, bots_before) = (clicks.len(), bots.len());
        for e in events {
            if let Some(t) = targets.of(e) {
                if e.bot {
                    bots.push((t, *e));
                } else {
                    clicks.push((t, *e));
                }
            }
        }
        outcomes.push(Ingested::Stored(
            clicks.len() - before + bots.len() - bots_before,
        ));
        stored.push(before..clicks.len());
    }
    let first = first_visit_of_each(conn, multi_row, &targets.list, &clicks).await?;
    insert_events(conn, multi_row, &targets.list, &clicks, &first).await?;
    let bots = bots_of_existing_links(conn, multi_row, &targets.list, bots).await?;
    add_to_link_totals(conn, multi_row, &targets.list, &clicks).await?;
    count(conn, multi_row, &targets.list, &clicks, &first, &bots).await?;
    emit_clicked(conn, &targets.list, &clicks, &stored).await?;
    Ok(outcomes)
}

/// Whether each click was its visitor's first of the day on its link ([`crate::unique_visitors`]): `None` without
/// a visitor hash or once the day's hashes are gone; of a visitor's clicks in this call, only the first can be.
async fn first_visit_of_each(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    targets: &[Target],
    clicks: &[(usize, &Event)],
) -> Result<Vec<Option<bool>>, StoreError> {
    let now = Micros::now();
    let keys: Vec<Option<VisitorKey<'_>>> = clicks
        .iter()
        .map(|(t, e)| {
            let visitor = e.visitor.as_deref()?;
            let target = &targets[*t];
            let owner = target.link_id.as_deref().unwrap_or(&target.group_id);
            countable_day(e.day.0, now).then_some((e.day.0, owner, visitor))
        })
        .collect();
    if keys.iter().all(Option::is_none) {
        return Ok(vec![None; clicks.len()]);
    }
    let mut new = first_visits(conn, multi_row, keys.iter().flatten().copied().collect()).await?;
    Ok(keys
        .into_iter()
        .map(|key| key.map(|k| new.remove(&k)))
        .collect())
}

/// The webhooks' `link.clicked` events: one per persistent link per report (`reports`: each report's range of
/// `clicks`), `{"link_id", "clicks": [{"timestamp", "country", "device", "referer_host"}]}` in the report's order
/// (never an address: none is stored), for the accounts with a subscribed endpoint. Dynamic links' clicks have no
/// link and send none.
async fn emit_clicked(
    conn: &mut AnyConnection,
    targets: &[Target],
    clicks: &[(usize, &Event)],
    reports: &[std::ops::Range<usize>],
) -> Result<(), StoreError> {
    let accounts: Vec<&str> = clicks
        .iter()
        .map(|(t, _)| &targets[*t])
        .filter(|t| t.link_id.is_some())
        .map(|t| t.account_id.as_str())
        .collect();
    if accounts.is_empty() {
        return Ok(());
    }
    let subscribed = webhooks::emit::subscribers(conn, &accounts, EventType::LinkClicked).await?;
    if subscribed.is_empty() {
        return Ok(());
    }
    let mut events = Vec::new();
    for range in reports {
        // Per link, in the order of each link's first click in the report.
        let mut per_link: Vec<(usize, Vec<serde_json::Value>)> = Vec::new();
        let mut index: HashMap<usize, usize> = HashMap::new();
        for (t, e) in &clicks[range.clone()] {
            let target = &targets[*t];
            if target.link_id.is_none() || !subscribed.contains_key(&target.account_id) {
                continue;
            }
            let at = *index.entry(*t).or_insert_with(|| {
                per_link.push((*t, Vec::new()));
                per_link.len() - 1
            });
            per_link[at].1.push(serde_json::json!({
                "timestamp": Micros(e.at).to_iso8601(),
                "country": e.country,
                "device": e.device,
                "referer_host": e.referer_host,
            }));
        }
        for (t, list) in per_link {
            let target = &targets[t];
            let (Some(link), Some(endpoints)) =
                (&target.link_id, subscribed.get(&target.account_id))
            else {
                continue;
            };
            events.push(webhooks::emit::Pending {
                account_id: &target.account_id,
                ordering_key: link,
                data: serde_json::json!({ "link_id": link, "clicks": list }),
                endpoints,
            });
        }
    }
    webhooks::emit::write_events(conn, EventType::LinkClicked, events).await?;
    Ok(())
}
