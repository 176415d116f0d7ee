//! Reading the activity log: the account's rows, newest first, for the API and the Activity page. Apart from
//! [`crate::audit`], which records rows inside the writers' transactions and so must not depend on the pools.

use crate::domain::Micros;
use crate::error::StoreError;
use crate::pool::Db;
use sqlx::Row;

/// One row of the log as the API and the Activity page show it.
#[derive(Debug, Clone)]
pub struct AuditEntry {
    /// The row's id (increasing).
    pub id: i64,
    /// When (microseconds since the epoch).
    pub at: Micros,
    /// `user`, `api_key` or `operator`.
    pub actor_type: String,
    /// The user's email when `actor_type` is `user`.
    pub actor_email: Option<String>,
    /// The action's name.
    pub action: String,
    /// What kind of thing was changed.
    pub target_type: String,
    /// Which one.
    pub target_id: String,
    /// What changed (a JSON object).
    pub details: serde_json::Value,
}

/// A page of the log, newest first, and how many rows the account has.
#[derive(Debug, Clone)]
pub struct AuditPage {
    /// All of the account's rows.
    pub total: i64,
    /// The page.
    pub results: Vec<AuditEntry>,
}

impl Db {
    /// The account's log, newest first (`at`, then insertion order), `limit` rows from `offset`.
    pub async fn audit_log(
        &self,
        account_id: &str,
        limit: i64,
        offset: i64,
    ) -> Result<AuditPage, StoreError> {
        // One read transaction, so the total and the page come from the same snapshot.
        let mut tx = self.read.begin().await?;
        let total: i64 = sqlx::query("SELECT COUNT(*) AS n FROM audit_log WHERE account_id = $1")
            .bind(account_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
        let rows = sqlx::query(
            "SELECT id, at, actor_type, actor_email, action, target_type, target_id, details FROM audit_log \
             WHERE account_id = $1 ORDER BY at DESC, id DESC LIMIT $2 OFFSET $3",
        )
        .bind(account_id)
        .bind(limit)
        .bind(offset)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let results = rows
            .iter()
            .map(|r| {
                let details: String = r.try_get("details")?;
                Ok(AuditEntry {
                    id: r.try_get("id")?,
                    at: Micros(r.try_get("at")?),
                    actor_type: r.try_get("actor_type")?,
                    actor_email: r.try_get("actor_email")?,
                    action: r.try_get("action")?,
                    target_type: r.try_get("target_type")?,
                    target_id: r.try_get("target_id")?,
                    details: serde_json::from_str(&details)
                        .map_err(|e| StoreError::Internal(format!("audit details: {e}")))?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(AuditPage { total, results })
    }
}
