//! API keys: one per account, generated and shown once, stored as a SHA-256 hash, looked up in constant time.

use crate::audit::{self, Action, Actor};
use crate::domain::{ApiKey, ApiKeyHash, Micros};
use crate::error::StoreError;
use crate::ids::new_id;
use crate::pool::{Db, require_account_in};
use sqlx::Row;

/// How stale the key's `last_used_at` may get.
const LAST_USED_RESOLUTION_MICROS: i64 = 60 * 1_000_000;

/// Who a valid key belongs to.
#[derive(Debug, Clone)]
pub struct AuthContext {
    /// The key's row id (the rate limit is per key).
    pub key_id: String,
    /// The account.
    pub account_id: String,
    /// The account's permission to use the management API.
    pub api_access: bool,
    /// Disabled by the operator: refused on every route.
    pub disabled: bool,
}

impl Db {
    /// Generates a key for the account, replacing (and so invalidating) any previous one.
    /// Returns the plaintext, which exists nowhere else from now on. The key and its `api_key.generated` row (by
    /// `actor`; target: the new key's row id; details: whether it replaced a key, never the key, its hash or its
    /// masked form) commit together.
    pub async fn generate_api_key(
        &self,
        account_id: &str,
        actor: &Actor,
    ) -> Result<ApiKey, StoreError> {
        let key = ApiKey::generate();
        let id = new_id();
        let mut tx = self.begin_write().await?;
        let replaced = remove_key_in(&mut tx, account_id).await?;
        sqlx::query(
            "INSERT INTO api_keys (id, account_id, key_hash, masked, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&id)
        .bind(account_id)
        .bind(key.hash().as_str())
        .bind(key.masked())
        .bind(Micros::now().0)
        .execute(&mut *tx)
        .await?;
        audit::record(
            &mut tx,
            account_id,
            actor,
            Action::ApiKeyGenerated,
            &id,
            &serde_json::json!({ "replaced": replaced.is_some() }),
        )
        .await?;
        tx.commit().await?;
        Ok(key)
    }

    /// Deletes the account's key; NotFound if the account does not exist. Revoking a key writes an
    /// `api_key.revoked` row (by `actor`; target: the key's row id) in the same transaction; an account without a
    /// key has nothing to revoke, and no row is written.
    pub async fn revoke_api_key(&self, account_id: &str, actor: &Actor) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        if let Some(key_id) = remove_key_in(&mut tx, account_id).await? {
            audit::record(
                &mut tx,
                account_id,
                actor,
                Action::ApiKeyRevoked,
                &key_id,
                &serde_json::json!({}),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The account's key as the dashboard shows it: masked form, creation and last use (ISO 8601), if it has one.
    pub async fn api_key_info(
        &self,
        account_id: &str,
    ) -> Result<Option<(String, String, Option<String>)>, StoreError> {
        let row = sqlx::query(
            "SELECT masked, created_at, last_used_at FROM api_keys WHERE account_id = $1",
        )
        .bind(account_id)
        .fetch_optional(&self.read)
        .await?;
        row.map(|r| {
            Ok((
                r.try_get("masked")?,
                Micros(r.try_get("created_at")?).to_iso8601(),
                r.try_get::<Option<i64>, _>("last_used_at")?
                    .map(|t| Micros(t).to_iso8601()),
            ))
        })
        .transpose()
        .map_err(|e: sqlx::Error| e.into())
    }

    /// The masked form of the account's key, if it has one (what a dashboard shows).
    pub async fn masked_api_key(&self, account_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT masked FROM api_keys WHERE account_id = $1")
            .bind(account_id)
            .fetch_optional(&self.read)
            .await?;
        Ok(row.map(|r| r.try_get("masked")).transpose()?)
    }

    /// Looks a key up by its hash. The index lookup is on a hash of 238 random bits, so it
    /// leaks nothing useful; the final equality is still constant-time.
    pub async fn authenticate(&self, key: &ApiKey) -> Result<Option<AuthContext>, StoreError> {
        let hash = key.hash();
        let row = sqlx::query(
            "SELECT k.id, k.key_hash, k.last_used_at, a.id AS account_id, a.api_access, a.disabled \
             FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = $1",
        )
        .bind(hash.as_str())
        .fetch_optional(&self.read)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let stored = ApiKeyHash::from_stored(row.try_get("key_hash")?);
        if !stored.matches(&hash) {
            return Ok(None);
        }
        let key_id: String = row.try_get("id")?;
        // "Last used" for the dashboard, to the minute: one write a minute per busy key, not one per request.
        let now = Micros::now().0;
        let last_used: Option<i64> = row.try_get("last_used_at")?;
        if last_used.is_none_or(|t| now - t >= LAST_USED_RESOLUTION_MICROS) {
            // Best effort: a busy database must not fail the request over a display field.
            let _ = sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
                .bind(now)
                .bind(&key_id)
                .execute(&self.write)
                .await;
        }
        Ok(Some(AuthContext {
            key_id,
            account_id: row.try_get("account_id")?,
            api_access: row.try_get::<i64, _>("api_access")? != 0,
            disabled: row.try_get::<i64, _>("disabled")? != 0,
        }))
    }
}

/// Removes the account's key (NotFound when the account does not exist) and, with it, the rate-limit rows of its
/// deleted links ([`crate::link_edits`]): they belong to that key, and a new key starts a new hourly window.
/// Returns the removed key's row id, if the account had a key.
async fn remove_key_in(
    conn: &mut sqlx::AnyConnection,
    account_id: &str,
) -> Result<Option<String>, StoreError> {
    require_account_in(&mut *conn, account_id).await?;
    sqlx::query(
        "DELETE FROM deleted_creations WHERE key_id IN (SELECT id FROM api_keys WHERE account_id = $1)",
    )
    .bind(account_id)
    .execute(&mut *conn)
    .await?;
    // At most one row (account_id is unique); fetch_all so the statement always runs to its end.
    let removed = sqlx::query("DELETE FROM api_keys WHERE account_id = $1 RETURNING id")
        .bind(account_id)
        .fetch_all(&mut *conn)
        .await?;
    Ok(removed.first().map(|r| r.try_get("id")).transpose()?)
}
