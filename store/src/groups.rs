//! Link groups: their names, settings and signing keys; deleting one moves its links to the default group.

use crate::domain::{GroupSettings, Micros};
use crate::error::{Entity, StoreError};
use crate::ids::new_id;
use crate::outbox;
use crate::pool::{Db, require_account_in};
use sqlx::{AnyConnection, Row};

/// Longest group name we store.
const MAX_NAME_LEN: usize = 100;

/// A group as the operator CLI shows it (the key included: it is the group's signing secret,
/// which the dashboard shows its owner so they can build dynamic links).
#[derive(Debug, Clone)]
pub struct GroupRow {
    /// Group id.
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// base64url (no padding) 32-byte key for dynamic links.
    pub key: String,
}

/// A fresh 32-byte group key, base64url without padding (spec 2).
fn new_group_key() -> Result<String, StoreError> {
    let key = shared_crypto::GroupKey::generate()
        .map_err(|e| StoreError::Internal(format!("no randomness for a group key: {e}")))?;
    Ok(key.to_base64url())
}

/// Inserts a group and queues its KV record, inside the caller's transaction.
pub(crate) async fn insert_group(
    tx: &mut AnyConnection,
    id: &str,
    account_id: &str,
    name: &str,
    settings: &GroupSettings,
    now: i64,
) -> Result<GroupRow, StoreError> {
    let key = new_group_key()?;
    sqlx::query(
        "INSERT INTO groups (id, account_id, name, key, settings, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(id)
    .bind(account_id)
    .bind(name)
    .bind(&key)
    .bind(settings.to_json())
    .bind(now)
    .execute(&mut *tx)
    .await?;
    // The edge learns of the group (and its key) through the outbox, in this transaction.
    outbox::enqueue(tx, &[kv_model::group_key(id)]).await?;
    Ok(GroupRow {
        id: id.to_owned(),
        name: name.to_owned(),
        key,
    })
}

/// Alphabetical by name, case-insensitively, then exact name and id so the order is total.
/// Done here rather than in SQL so both engines agree whatever their collation.
fn sort_by_name<T>(items: &mut [T], key: impl Fn(&T) -> (&String, &String)) {
    items.sort_by(|a, b| {
        let ((an, ai), (bn, bi)) = (key(a), key(b));
        (an.to_lowercase(), an, ai).cmp(&(bn.to_lowercase(), bn, bi))
    });
}

fn check_name(name: &str) -> Result<&str, StoreError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_LEN {
        return Err(StoreError::Invalid(format!(
            "a group name must be 1 to {MAX_NAME_LEN} characters"
        )));
    }
    Ok(name)
}

impl Db {
    /// Creates a group for an account.
    pub async fn create_group(
        &self,
        account_id: &str,
        name: &str,
        settings: &GroupSettings,
    ) -> Result<GroupRow, StoreError> {
        let name = check_name(name)?;
        let mut tx = self.write.begin().await?;
        require_account_in(&mut tx, account_id).await?;
        let row = insert_group(
            &mut tx,
            &new_id(),
            account_id,
            name,
            settings,
            Micros::now().0,
        )
        .await?;
        tx.commit().await?;
        Ok(row)
    }

    /// Replaces a group's settings.
    pub async fn update_group_settings(
        &self,
        id: &str,
        settings: &GroupSettings,
    ) -> Result<GroupRow, StoreError> {
        let mut tx = self.write.begin().await?;
        let updated = sqlx::query("UPDATE groups SET settings = $1 WHERE id = $2")
            .bind(settings.to_json())
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound(Entity::Group));
        }
        let row = sqlx::query("SELECT id, name, key FROM groups WHERE id = $1")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        outbox::enqueue(&mut tx, &[kv_model::group_key(id)]).await?;
        tx.commit().await?;
        Ok(GroupRow {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            key: row.try_get("key")?,
        })
    }

    /// Deletes a group. Its links move to the account's default group, so no link is lost;
    /// the default group itself cannot be deleted. The key dies with the group: tokens made
    /// with it stop working (spec 2).
    pub async fn delete_group(&self, id: &str) -> Result<(), StoreError> {
        let mut tx = self.write.begin().await?;
        let row = sqlx::query(
            "SELECT a.default_group_id FROM groups g JOIN accounts a ON a.id = g.account_id WHERE g.id = $1",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::NotFound(Entity::Group))?;
        let default_group: String = row.try_get("default_group_id")?;
        if default_group == id {
            return Err(StoreError::DefaultGroup);
        }
        // The moved links change group at the edge too.
        let moved = sqlx::query(
            "SELECT d.host, l.short_code FROM links l JOIN domains d ON d.id = l.domain_id WHERE l.group_id = $1",
        )
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        let mut keys = vec![kv_model::group_key(id)];
        for r in &moved {
            keys.push(kv_model::link_key(
                &r.try_get::<String, _>("host")?,
                &r.try_get::<String, _>("short_code")?,
            ));
        }
        sqlx::query("UPDATE links SET group_id = $1 WHERE group_id = $2")
            .bind(&default_group)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM groups WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        outbox::enqueue(&mut tx, &keys).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The account's groups with their keys, in the order of [`Db::list_groups`].
    pub async fn group_rows(&self, account_id: &str) -> Result<Vec<GroupRow>, StoreError> {
        self.require_account(account_id).await?;
        let rows = sqlx::query("SELECT id, name, key FROM groups WHERE account_id = $1")
            .bind(account_id)
            .fetch_all(&self.read)
            .await?;
        let mut groups = rows
            .iter()
            .map(|r| {
                Ok(GroupRow {
                    id: r.try_get("id")?,
                    name: r.try_get("name")?,
                    key: r.try_get("key")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        sort_by_name(&mut groups, |g| (&g.name, &g.id));
        Ok(groups)
    }

    /// A group's signing key (base64url), if the group exists.
    pub async fn group_key(&self, id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT key FROM groups WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.read)
            .await?;
        Ok(row.map(|r| r.try_get("key")).transpose()?)
    }

    /// The account's groups (id, name), sorted alphabetically by name, case-insensitively.
    pub async fn list_groups(&self, account_id: &str) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query("SELECT id, name FROM groups WHERE account_id = $1")
            .bind(account_id)
            .fetch_all(&self.read)
            .await?;
        let mut groups = rows
            .iter()
            .map(|r| Ok((r.try_get("id")?, r.try_get("name")?)))
            .collect::<Result<Vec<(String, String)>, sqlx::Error>>()?;
        sort_by_name(&mut groups, |(id, name)| (name, id));
        Ok(groups)
    }
}
