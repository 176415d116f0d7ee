//! The blocklist of destination domains: a listed domain blocks itself and its subdomains.

use crate::domain::{Hostname, LongUrl, Micros, parent_domains};
use crate::error::StoreError;
use crate::outbox;
use crate::pool::Db;
use crate::vouch;
use sqlx::{AnyConnection, Row};
use std::collections::HashSet;

impl Db {
    /// Adds a destination domain to the blocklist (idempotent). It blocks its subdomains too.
    ///
    /// Every link with a destination on the domain is put in the outbox in the same transaction: its record may
    /// carry the origin's word that none of its destinations is blocked (`kv_model::LinkRecord::vouched`), which
    /// this takes back. Blocking a blocked domain scans again: an error after the block committed (in the second
    /// scan, [`Db::rescan_after_block`]) leaves the domain blocked, and the call repeated completes it.
    pub async fn block_domain(&self, domain: &Hostname) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO blocked_domains (domain, created_at) VALUES ($1, $2) ON CONFLICT (domain) DO NOTHING",
        )
        .bind(domain.as_str())
        .bind(Micros::now().0)
        .execute(&mut *tx)
        .await?;
        let republished = vouch::links_to(&mut tx, domain).await?;
        // The whole list is one KV record; the publisher reads it when it drains.
        let mut keys = vec![kv_model::BLOCKLIST_KEY.to_owned()];
        keys.extend_from_slice(&republished);
        outbox::enqueue(&mut tx, &keys).await?;
        tx.commit().await?;
        // SQLite has one writer connection: no link can commit while the block's transaction runs, so its scan
        // saw every link committed before the block, and a link committed after it is published with the block
        // in sight. The window the second scan closes is PostgreSQL's.
        if self.write.options().get_max_connections() == 1 {
            return Ok(());
        }
        self.rescan_after_block(domain, &republished).await
    }

    /// The scan of [`Db::block_domain`] once more, after its commit. A link write checks its destinations against
    /// the blocklist on the read pool, outside its own transaction: a link that passed that check before the block
    /// committed but was itself committed while the block's transaction ran (PostgreSQL) is not seen by the scan
    /// inside it, and a publisher that read the blocklist before the block committed may have published that link
    /// vouched. This scan sees every such link, and its rows in the outbox make the publisher read the blocklist
    /// again. Links the first scan found are left out: their rows committed with the block, so the publisher
    /// reads them after it.
    async fn rescan_after_block(
        &self,
        domain: &Hostname,
        republished: &[String],
    ) -> Result<(), StoreError> {
        let found = {
            let mut conn = self.read.acquire().await?;
            vouch::links_to(&mut conn, domain).await?
        };
        let done: HashSet<&str> = republished.iter().map(String::as_str).collect();
        let missed: Vec<String> = found
            .into_iter()
            .filter(|key| !done.contains(key.as_str()))
            .collect();
        if missed.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        outbox::enqueue(&mut tx, &missed).await?;
        tx.commit().await?;
        Ok(())
    }

    /// True when `host` or one of its parent domains is blocked: one indexed probe per label.
    pub async fn is_host_blocked(&self, host: &str) -> Result<bool, StoreError> {
        let mut conn = self.read.acquire().await?;
        host_blocked_in(&mut conn, host).await
    }
}

/// [`Db::is_host_blocked`] inside the caller's transaction, so a write checks its URLs against the blocklist it
/// commits with.
pub(crate) async fn host_blocked_in(
    conn: &mut AnyConnection,
    host: &str,
) -> Result<bool, StoreError> {
    any_blocked_in(conn, &parent_domains(host)).await
}

/// True when one of `candidates` (domains, each a host or a parent domain of one) is blocked: one query.
pub(crate) async fn any_blocked_in(
    conn: &mut AnyConnection,
    candidates: &[&str],
) -> Result<bool, StoreError> {
    if candidates.is_empty() {
        return Ok(false);
    }
    let placeholders: Vec<String> = (1..=candidates.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "SELECT COUNT(*) AS n FROM blocked_domains WHERE domain IN ({})",
        placeholders.join(", ")
    );
    let mut query = sqlx::query(&sql);
    for candidate in candidates {
        query = query.bind(candidate);
    }
    let n: i64 = query.fetch_one(&mut *conn).await?.try_get("n")?;
    Ok(n > 0)
}

/// Refuses a fallback URL (a group's `access.fallback_url`, a domain's `fallback_url`) whose host or a parent
/// domain is blocked, as a destination would be: the edge sends visitors there, so a blocked site must not get
/// in through it. `field` names the value in the message.
pub(crate) async fn check_fallback_in(
    conn: &mut AnyConnection,
    field: &str,
    url: &LongUrl,
) -> Result<(), StoreError> {
    if host_blocked_in(conn, url.host()).await? {
        return Err(StoreError::Invalid(format!(
            "{field} points to a blocked domain"
        )));
    }
    Ok(())
}
