//! Accounts: created with their default group; looked up by email.

use crate::domain::{GroupSettings, Micros};
use crate::error::{Entity, StoreError, is_unique_violation};
use crate::groups;
use crate::ids::new_id;
use crate::outbox;
use crate::pool::Db;
use sqlx::Row;

/// The result of creating an account.
#[derive(Debug, Clone)]
pub struct NewAccount {
    /// Account id.
    pub id: String,
    /// The group created with it.
    pub default_group_id: String,
}

/// An account as the operator lists it.
#[derive(Debug, Clone)]
pub struct AccountRow {
    /// Account id.
    pub id: String,
    /// Login email (lowercase).
    pub email: String,
    /// May use the management API.
    pub api_access: bool,
    /// Disabled by the operator.
    pub disabled: bool,
    /// ISO 8601, microseconds, `Z`.
    pub created_at: String,
}

/// Name of the group every account gets at creation.
pub(crate) const DEFAULT_GROUP_NAME: &str = "Default";

impl Db {
    /// Creates an account and its default group in one transaction.
    pub async fn create_account(
        &self,
        email: &str,
        api_access: bool,
    ) -> Result<NewAccount, StoreError> {
        let email = normalise_email(email)?;
        let mut tx = self.begin_write().await?;
        let account = insert_account(&mut tx, &email, api_access, Micros::now().0).await?;
        tx.commit().await?;
        Ok(account)
    }

    /// The account with this email.
    pub async fn find_account(&self, email: &str) -> Result<NewAccount, StoreError> {
        let email = normalise_email(email)?;
        let row = sqlx::query("SELECT id, default_group_id FROM accounts WHERE email = $1")
            .bind(&email)
            .fetch_optional(&self.read)
            .await?
            .ok_or(StoreError::NotFound(Entity::Account))?;
        Ok(NewAccount {
            id: row.try_get("id")?,
            default_group_id: row.try_get("default_group_id")?,
        })
    }
}

impl Db {
    /// Every account, oldest first.
    pub async fn list_accounts(&self) -> Result<Vec<AccountRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, email, api_access, disabled, created_at FROM accounts ORDER BY created_at, id",
        )
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(AccountRow {
                    id: r.try_get("id")?,
                    email: r.try_get("email")?,
                    api_access: r.try_get::<i64, _>("api_access")? != 0,
                    disabled: r.try_get::<i64, _>("disabled")? != 0,
                    created_at: Micros(r.try_get("created_at")?).to_iso8601(),
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    /// Disables (or re-enables) an account: its key is refused on every route, and its links stop at the edge
    /// (each link's KV record is republished as inactive, in this transaction's outbox rows).
    pub async fn set_account_disabled(&self, id: &str, disabled: bool) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        let updated = sqlx::query("UPDATE accounts SET disabled = $1 WHERE id = $2")
            .bind(i64::from(disabled))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound(Entity::Account));
        }
        let links = sqlx::query(
            "SELECT d.host, l.short_code FROM links l JOIN domains d ON d.id = l.domain_id WHERE l.account_id = $1",
        )
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        let keys = links
            .iter()
            .map(|r| {
                Ok(kv_model::link_key(
                    &r.try_get::<String, _>("host")?,
                    &r.try_get::<String, _>("short_code")?,
                ))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        outbox::enqueue(&mut tx, &keys).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Inserts an account of `email` (already normalised; also its name until an owner renames it) and its default
/// group on `tx`; an account of that email is a conflict. Used by [`Db::create_account`] and by sign-up, which
/// makes the account's owner in the same transaction.
pub(crate) async fn insert_account(
    tx: &mut sqlx::AnyConnection,
    email: &str,
    api_access: bool,
    now: i64,
) -> Result<NewAccount, StoreError> {
    let id = new_id();
    let group_id = new_id();
    let inserted = sqlx::query(
        "INSERT INTO accounts (id, email, name, api_access, default_group_id, link_count, created_at) \
         VALUES ($1, $2, $2, $3, $4, 0, $5)",
    )
    .bind(&id)
    .bind(email)
    .bind(i64::from(api_access))
    .bind(&group_id)
    .bind(now)
    .execute(&mut *tx)
    .await;
    match inserted {
        Err(e) if is_unique_violation(&e) => {
            return Err(StoreError::Conflict(format!(
                "an account with email {email} exists"
            )));
        }
        r => r?,
    };
    groups::insert_group(
        &mut *tx,
        &group_id,
        &id,
        DEFAULT_GROUP_NAME,
        &GroupSettings::default(),
        now,
    )
    .await?;
    Ok(NewAccount {
        id,
        default_group_id: group_id,
    })
}

/// Trims and lowercases an email; refuses anything that is plainly not one.
pub(crate) fn normalise_email(raw: &str) -> Result<String, StoreError> {
    let email = raw.trim().to_lowercase();
    let valid = email.len() <= 254
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
        && matches!(email.split_once('@'), Some((l, d)) if !l.is_empty() && d.contains('.') && !d.contains('@'));
    if valid {
        Ok(email)
    } else {
        Err(StoreError::Invalid(format!(
            "{raw:?} is not a valid email address"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails() {
        assert_eq!(normalise_email(" A@B.com ").unwrap(), "a@b.com");
        for bad in ["", "a", "a@b", "@b.com", "a@b@c.com", "a b@c.com"] {
            assert!(normalise_email(bad).is_err(), "{bad}");
        }
    }
}
