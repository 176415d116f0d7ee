//! Tags (issue 24): an account's tag names, which links carry them, the tag list with its counts, rename (merging
//! into an existing tag) and delete. Tags are not served at the edge: nothing here writes the outbox. Every change
//! writes its activity-log row, and a `link.updated` event for each link whose listed `tags` it changes, in its own
//! transaction.
//!
//! Changes of one account's tags are serialised (SQLite's single writer; on PostgreSQL an advisory lock per
//! account), so a rename or delete never races a link being tagged.

use crate::audit::{self, Action, Actor};
use crate::domain::{Tag, sort_tag_names};
use crate::error::{Entity, StoreError};
use crate::link_tags::lock_account_tags;
use crate::pool::Db;
use crate::webhooks::EventType;
use crate::webhooks::emit::emit_links;
use sqlx::{AnyConnection, Row};

/// A tag and how many of the account's links carry it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TagCount {
    /// The tag as the account spells it.
    pub name: String,
    /// The account's links with this tag.
    pub links: i64,
}

/// A tag of the account that some link carries: its id, name and links. A tag no link carries is unknown.
async fn find_tag(
    conn: &mut AnyConnection,
    account_id: &str,
    tag: &Tag,
) -> Result<(String, String, Vec<String>), StoreError> {
    let row = sqlx::query("SELECT id, name FROM tags WHERE account_id = $1 AND name_key = $2")
        .bind(account_id)
        .bind(tag.key())
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(StoreError::NotFound(Entity::Tag))?;
    let id: String = row.try_get("id")?;
    let links: Vec<String> =
        sqlx::query("SELECT link_id FROM link_tags WHERE tag_id = $1 ORDER BY link_id")
            .bind(&id)
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|r| r.try_get("link_id"))
            .collect::<Result<_, sqlx::Error>>()?;
    if links.is_empty() {
        return Err(StoreError::NotFound(Entity::Tag));
    }
    Ok((id, row.try_get("name")?, links))
}

/// `link.updated` for each of `links` (the account's), as they now are.
async fn emit_updated(
    conn: &mut AnyConnection,
    account_id: &str,
    links: &[String],
) -> Result<(), StoreError> {
    let pairs: Vec<(&str, &str)> = links.iter().map(|l| (account_id, l.as_str())).collect();
    emit_links(conn, EventType::LinkUpdated, &pairs).await
}

impl Db {
    /// The account's tags that some link carries, with their counts, sorted case-insensitively.
    pub async fn list_tags(&self, account_id: &str) -> Result<Vec<TagCount>, StoreError> {
        let rows = sqlx::query(
            "SELECT t.name, COUNT(*) AS n FROM tags t JOIN link_tags lt ON lt.tag_id = t.id \
             WHERE t.account_id = $1 GROUP BY t.id, t.name",
        )
        .bind(account_id)
        .fetch_all(&self.read)
        .await?;
        let mut tags = rows
            .iter()
            .map(|r| {
                Ok(TagCount {
                    name: r.try_get("name")?,
                    links: r.try_get("n")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let mut names: Vec<String> = tags.iter().map(|t| t.name.clone()).collect();
        sort_tag_names(&mut names);
        tags.sort_by_key(|t| names.iter().position(|n| *n == t.name));
        Ok(tags)
    }

    /// Renames the account's tag `from` to `to`. When the account has another tag spelled `to` (any case), the
    /// links of `from` get that tag instead (merged) and `from` goes; either way the tag is then spelled as `to`.
    /// One `tag.renamed` row; `link.updated` for each link that carried `from`.
    pub async fn rename_tag(
        &self,
        account_id: &str,
        from: &Tag,
        to: &Tag,
        actor: &Actor,
    ) -> Result<TagCount, StoreError> {
        let mut tx = self.begin_write().await?;
        lock_account_tags(&mut tx, account_id).await?;
        let (id, previous, links) = find_tag(&mut tx, account_id, from).await?;
        let target: Option<(String, String)> = if to.key() == from.key() {
            None
        } else {
            match sqlx::query("SELECT id, name FROM tags WHERE account_id = $1 AND name_key = $2")
                .bind(account_id)
                .bind(to.key())
                .fetch_optional(&mut *tx)
                .await?
            {
                Some(r) => Some((r.try_get("id")?, r.try_get("name")?)),
                None => None,
            }
        };
        // The links whose listed tags change: those of `from`, and those of the tag merged into when its
        // spelling changes.
        let mut links = links;
        if let Some((target, spelled)) = &target {
            if spelled != to.name() {
                for r in sqlx::query("SELECT link_id FROM link_tags WHERE tag_id = $1")
                    .bind(target)
                    .fetch_all(&mut *tx)
                    .await?
                {
                    let link: String = r.try_get("link_id")?;
                    if !links.contains(&link) {
                        links.push(link);
                    }
                }
            }
        }
        let survivor = match &target {
            Some((target, _)) => {
                sqlx::query(
                    "INSERT INTO link_tags (link_id, tag_id) SELECT link_id, $1 FROM link_tags WHERE tag_id = $2 \
                     ON CONFLICT (link_id, tag_id) DO NOTHING",
                )
                .bind(target)
                .bind(&id)
                .execute(&mut *tx)
                .await?;
                sqlx::query("DELETE FROM tags WHERE id = $1")
                    .bind(&id)
                    .execute(&mut *tx)
                    .await?;
                target.clone()
            }
            None => id.clone(),
        };
        sqlx::query("UPDATE tags SET name = $1, name_key = $2 WHERE id = $3")
            .bind(to.name())
            .bind(to.key())
            .bind(&survivor)
            .execute(&mut *tx)
            .await?;
        let count: i64 = sqlx::query("SELECT COUNT(*) AS n FROM link_tags WHERE tag_id = $1")
            .bind(&survivor)
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
        audit::record(
            &mut tx,
            account_id,
            actor,
            Action::TagRenamed,
            &survivor,
            &serde_json::json!({
                "name": to.name(),
                "previous_name": previous,
                "merged": target.is_some(),
                "links": count,
            }),
        )
        .await?;
        emit_updated(&mut tx, account_id, &links).await?;
        tx.commit().await?;
        Ok(TagCount {
            name: to.name().to_owned(),
            links: count,
        })
    }

    /// Deletes the account's tag `name` from every link that carries it. One `tag.deleted` row (with the count of
    /// links it left); `link.updated` for each of them.
    pub async fn delete_tag(
        &self,
        account_id: &str,
        name: &Tag,
        actor: &Actor,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        lock_account_tags(&mut tx, account_id).await?;
        let (id, spelled, links) = find_tag(&mut tx, account_id, name).await?;
        sqlx::query("DELETE FROM tags WHERE id = $1")
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        audit::record(
            &mut tx,
            account_id,
            actor,
            Action::TagDeleted,
            &id,
            &serde_json::json!({"name": spelled, "links": links.len()}),
        )
        .await?;
        emit_updated(&mut tx, account_id, &links).await?;
        tx.commit().await?;
        Ok(())
    }
}
