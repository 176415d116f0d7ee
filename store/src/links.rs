//! Links: creation under the key's rate limit (spec 4.1, 8) and the account's list (spec 4.2).
//!
//! Where a new link goes is resolved here; the transaction's work is [`crate::creation`]'s. How the transaction is
//! run was chosen when the pools opened ([`LinkPath`]): SQLite's batched writer commits many creations at once,
//! PostgreSQL one each.

use crate::creation::{
    Attempt, CreateLink, CreatedLink, Creator, Retry, Target, insert_link, record_created,
};
use crate::domain::{
    LinkSort, ListQuery, MatchMode, Micros, ShortCode, generate_short_code, parent_domains,
    prefix_upper_bound,
};
use crate::error::{Entity, StoreError};
use crate::link_options::{INNER_COLUMNS, check_destinations, check_max_clicks_group};
use crate::listed::{LISTED_COLUMNS, ListedLink};
use crate::pool::{Db, LinkPath};
use crate::rate_limit::RateLimitState;
use crate::webhooks::emit::is_postgres;
use sqlx::Row;

/// Attempts at a generated code before giving up (each collides with odds ~n/36^7).
const GENERATE_ATTEMPTS: usize = 8;

/// A value bound to a list query's condition.
pub(crate) enum Arg {
    Text(String),
    Int(i64),
}

/// `sql` with the account as `$1` and `binds` after it.
pub(crate) fn bind_all<'q>(
    sql: &'q str,
    account_id: &str,
    binds: &[Arg],
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    let mut q = sqlx::query(sql).bind(account_id.to_owned());
    for b in binds {
        q = match b {
            Arg::Text(t) => q.bind(t.clone()),
            Arg::Int(i) => q.bind(*i),
        };
    }
    q
}

/// The `AND …` conditions of a list query's filters over `links l`, with their values bound from `$2` on (`$1` is
/// the account). Shared by the list and the export, which must select exactly the same links.
pub(crate) fn conditions(query: &ListQuery, postgres: bool) -> Conditions {
    // $1 is the account; each condition binds the next numbers.
    let mut binds: Vec<Arg> = Vec::new();
    let mut conditions = String::new();
    let next = |binds: &mut Vec<Arg>, value: Arg| {
        binds.push(value);
        format!("${}", binds.len() + 1)
    };
    match &query.filter {
        None => {}
        Some((v, MatchMode::Exact)) => {
            let p = next(&mut binds, Arg::Text(v.clone()));
            conditions.push_str(&format!(" AND l.long_url = {p}"));
        }
        Some((prefix, MatchMode::StartsWith)) => {
            let p = next(&mut binds, Arg::Text(prefix.clone()));
            conditions.push_str(&format!(" AND l.long_url >= {p}"));
            if let Some(upper) = prefix_upper_bound(prefix) {
                let p = next(&mut binds, Arg::Text(upper));
                conditions.push_str(&format!(" AND l.long_url < {p}"));
            }
        }
    }
    if let Some(q) = &query.q {
        if !postgres && q.chars().count() >= 3 {
            // SQLite's trigram index (migration 0016): a quoted phrase matches as a substring, every character
            // literal. Shorter than a trigram, `q` cannot use it and scans (below).
            let p = next(
                &mut binds,
                Arg::Text(format!("\"{}\"", q.replace('"', "\"\""))),
            );
            conditions.push_str(&format!(
                " AND l.rowid IN (SELECT rowid FROM links_search WHERE links_search MATCH {p})"
            ));
        } else {
            // Literal: `%`, `_` and `\` are ordinary characters of `q`. PostgreSQL's pg_trgm GIN index serves it.
            let escaped = q
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_");
            let p = next(&mut binds, Arg::Text(format!("%{escaped}%")));
            conditions.push_str(&format!(" AND l.search_text LIKE {p} ESCAPE '\\'"));
        }
    }
    let mut tag_params = Vec::with_capacity(query.tags.len());
    for tag in &query.tags {
        let p = next(&mut binds, Arg::Text(tag.key().to_owned()));
        // A probe of link_tags' primary key per candidate link: the account's index is read in the list's order
        // and stops once the page is full (a common tag). A rare tag's page is read from the tag's side instead
        // (Conditions::page_source).
        conditions.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM link_tags lt WHERE lt.link_id = l.id AND lt.tag_id = {})",
            tag_id_of(&p)
        ));
        tag_params.push(p);
    }
    if let Some(group) = &query.group_id {
        let p = next(&mut binds, Arg::Text(group.clone()));
        conditions.push_str(&format!(" AND l.group_id = {p}"));
    }
    if let Some(domain) = &query.domain {
        let p = next(&mut binds, Arg::Text(domain.as_str().to_owned()));
        conditions.push_str(&format!(
            " AND l.domain_id IN (SELECT id FROM domains WHERE host = {p})"
        ));
    }
    if let Some(active) = query.is_active {
        let p = next(&mut binds, Arg::Int(i64::from(active)));
        conditions.push_str(&format!(" AND l.is_active = {p}"));
    }
    Conditions {
        sql: conditions,
        binds,
        tag_params,
        only_tags: !query.is_filtered_beyond_tags(),
    }
}

/// A list query's conditions ([`conditions`]) and their values.
pub(crate) struct Conditions {
    /// `" AND …"` clauses, or empty.
    pub(crate) sql: String,
    /// The values of `$2`, `$3`, … in order.
    pub(crate) binds: Vec<Arg>,
    /// The placeholders of the `tag` filters' name keys, in order.
    pub(crate) tag_params: Vec<String>,
    /// Whether the tags are the only filters.
    pub(crate) only_tags: bool,
}

impl Conditions {
    /// `SELECT COUNT(*) AS n` of the links matching every condition.
    ///
    /// With a `tag` filter the count starts from the first tag's rows in `link_tags` (its index by tag), so it
    /// reads that tag's links rather than probing every one of the account's links for it: at a million links and
    /// a tag on 1 % of them, ~10,000 index entries instead of 1,000,000 probes. With tags alone it never touches
    /// `links`: an account's tags are only ever put on that account's links (store/src/link_tags.rs and the
    /// rename in store/src/tags.rs both stay within one account), so the tag's rows are the account's matches.
    pub(crate) fn count_sql(&self) -> String {
        let Some(first) = self.tag_params.first() else {
            return format!(
                "SELECT COUNT(*) AS n FROM links l WHERE l.account_id = $1{}",
                self.sql
            );
        };
        if self.only_tags {
            let more: String = self.tag_params[1..]
                .iter()
                .map(|p| {
                    format!(
                        " AND lt0.link_id IN (SELECT link_id FROM link_tags WHERE tag_id = {})",
                        tag_id_of(p)
                    )
                })
                .collect();
            format!(
                "SELECT COUNT(*) AS n FROM link_tags lt0 WHERE lt0.tag_id = {}{more}",
                tag_id_of(first)
            )
        } else {
            format!(
                "SELECT COUNT(*) AS n FROM {}",
                self.tag_driven(first, false)
            )
        }
    }

    /// `FROM` and `WHERE` of the links matching every condition, read from the first tag's rows in `link_tags`
    /// outwards: `links` is looked up by id for each of the tag's links. CROSS JOIN keeps SQLite's loop order.
    /// `by_clicks` joins each link's totals as `ct` (the order reads them).
    fn tag_driven(&self, first_tag: &str, by_clicks: bool) -> String {
        let (totals, on_totals) = if by_clicks {
            (" CROSS JOIN link_click_totals ct", " AND ct.link_id = l.id")
        } else {
            ("", "")
        };
        format!(
            "link_tags lt0 CROSS JOIN links l{totals} WHERE lt0.tag_id = {} AND l.id = lt0.link_id{on_totals} \
             AND l.account_id = $1{}",
            tag_id_of(first_tag),
            self.sql
        )
    }

    /// `FROM` and `WHERE` of every match read along the account's index in the order of `sort`: `links` by
    /// account, or, for `sort=clicks`, the totals' own index (`ct`, migration 0018) with each link looked up by id.
    pub(crate) fn scan(&self, sort: LinkSort) -> String {
        if sort == LinkSort::Clicks {
            format!(
                "link_click_totals ct CROSS JOIN links l WHERE ct.account_id = $1 AND l.id = ct.link_id{}",
                self.sql
            )
        } else {
            format!("links l WHERE l.account_id = $1{}", self.sql)
        }
    }

    /// `FROM` and `WHERE` of a page of `limit` matches after `offset` in the order of `sort`, of `total` matches
    /// among `account_links`. With a tag, the plan is chosen here rather than left to the engine, whose estimate
    /// of a tag's share is a guess: reading the account's index in the page's order finds a match every
    /// `account_links / total` entries, so the page costs about `(offset + limit) × account_links / total`
    /// probes; reading the tag's links costs `total` lookups and a sort. At a million links, a tag on 1 % of
    /// them: 2,000 probes against 10,000 lookups; a tag on 10 links: 10 lookups against the whole index.
    pub(crate) fn page_source(
        &self,
        sort: LinkSort,
        total: i64,
        account_links: i64,
        offset: u64,
        limit: u32,
    ) -> String {
        let Some(first) = self.tag_params.first() else {
            return self.scan(sort);
        };
        let wanted = offset.saturating_add(u64::from(limit)) as f64;
        let probes = wanted * account_links.max(1) as f64 / total.max(1) as f64;
        if (total as f64) < probes {
            self.tag_driven(first, sort == LinkSort::Clicks)
        } else {
            self.scan(sort)
        }
    }
}

/// The id of the account's tag whose name key is bound at `p` (none: NULL, which matches nothing).
fn tag_id_of(p: &str) -> String {
    format!("(SELECT id FROM tags WHERE account_id = $1 AND name_key = {p})")
}

/// How a list query's `sort` orders its rows: the inner query pages `links l` (and, for `sort=clicks`, the
/// totals `ct` it is read from, [`Conditions::scan`]); the outer one orders the page again after its joins, with
/// each link's totals joined as `ct`.
pub(crate) struct SortOrder {
    /// The inner query's `ORDER BY` list, over `l` (and `ct`).
    pub(crate) inner: String,
    /// The outer query's `ORDER BY` list, over the inner query as `l` and the totals as `ct`.
    pub(crate) outer: String,
}

/// The order of `sort`; ties are broken newest first, then by id, so the order is total.
pub(crate) fn sort_order(sort: LinkSort, postgres: bool) -> SortOrder {
    // Byte order for short codes on both engines, whatever PostgreSQL's collation.
    let code = short_code_bytes(postgres);
    let same = |o: String| SortOrder {
        inner: o.clone(),
        outer: o,
    };
    match sort {
        LinkSort::Newest => same("l.created_at DESC, l.id DESC".to_owned()),
        LinkSort::Oldest => same("l.created_at ASC, l.id ASC".to_owned()),
        LinkSort::ShortCode => same(format!("{code} ASC, l.created_at DESC, l.id DESC")),
        // The totals' copies of the link's keys, so that the engine reads their index in order.
        LinkSort::Clicks => SortOrder {
            inner: "ct.clicks DESC, ct.created_at DESC, ct.link_id DESC".to_owned(),
            outer: "ct.clicks DESC, l.created_at DESC, l.id DESC".to_owned(),
        },
    }
}

/// The join of each listed link's totals, as `ct`, in an outer query over `l`. Outer: every link has its row (the
/// trigger of migration 0018), but a link must never vanish from a list for want of it.
pub(crate) const JOIN_TOTALS: &str = "LEFT JOIN link_click_totals ct ON ct.link_id = l.id";

/// `l.short_code` compared byte by byte on both engines.
pub(crate) fn short_code_bytes(postgres: bool) -> &'static str {
    if postgres {
        "l.short_code COLLATE \"C\""
    } else {
        "l.short_code"
    }
}

/// One page of links and the count of all matches.
#[derive(Debug, Clone)]
pub struct LinkPage {
    /// Links matching the query, ignoring pagination.
    pub total: i64,
    /// The page, newest first.
    pub results: Vec<ListedLink>,
}

impl Db {
    /// Creates a link under the key's rate limit. The limit check, the insert and the
    /// counters commit together or not at all; the group and domain are resolved on a read
    /// connection first, which keeps SQLite's single writer busy for as short as possible.
    pub async fn create_link(
        &self,
        req: &CreateLink,
    ) -> Result<(CreatedLink, RateLimitState), StoreError> {
        // The other URLs against the blocklist, as resolve_target checks long_url's (one query for all).
        let destinations = req.options.destinations();
        if !destinations.is_empty() {
            let mut conn = self.read.acquire().await?;
            check_destinations(&mut conn, &destinations).await?;
        }
        for _ in 0..GENERATE_ATTEMPTS {
            let target = self.resolve_target(req).await?;
            if req.options.max_clicks.is_some() {
                // Read before the write transaction, like the target: a change of the group's settings racing
                // this creation can leave a limit that is not counted (README, "Smart links").
                let mut conn = self.read.acquire().await?;
                check_max_clicks_group(&mut conn, &target.group_id).await?;
            }
            let code = req.short_code.clone().unwrap_or_else(generate_short_code);
            let attempt = match &self.link_path {
                LinkPath::Batched(writer) => writer.create(req.clone(), target, code).await?,
                LinkPath::Direct => self.create_in_own_transaction(req, &target, &code).await?,
            };
            match attempt {
                Ok(created) => return Ok(created),
                // A requested code is the client's to change; a generated one we redraw.
                Err(Retry::CodeTaken) if req.short_code.is_some() => {
                    return Err(StoreError::ShortCodeExists);
                }
                Err(Retry::CodeTaken | Retry::TargetGone) => continue,
            }
        }
        // 36^7 codes: only a nearly full code space gets here, which is ours to fix, not the client's.
        Err(StoreError::Internal(format!(
            "no free short code in {GENERATE_ATTEMPTS} attempts"
        )))
    }

    /// The requested group if it is the caller's, else the account's default group; the
    /// requested domain if the caller may use it (an enabled platform domain or their own
    /// active custom domain), else the oldest enabled platform domain (spec 4.1). One
    /// statement: every statement costs two thread hand-offs in sqlx's SQLite driver.
    pub(crate) async fn resolve_target(&self, req: &CreateLink) -> Result<Target, StoreError> {
        // The destination's host and its parents, checked against the blocklist in the same
        // statement: $4, $5, …
        let parents = parent_domains(req.long_url.host());
        let probes: Vec<String> = (4..4 + parents.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "SELECT d.id, d.host, COALESCE( \
                 (SELECT g.id FROM groups g WHERE g.id = $1 AND g.account_id = $3), \
                 (SELECT a.default_group_id FROM accounts a WHERE a.id = $3)) AS group_id, \
                 (SELECT COUNT(*) FROM blocked_domains WHERE domain IN ({})) AS blocked \
             FROM domains d \
             WHERE d.enabled = 1 AND (d.is_platform = 1 OR (d.id = $2 AND d.account_id = $3)) \
             ORDER BY CASE WHEN d.id = $2 THEN 0 ELSE 1 END, d.created_at, d.id LIMIT 1",
            probes.join(", ")
        );
        let mut query = sqlx::query(&sql)
            .bind(req.group_id.as_deref())
            .bind(req.domain_id.as_deref())
            .bind(&req.account_id);
        for parent in parents {
            query = query.bind(parent);
        }
        let row = query.fetch_optional(&self.read).await?;
        // Without a usable domain there is no row; a blocked destination is checked first all
        // the same when there is one, so that error does not depend on the domains.
        let Some(row) = row else {
            if self.is_host_blocked(req.long_url.host()).await? {
                return Err(StoreError::BlockedDestination);
            }
            return Err(StoreError::PlatformDomainUnavailable);
        };
        if row.try_get::<i64, _>("blocked")? > 0 {
            return Err(StoreError::BlockedDestination);
        }
        Ok(Target {
            group_id: row.try_get("group_id")?,
            domain_id: row.try_get("id")?,
            host: row.try_get("host")?,
        })
    }

    /// One attempt in a transaction of its own (PostgreSQL). Creations with one key must be serialised for the
    /// count in [`insert_link`] to be exact: writing to the key row takes its row lock until commit.
    async fn create_in_own_transaction(
        &self,
        req: &CreateLink,
        target: &Target,
        code: &ShortCode,
    ) -> Result<Attempt, StoreError> {
        let now = Micros::now().0;
        let mut tx = self.begin_write().await?;
        match &req.creator {
            Creator::ApiKey(key_id) => {
                sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
                    .bind(now)
                    .bind(key_id)
                    .execute(&mut *tx)
                    .await?;
            }
            // The dashboard's creations serialise on the account row instead (imports do not come this way).
            Creator::Dashboard | Creator::Import(_) => {
                sqlx::query("UPDATE accounts SET link_count = link_count WHERE id = $1")
                    .bind(&req.account_id)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        let attempt = insert_link(&mut tx, req, target, code, now).await?;
        if let Ok((link, _)) = &attempt {
            record_created(&mut tx, &[(req, link)]).await?;
            tx.commit().await?;
        }
        Ok(attempt)
    }

    /// A page of the account's links, newest first, with the total of all matches (no filter but `long_url`).
    pub async fn list_links(
        &self,
        account_id: &str,
        limit: u32,
        offset: u64,
        filter: Option<(&str, MatchMode)>,
    ) -> Result<LinkPage, StoreError> {
        let mut query = ListQuery::page(limit, offset);
        query.filter = filter.map(|(v, m)| (v.to_owned(), m));
        self.search_links(account_id, &query).await
    }

    /// A page of the account's links matching every filter of `query`, in its order, with the total of all
    /// matches.
    pub async fn search_links(
        &self,
        account_id: &str,
        query: &ListQuery,
    ) -> Result<LinkPage, StoreError> {
        // One read transaction, so the total and the page come from the same snapshot.
        let mut tx = self.read.begin().await?;
        let postgres = is_postgres(&tx);
        let conditions = conditions(query, postgres);
        // The counter kept by create_link: the unfiltered total, and what a tag's share is measured against.
        let account_links: i64 = sqlx::query("SELECT link_count FROM accounts WHERE id = $1")
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| r.try_get("link_count"))
            .transpose()?
            .unwrap_or(0);
        let total: i64 = if query.is_filtered() {
            bind_all(&conditions.count_sql(), account_id, &conditions.binds)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?
        } else {
            account_links
        };
        let source =
            conditions.page_source(query.sort, total, account_links, query.offset, query.limit);
        let binds = conditions.binds;
        let SortOrder { inner, outer } = sort_order(query.sort, postgres);
        let lim = binds.len() + 2;
        // Page the narrow index first, then join the few rows that survive the offset.
        let sql = format!(
            "SELECT {LISTED_COLUMNS} \
             FROM (SELECT l.id, l.short_code, l.long_url, l.domain_id, l.group_id, l.is_active, l.created_at, \
                          l.expires_at, l.forward_query, l.title, {INNER_COLUMNS} FROM {source} \
                   ORDER BY {inner} LIMIT ${lim} OFFSET ${}) l \
             JOIN domains d ON d.id = l.domain_id {JOIN_TOTALS} ORDER BY {outer}",
            lim + 1
        );
        let rows = bind_all(&sql, account_id, &binds)
            .bind(i64::from(query.limit))
            .bind(i64::try_from(query.offset).unwrap_or(i64::MAX))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let results = rows
            .iter()
            .map(ListedLink::from_row)
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        Ok(LinkPage { total, results })
    }

    /// The account a link belongs to (for the operator, who acts on any account's links).
    pub async fn link_account(&self, link_id: &str) -> Result<String, StoreError> {
        let row = sqlx::query("SELECT account_id FROM links WHERE id = $1")
            .bind(link_id)
            .fetch_optional(&self.read)
            .await?
            .ok_or(StoreError::NotFound(Entity::Link))?;
        Ok(row.try_get("account_id")?)
    }

    /// One of the account's links; another account's link is [`Entity::Link`] not found, like a missing one.
    pub async fn get_link(
        &self,
        account_id: &str,
        link_id: &str,
    ) -> Result<ListedLink, StoreError> {
        let mut conn = self.read.acquire().await?;
        get_link_in(&mut conn, account_id, link_id).await
    }
}

/// [`Db::get_link`] on a connection or inside a transaction.
pub(crate) async fn get_link_in(
    conn: &mut sqlx::AnyConnection,
    account_id: &str,
    link_id: &str,
) -> Result<ListedLink, StoreError> {
    let sql = format!(
        "SELECT {LISTED_COLUMNS} FROM links l JOIN domains d ON d.id = l.domain_id \
         WHERE l.id = $1 AND l.account_id = $2"
    );
    let row = sqlx::query(&sql)
        .bind(link_id)
        .bind(account_id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(StoreError::NotFound(Entity::Link))?;
    Ok(ListedLink::from_row(&row)?)
}
