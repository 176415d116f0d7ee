//! The blocklist of destination domains: a listed domain blocks itself and its subdomains.

use crate::domain::{Hostname, LongUrl, Micros, parent_domains};
use crate::error::StoreError;
use crate::outbox;
use crate::pool::Db;
use sqlx::{AnyConnection, Row};

impl Db {
    /// Adds a destination domain to the blocklist (idempotent). It blocks its subdomains too.
    pub async fn block_domain(&self, domain: &Hostname) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO blocked_domains (domain, created_at) VALUES ($1, $2) ON CONFLICT (domain) DO NOTHING",
        )
        .bind(domain.as_str())
        .bind(Micros::now().0)
        .execute(&mut *tx)
        .await?;
        // The whole list is one KV record; the publisher reads it when it drains.
        outbox::enqueue(&mut tx, &[kv_model::BLOCKLIST_KEY.to_owned()]).await?;
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
    let candidates = parent_domains(host);
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
