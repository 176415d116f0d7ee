//! Link groups: their names, settings and signing keys; deleting one moves its links to the default group.

use crate::audit::{self, Action, Actor};
use crate::blocklist::check_fallback_in;
use crate::domain::{GroupSettings, LongUrl, Micros};
use crate::error::{Entity, StoreError};
use crate::ids::new_id;
use crate::outbox;
use crate::pool::{Db, require_account_in};
use crate::webhooks::EventType;
use crate::webhooks::emit::{emit, group_data};
use sqlx::{AnyConnection, Row};

/// Longest group name we store.
const MAX_NAME_LEN: usize = 100;

/// Most groups an account may have (its default group included), when not configured: enough for any real use,
/// few enough that listing them, and republishing them to the edge, stays cheap.
pub const DEFAULT_MAX_GROUPS_PER_ACCOUNT: u32 = 1_000;

/// A group with its key and settings: what its owner (API, dashboard) and the operator see. The key is the
/// group's signing secret for dynamic links; lists of groups in the spec's API leave it out.
#[derive(Debug, Clone)]
pub struct GroupRow {
    /// Group id.
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// base64url (no padding) 32-byte key for dynamic links.
    pub key: String,
    /// The rules the edge applies to the group's links.
    pub settings: GroupSettings,
    /// The account's default group (cannot be deleted; new links go there unless told otherwise).
    pub is_default: bool,
}

/// The columns [`GroupRow::from_row`] reads, for `groups g JOIN accounts a ON a.id = g.account_id`.
const GROUP_COLUMNS: &str = "g.id, g.name, g.key, g.settings, a.default_group_id";

impl GroupRow {
    fn from_row(r: &sqlx::any::AnyRow) -> Result<Self, StoreError> {
        let id: String = r.try_get("id")?;
        let settings: String = r.try_get("settings")?;
        let settings = GroupSettings::parse(&settings).map_err(|e| {
            StoreError::Internal(format!("stored group settings do not parse: {e}"))
        })?;
        Ok(Self {
            is_default: r.try_get::<String, _>("default_group_id")? == id,
            name: r.try_get("name")?,
            key: r.try_get("key")?,
            settings,
            id,
        })
    }
}

/// Whose group an operation may touch: `Some(account)` for the account's own API and dashboard (another account's
/// group is not found), `None` for the operator (any group).
pub type Owner<'a> = Option<&'a str>;

/// The SQL condition for [`Owner`], with the account as `$2`.
fn owned_by(owner: Owner<'_>) -> &'static str {
    if owner.is_some() {
        " AND g.account_id = $2"
    } else {
        ""
    }
}

/// One group, inside a transaction or on a connection.
async fn group_in(
    conn: &mut AnyConnection,
    owner: Owner<'_>,
    id: &str,
) -> Result<GroupRow, StoreError> {
    let sql = format!(
        "SELECT {GROUP_COLUMNS} FROM groups g JOIN accounts a ON a.id = g.account_id WHERE g.id = $1{}",
        owned_by(owner)
    );
    let mut q = sqlx::query(&sql).bind(id);
    if let Some(account) = owner {
        q = q.bind(account);
    }
    let row = q
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(StoreError::NotFound(Entity::Group))?;
    GroupRow::from_row(&row)
}

/// The account a group belongs to: the owner's when known, else looked up (the operator acts on any group).
async fn account_of(
    conn: &mut AnyConnection,
    owner: Owner<'_>,
    id: &str,
) -> Result<String, StoreError> {
    if let Some(account) = owner {
        return Ok(account.to_owned());
    }
    let row = sqlx::query("SELECT account_id FROM groups WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(StoreError::NotFound(Entity::Group))?;
    Ok(row.try_get("account_id")?)
}

/// The sections of the settings (`access`, `monetization`, `analytics`) that differ between `old` and `new`, with
/// their new values (`null`: removed): the activity log's account of a settings change.
fn changed_settings(
    old: &GroupSettings,
    new: &GroupSettings,
) -> serde_json::Map<String, serde_json::Value> {
    let as_map = |s: &GroupSettings| match serde_json::to_value(s) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let (old, new) = (as_map(old), as_map(new));
    let mut sections: Vec<&String> = old.keys().chain(new.keys()).collect();
    sections.sort();
    sections.dedup();
    sections
        .into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .map(|k| {
            (
                k.clone(),
                new.get(k).cloned().unwrap_or(serde_json::Value::Null),
            )
        })
        .collect()
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
        settings: settings.clone(),
        is_default: false,
    })
}

/// Checks what [`GroupSettings::parse`] cannot, because it needs the database: the fallback URL's host is not
/// on the blocklist (as a link's destination).
async fn check_settings_in(
    conn: &mut AnyConnection,
    settings: &GroupSettings,
) -> Result<(), StoreError> {
    if let Some(raw) = &settings.access.fallback_url {
        let url = LongUrl::parse(raw).map_err(|e| {
            StoreError::Invalid(format!("invalid group settings: access.fallback_url: {e}"))
        })?;
        check_fallback_in(conn, "invalid group settings: access.fallback_url", &url).await?;
    }
    Ok(())
}

/// Alphabetical by name, case-insensitively, then exact name and id so the order is total.
/// Done here rather than in SQL so both engines agree whatever their collation.
fn sort_by_name<T>(items: &mut [T], key: impl Fn(&T) -> (&String, &String)) {
    items.sort_by(|a, b| {
        let ((an, ai), (bn, bi)) = (key(a), key(b));
        (an.to_lowercase(), an, ai).cmp(&(bn.to_lowercase(), bn, bi))
    });
}

/// A group name, trimmed: 1 to 100 characters.
fn check_name(name: &str) -> Result<&str, StoreError> {
    // The bound is on the name as sent (what the OpenAPI document's `maxLength` says), the emptiness on what is
    // left after trimming: 101 characters of which the first is whitespace are over the limit, not 100.
    let sent = name.chars().count();
    let name = name.trim();
    if name.is_empty() || sent > MAX_NAME_LEN {
        return Err(StoreError::Invalid(format!(
            "a group name must be 1 to {MAX_NAME_LEN} characters"
        )));
    }
    Ok(name)
}

impl Db {
    /// Creates a group for an account, within [`DEFAULT_MAX_GROUPS_PER_ACCOUNT`] (the operator's and fixtures'
    /// path; the API and the dashboard pass the configured cap to [`Db::create_group_capped`]).
    pub async fn create_group(
        &self,
        account_id: &str,
        name: &str,
        settings: &GroupSettings,
        actor: &Actor,
    ) -> Result<GroupRow, StoreError> {
        self.create_group_capped(
            account_id,
            name,
            settings,
            DEFAULT_MAX_GROUPS_PER_ACCOUNT,
            actor,
        )
        .await
    }

    /// Creates a group for an account that has fewer than `max_groups` (its default group included); at the cap
    /// it is [`StoreError::Invalid`]. Exact under concurrency: the account's group creations are serialised
    /// (SQLite's write lock, PostgreSQL's advisory lock on the account), so parallel creations never count the
    /// same free place twice. A fallback URL on the blocklist is refused. The group and its `group.created` row
    /// (by `actor`, with its name and settings, never its key) commit together.
    pub async fn create_group_capped(
        &self,
        account_id: &str,
        name: &str,
        settings: &GroupSettings,
        max_groups: u32,
        actor: &Actor,
    ) -> Result<GroupRow, StoreError> {
        let name = check_name(name)?;
        let mut tx = self.begin_write().await?;
        self.serialise_on(&mut tx, &format!("groups:{account_id}"))
            .await?;
        require_account_in(&mut tx, account_id).await?;
        check_settings_in(&mut tx, settings).await?;
        let count: i64 = sqlx::query("SELECT COUNT(*) AS n FROM groups WHERE account_id = $1")
            .bind(account_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
        if count >= i64::from(max_groups) {
            return Err(StoreError::Invalid(format!(
                "an account has at most {max_groups} groups: delete one before creating another"
            )));
        }
        let row = insert_group(
            &mut tx,
            &new_id(),
            account_id,
            name,
            settings,
            Micros::now().0,
        )
        .await?;
        audit::record(
            &mut tx,
            account_id,
            actor,
            Action::GroupCreated,
            &row.id,
            &serde_json::json!({ "name": row.name, "settings": row.settings }),
        )
        .await?;
        emit(
            &mut tx,
            account_id,
            EventType::GroupCreated,
            &row.id,
            group_data(&row),
        )
        .await?;
        tx.commit().await?;
        Ok(row)
    }

    /// One group with its key and settings.
    pub async fn group(&self, owner: Owner<'_>, id: &str) -> Result<GroupRow, StoreError> {
        let mut conn = self.read.acquire().await?;
        group_in(&mut conn, owner, id).await
    }

    /// Renames a group and/or replaces its settings; the edge gets the new settings through the outbox. The
    /// change and its `group.updated` row (by `actor`: the group's name, `previous_name` when it was renamed, and
    /// under `settings` the sections that changed with their new values; never the key) commit together. With
    /// neither a name nor settings nothing changes and no row is written.
    pub async fn update_group(
        &self,
        owner: Owner<'_>,
        id: &str,
        name: Option<&str>,
        settings: Option<&GroupSettings>,
        actor: &Actor,
    ) -> Result<GroupRow, StoreError> {
        let name = name.map(check_name).transpose()?;
        let mut tx = self.begin_write().await?;
        // Also the ownership check: another account's group is not found.
        let before = group_in(&mut tx, owner, id).await?;
        if let Some(name) = name {
            sqlx::query("UPDATE groups SET name = $1 WHERE id = $2")
                .bind(name)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(settings) = settings {
            check_settings_in(&mut tx, settings).await?;
            sqlx::query("UPDATE groups SET settings = $1 WHERE id = $2")
                .bind(settings.to_json())
                .bind(id)
                .execute(&mut *tx)
                .await?;
            let mut keys = vec![kv_model::group_key(id)];
            // Each link's record carries a copy of the settings (`kv_model::LinkRecord::group_settings`).
            if *settings != before.settings {
                keys.extend(crate::publishing::group_link_keys(&mut tx, id).await?);
            }
            outbox::enqueue(&mut tx, &keys).await?;
        }
        let row = group_in(&mut tx, owner, id).await?;
        if name.is_some() || settings.is_some() {
            let mut details = serde_json::Map::new();
            details.insert("name".to_owned(), row.name.clone().into());
            if row.name != before.name {
                details.insert("previous_name".to_owned(), before.name.clone().into());
            }
            let changed = changed_settings(&before.settings, &row.settings);
            if !changed.is_empty() {
                details.insert("settings".to_owned(), changed.into());
            }
            let account = account_of(&mut tx, owner, id).await?;
            audit::record(
                &mut tx,
                &account,
                actor,
                Action::GroupUpdated,
                id,
                &details.into(),
            )
            .await?;
            emit(
                &mut tx,
                &account,
                EventType::GroupUpdated,
                id,
                group_data(&row),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(row)
    }

    /// Replaces a group's signing key: dynamic links made with the old key stop working at the edge once the
    /// outbox has carried the new one. Returns the group with its new key (shown to the caller). The rotation and
    /// its `group.key_rotated` row (by `actor`, with the group's name; never a key) commit together.
    pub async fn rotate_group_key(
        &self,
        owner: Owner<'_>,
        id: &str,
        actor: &Actor,
    ) -> Result<GroupRow, StoreError> {
        let key = new_group_key()?;
        let mut tx = self.begin_write().await?;
        group_in(&mut tx, owner, id).await?;
        sqlx::query("UPDATE groups SET key = $1 WHERE id = $2")
            .bind(&key)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        outbox::enqueue(&mut tx, &[kv_model::group_key(id)]).await?;
        let row = group_in(&mut tx, owner, id).await?;
        let account = account_of(&mut tx, owner, id).await?;
        audit::record(
            &mut tx,
            &account,
            actor,
            Action::GroupKeyRotated,
            id,
            &serde_json::json!({ "name": row.name }),
        )
        .await?;
        tx.commit().await?;
        Ok(row)
    }

    /// Deletes a group. Its links move to the account's default group, so no link is lost;
    /// the default group itself cannot be deleted. The key dies with the group: tokens made
    /// with it stop working (spec 2). The deletion and its `group.deleted` row (by `actor`, with the group's name
    /// and how many links moved) commit together.
    pub async fn delete_group(
        &self,
        owner: Owner<'_>,
        id: &str,
        actor: &Actor,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        // The group's row is locked first (a no-op update; SQLite's write lock already serialises): of concurrent
        // deletes one goes on and the others wait for it, then find the row gone and answer 404. Reading first
        // let them all read the group and fail later, on PostgreSQL, in the middle (a 500) or with a second 204.
        let lock = sqlx::query("UPDATE groups SET name = name WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if lock.rows_affected() == 0 {
            return Err(StoreError::NotFound(Entity::Group));
        }
        let group = group_in(&mut tx, owner, id).await?;
        if group.is_default {
            return Err(StoreError::DefaultGroup);
        }
        let row = sqlx::query(
            "SELECT a.id AS account_id, a.default_group_id FROM groups g JOIN accounts a ON a.id = g.account_id \
             WHERE g.id = $1",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::NotFound(Entity::Group))?;
        let default_group: String = row.try_get("default_group_id")?;
        let account: String = row.try_get("account_id")?;
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
        let deleted = sqlx::query("DELETE FROM groups WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        // A concurrent delete of the same group committed first (PostgreSQL, read committed: both read it):
        // this one deleted nothing, so it is a 404, not a second 204.
        if deleted.rows_affected() == 0 {
            return Err(StoreError::NotFound(Entity::Group));
        }
        outbox::enqueue(&mut tx, &keys).await?;
        audit::record(
            &mut tx,
            &account,
            actor,
            Action::GroupDeleted,
            id,
            &serde_json::json!({ "name": group.name, "links_moved": moved.len() }),
        )
        .await?;
        // Its last state, and where its links went (they get no link.updated events of their own).
        let mut data = group_data(&group);
        data["links_moved"] = moved.len().into();
        data["links_moved_to"] = default_group.as_str().into();
        emit(&mut tx, &account, EventType::GroupDeleted, id, data).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The account's groups with their keys, in the order of [`Db::list_groups`].
    pub async fn group_rows(&self, account_id: &str) -> Result<Vec<GroupRow>, StoreError> {
        self.require_account(account_id).await?;
        let sql = format!(
            "SELECT {GROUP_COLUMNS} FROM groups g JOIN accounts a ON a.id = g.account_id WHERE g.account_id = $1"
        );
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .fetch_all(&self.read)
            .await?;
        let mut groups = rows
            .iter()
            .map(GroupRow::from_row)
            .collect::<Result<Vec<_>, StoreError>>()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_bounded_as_sent_and_trimmed() {
        assert_eq!(check_name("  Promo  ").unwrap(), "Promo");
        assert!(check_name("   ").is_err());
        assert!(check_name(&"a".repeat(MAX_NAME_LEN)).is_ok());
        assert!(check_name(&"a".repeat(MAX_NAME_LEN + 1)).is_err());
        // The case schemathesis found: a leading vertical tab makes 101 as sent, 100 once trimmed.
        assert!(check_name(&format!("\u{b}{}", "a".repeat(MAX_NAME_LEN))).is_err());
    }
}
