//! Links: creation under the key's rate limit (spec 4.1, 8) and the account's list (spec 4.2).
//!
//! Where a new link goes is resolved here; the transaction's work is [`crate::creation`]'s. How the transaction is
//! run was chosen when the pools opened ([`LinkPath`]): SQLite's batched writer commits many creations at once,
//! PostgreSQL one each.

use crate::blocklist;
use crate::creation::{
    Attempt, CreateLink, CreatedLink, Creator, Retry, Target, insert_link, record_created,
};
use crate::domain::{MatchMode, Micros, ShortCode, generate_short_code, prefix_upper_bound};
use crate::error::{Entity, StoreError};
use crate::listed::{LISTED_COLUMNS, ListedLink};
use crate::pool::{Db, LinkPath};
use crate::rate_limit::RateLimitState;
use sqlx::Row;

/// Attempts at a generated code before giving up (each collides with odds ~n/36^7).
const GENERATE_ATTEMPTS: usize = 8;

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
        let mut tx = self.begin_write().await?;
        match &req.creator {
            Creator::ApiKey(key_id) => {
                sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
                    .bind(now)
                    .bind(key_id)
                    .execute(&mut *tx)
                    .await?;
            }
            // The dashboard's creations serialise on the account row instead.
            Creator::Dashboard => {
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
            "SELECT {LISTED_COLUMNS} \
             FROM (SELECT id, short_code, long_url, domain_id, group_id, is_active, created_at, expires_at, \
                          forward_query FROM links \
                   WHERE account_id = $1{condition} ORDER BY created_at DESC, id DESC LIMIT ${lim_i} OFFSET ${off_i}) l \
             JOIN domains d ON d.id = l.domain_id ORDER BY l.created_at DESC, l.id DESC"
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
