//! Links: creation under the key's rate limit (spec 4.1, 8) and the account's list (spec 4.2).
//!
//! A creation is one rate-limit check and one insert inside a transaction, then, once per transaction, the
//! accounts' link counters and the outbox rows ([`record_created`]). How the transaction is run was chosen when the
//! pools opened ([`LinkPath`]): SQLite's batched writer commits many creations at once, PostgreSQL one each.

use crate::domain::{
    LongUrl, MatchMode, Micros, ShortCode, generate_short_code, prefix_upper_bound,
};
use crate::error::StoreError;
use crate::pool::{Db, LinkPath, new_id};
use crate::{blocklist, outbox};
use sqlx::{AnyConnection, Row};

/// Successful creations allowed per key in any rolling window (spec 8).
pub const RATE_LIMIT: u32 = 100;
/// The window: one hour, in microseconds.
const WINDOW_MICROS: i64 = 3_600 * 1_000_000;
/// Attempts at a generated code before giving up (each collides with odds ~n/36^7).
const GENERATE_ATTEMPTS: usize = 8;

/// What create-link needs, already validated.
#[derive(Debug, Clone)]
pub struct CreateLink {
    /// The authenticated key (the limit is per key).
    pub key_id: String,
    /// Its account.
    pub account_id: String,
    /// Destination.
    pub long_url: LongUrl,
    /// Requested alias, or None to generate one.
    pub short_code: Option<ShortCode>,
    /// Requested group (falls back to the default group when absent or not the caller's).
    pub group_id: Option<String>,
    /// Requested domain (falls back to a platform domain when absent or not usable).
    pub domain_id: Option<String>,
}

/// The rate-limit state after a request, for the `X-RateLimit-*` headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitState {
    /// Creations allowed per window.
    pub limit: u32,
    /// Creations left right now.
    pub remaining: u32,
    /// UNIX second at which the oldest counted creation leaves the window.
    pub reset_at: i64,
    /// Seconds until one more creation is allowed (0 when one is allowed now).
    pub retry_after: i64,
}

/// A created link (spec 2 "Link (as created)").
#[derive(Debug, Clone)]
pub struct CreatedLink {
    /// Link id.
    pub id: String,
    /// Stored (lowercase) alias.
    pub short_code: String,
    /// `https://<domain>/<short_code>`.
    pub short_url: String,
    /// The group it went to.
    pub group_id: String,
    /// The domain's hostname.
    pub domain: String,
    /// The domain's id.
    pub domain_id: String,
}

/// A listed link (spec 2 "Link (as listed)").
#[derive(Debug, Clone)]
pub struct ListedLink {
    /// Link id.
    pub id: String,
    /// Alias.
    pub short_code: String,
    /// Destination.
    pub long_url: String,
    /// Hostname it is served on.
    pub domain: String,
    /// Owning group.
    pub group_id: String,
    /// Redirects (true) or paused (false).
    pub is_active: bool,
    /// ISO 8601, microseconds, `Z`.
    pub created_at: String,
}

/// One page of links and the count of all matches.
#[derive(Debug, Clone)]
pub struct LinkPage {
    /// Links matching the query, ignoring pagination.
    pub total: i64,
    /// The page, newest first.
    pub results: Vec<ListedLink>,
}

fn round_up_seconds(micros: i64) -> i64 {
    (micros + 999_999).div_euclid(1_000_000)
}

/// Where a new link goes: resolved before the write transaction, on a read connection.
pub(crate) struct Target {
    group_id: String,
    domain_id: String,
    host: String,
}

/// Why an attempt must be retried rather than reported.
pub(crate) enum Retry {
    /// A generated code collided.
    CodeTaken,
    /// The group or domain was deleted between resolving it and inserting (foreign key).
    TargetGone,
}

impl Db {
    /// Creates a link under the key's rate limit. The limit check, the insert and the
    /// counters commit together or not at all; the group and domain are resolved on a read
    /// connection first, which keeps SQLite's single writer busy for as short as possible.
    pub async fn create_link(
        &self,
        req: &CreateLink,
    ) -> Result<(CreatedLink, RateLimitState), StoreError> {
        for _ in 0..GENERATE_ATTEMPTS {
            let target = self.resolve_target(req).await?;
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
    async fn resolve_target(&self, req: &CreateLink) -> Result<Target, StoreError> {
        // The destination's host and its parents, checked against the blocklist in the same
        // statement: $4, $5, …
        let parents = blocklist::parent_domains(req.long_url.host());
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
        let mut tx = self.write.begin().await?;
        sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
            .bind(now)
            .bind(&req.key_id)
            .execute(&mut *tx)
            .await?;
        let attempt = insert_link(&mut tx, req, target, code, now).await?;
        if let Ok((link, _)) = &attempt {
            record_created(&mut tx, &[(req.account_id.as_str(), link)]).await?;
            tx.commit().await?;
        }
        Ok(attempt)
    }

    /// A page of the account's links, newest first, with the total of all matches.
    pub async fn list_links(
        &self,
        account_id: &str,
        limit: u32,
        offset: u64,
        filter: Option<(&str, MatchMode)>,
    ) -> Result<LinkPage, StoreError> {
        // One read transaction, so the total and the page come from the same snapshot.
        let mut tx = self.read.begin().await?;
        let (condition, bound) = match filter {
            None => (String::new(), None),
            Some((_, MatchMode::Exact)) => (" AND long_url = $2".to_owned(), None),
            Some((prefix, MatchMode::StartsWith)) => match prefix_upper_bound(prefix) {
                Some(upper) => (
                    " AND long_url >= $2 AND long_url < $3".to_owned(),
                    Some(upper),
                ),
                None => (" AND long_url >= $2".to_owned(), None),
            },
        };
        let value = filter.map(|(v, _)| v);
        let total: i64 = if filter.is_none() {
            // The counter kept by create_link: one row instead of a count over the account.
            sqlx::query("SELECT link_count FROM accounts WHERE id = $1")
                .bind(account_id)
                .fetch_optional(&mut *tx)
                .await?
                .map(|r| r.try_get("link_count"))
                .transpose()?
                .unwrap_or(0)
        } else {
            let sql = format!("SELECT COUNT(*) AS n FROM links WHERE account_id = $1{condition}");
            let mut q = sqlx::query(&sql).bind(account_id).bind(value);
            if let Some(b) = &bound {
                q = q.bind(b.as_str());
            }
            q.fetch_one(&mut *tx).await?.try_get("n")?
        };
        // Page the narrow index first, then join the few rows that survive the offset.
        let (lim_i, off_i) = if bound.is_some() {
            (4, 5)
        } else if filter.is_some() {
            (3, 4)
        } else {
            (2, 3)
        };
        let sql = format!(
            "SELECT p.id, p.short_code, p.long_url, d.host, p.group_id, p.is_active, p.created_at \
             FROM (SELECT id, short_code, long_url, domain_id, group_id, is_active, created_at FROM links \
                   WHERE account_id = $1{condition} ORDER BY created_at DESC, id DESC LIMIT ${lim_i} OFFSET ${off_i}) p \
             JOIN domains d ON d.id = p.domain_id ORDER BY p.created_at DESC, p.id DESC"
        );
        let mut q = sqlx::query(&sql).bind(account_id);
        if let Some(v) = value {
            q = q.bind(v);
        }
        if let Some(b) = &bound {
            q = q.bind(b.as_str());
        }
        let rows = q
            .bind(i64::from(limit))
            .bind(i64::try_from(offset).unwrap_or(i64::MAX))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let results = rows
            .iter()
            .map(|r| {
                Ok(ListedLink {
                    id: r.try_get("id")?,
                    short_code: r.try_get("short_code")?,
                    long_url: r.try_get("long_url")?,
                    domain: r.try_get("host")?,
                    group_id: r.try_get("group_id")?,
                    is_active: r.try_get::<i64, _>("is_active")? != 0,
                    created_at: Micros(r.try_get("created_at")?).to_iso8601(),
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        Ok(LinkPage { total, results })
    }
}

/// What one attempt at a creation came to: the link, or a reason to try again.
pub(crate) type Attempt = Result<(CreatedLink, RateLimitState), Retry>;

/// The rate-limit check and the insert of one link inside the caller's transaction; the caller then writes the
/// counters and outbox rows of its transaction's creations ([`record_created`]) and commits. Creations with one
/// key must be serialised for the count to be exact: SQLite's `BEGIN IMMEDIATE` holds the database's write lock,
/// and on PostgreSQL the caller has written the key row. A failed insert changes nothing, so the transaction can
/// go on with other creations.
pub(crate) async fn insert_link(
    conn: &mut AnyConnection,
    req: &CreateLink,
    target: &Target,
    code: &ShortCode,
    now: i64,
) -> Result<Attempt, StoreError> {
    let limit = rate_window(conn, &req.key_id, now).await?;
    if limit.remaining == 0 {
        return Err(StoreError::RateLimited(limit));
    }
    let id = new_id();
    let inserted = sqlx::query(
        "INSERT INTO links (id, account_id, group_id, domain_id, short_code, long_url, is_active, created_at, \
         created_by_key) VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8)",
    )
    .bind(&id)
    .bind(&req.account_id)
    .bind(&target.group_id)
    .bind(&target.domain_id)
    .bind(code.as_str())
    .bind(req.long_url.as_str())
    .bind(now)
    .bind(&req.key_id)
    .execute(&mut *conn)
    .await;
    match inserted {
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            return Ok(Err(Retry::CodeTaken));
        }
        Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation() => {
            return Ok(Err(Retry::TargetGone));
        }
        r => r?,
    };
    let state = RateLimitState {
        remaining: limit.remaining - 1,
        // With nothing counted before, this creation is the oldest in the window.
        reset_at: if limit.remaining == RATE_LIMIT {
            round_up_seconds(now + WINDOW_MICROS)
        } else {
            limit.reset_at
        },
        ..limit
    };
    let link = CreatedLink {
        short_url: format!("https://{}/{}", target.host, code.as_str()),
        short_code: code.as_str().to_owned(),
        id,
        group_id: target.group_id.clone(),
        domain: target.host.clone(),
        domain_id: target.domain_id.clone(),
    };
    Ok(Ok((link, state)))
}

/// The accounts' link counters and the outbox rows for the links a transaction created, `(account id, link)`:
/// two statements however many links, so a batch of creations costs its writer two calls more, not two per link.
pub(crate) async fn record_created(
    conn: &mut AnyConnection,
    created: &[(&str, &CreatedLink)],
) -> Result<(), StoreError> {
    if created.is_empty() {
        return Ok(());
    }
    let mut per_account: Vec<(&str, i64)> = Vec::new();
    for (account, _) in created {
        match per_account.iter_mut().find(|(a, _)| a == account) {
            Some((_, n)) => *n += 1,
            None => per_account.push((account, 1)),
        }
    }
    // link_count + CASE id WHEN $1 THEN $2 WHEN $3 THEN $4 … END, for the ids $1, $3, …
    let arms: Vec<String> = (0..per_account.len())
        .map(|i| format!("WHEN ${} THEN ${}", 2 * i + 1, 2 * i + 2))
        .collect();
    let ids: Vec<String> = (0..per_account.len())
        .map(|i| format!("${}", 2 * i + 1))
        .collect();
    let sql = format!(
        "UPDATE accounts SET link_count = link_count + CASE id {} END WHERE id IN ({})",
        arms.join(" "),
        ids.join(", ")
    );
    let mut update = sqlx::query(&sql);
    for (account, n) in &per_account {
        update = update.bind(*account).bind(*n);
    }
    update.execute(&mut *conn).await?;
    let keys: Vec<String> = created
        .iter()
        .map(|(_, link)| kv_model::link_key(&link.domain, &link.short_code))
        .collect();
    outbox::enqueue(conn, &keys).await
}

/// What is left of the key's limit in the window ending now: the key's own links created
/// in the last hour. Also checks that the key still exists (it may have been revoked since
/// authentication), in the same statement.
async fn rate_window(
    conn: &mut AnyConnection,
    key_id: &str,
    now: i64,
) -> Result<RateLimitState, StoreError> {
    let row = sqlx::query(
        "SELECT (SELECT COUNT(*) FROM api_keys WHERE id = $1) AS key_exists, COUNT(*) AS n, MIN(created_at) AS oldest \
         FROM links WHERE created_by_key = $1 AND created_at > $2",
    )
    .bind(key_id)
    .bind(now - WINDOW_MICROS)
    .fetch_one(&mut *conn)
    .await?;
    if row.try_get::<i64, _>("key_exists")? == 0 {
        return Err(StoreError::KeyRevoked);
    }
    let used: i64 = row.try_get("n")?;
    let oldest: Option<i64> = row.try_get("oldest")?;
    let remaining = u32::try_from(i64::from(RATE_LIMIT) - used).unwrap_or(0);
    let frees_at = oldest.map(|t| t + WINDOW_MICROS).unwrap_or(now);
    Ok(RateLimitState {
        limit: RATE_LIMIT,
        remaining,
        reset_at: round_up_seconds(frees_at),
        retry_after: if remaining == 0 {
            round_up_seconds(frees_at - now).max(1)
        } else {
            0
        },
    })
}
