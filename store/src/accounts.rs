//! Accounts: created with their default group; looked up by email.

use crate::domain::{GroupSettings, Micros};
use crate::error::{Entity, StoreError, is_unique_violation};
use crate::groups;
use crate::ids::new_id;
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
        let now = Micros::now().0;
        let id = new_id();
        let group_id = new_id();
        let mut tx = self.write.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO accounts (id, email, api_access, default_group_id, link_count, created_at) \
             VALUES ($1, $2, $3, $4, 0, $5)",
        )
        .bind(&id)
        .bind(&email)
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
            &mut tx,
            &group_id,
            &id,
            DEFAULT_GROUP_NAME,
            &GroupSettings::default(),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(NewAccount {
            id,
            default_group_id: group_id,
        })
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

/// Trims and lowercases an email; refuses anything that is plainly not one.
fn normalise_email(raw: &str) -> Result<String, StoreError> {
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
