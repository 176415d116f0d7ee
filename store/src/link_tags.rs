//! A link's tags, set in the transaction that creates or edits the link (the writers' side of [`crate::tags`],
//! apart from it so the writers do not depend on the pools).

use crate::domain::{Micros, Tag};
use crate::error::StoreError;
use crate::ids::new_id;
use crate::sql_chunks::MultiRow;
use crate::webhooks::emit::is_postgres;
use sqlx::{AnyConnection, Row};
use std::collections::{HashMap, HashSet};

/// Serialises the caller's transaction with every other change of the account's tags (PostgreSQL; SQLite's
/// write transaction already holds the one write lock).
pub(crate) async fn lock_account_tags(
    conn: &mut AnyConnection,
    account_id: &str,
) -> Result<(), StoreError> {
    if is_postgres(conn) {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(format!("tags:{account_id}"))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Replaces the tags of link `link_id` (of `account_id`) with `tags`, in the caller's transaction: a tag the
/// account already has keeps its spelling, a new one is created as given.
pub(crate) async fn set_link_tags(
    conn: &mut AnyConnection,
    account_id: &str,
    link_id: &str,
    tags: &[Tag],
) -> Result<(), StoreError> {
    lock_account_tags(conn, account_id).await?;
    sqlx::query("DELETE FROM link_tags WHERE link_id = $1")
        .bind(link_id)
        .execute(&mut *conn)
        .await?;
    // At most 10 tags (domain::MAX_TAGS): one statement each for the tags and the link's rows.
    tag_new_links(conn, MultiRow::of(conn), account_id, &[(link_id, tags)]).await?;
    Ok(())
}

/// Puts their tags on links that carry none (created, or their tags removed, in the caller's transaction), all of
/// one account: one
/// upsert of the tags they name and one insert of their rows (chunked), however many links. A bulk of new links
/// written this way costs its writer two statements, not three per link.
pub(crate) async fn tag_new_links(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    account_id: &str,
    links: &[(&str, &[Tag])],
) -> Result<(), StoreError> {
    // Each tag once, in the first spelling the links use.
    let mut named: Vec<&Tag> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for tag in links.iter().flat_map(|(_, tags)| tags.iter()) {
        if seen.insert(tag.key()) {
            named.push(tag);
        }
    }
    if named.is_empty() {
        return Ok(());
    }
    lock_account_tags(conn, account_id).await?;
    let now = Micros::now().0;
    let mut ids: HashMap<String, String> = HashMap::with_capacity(named.len());
    for (chunk, values) in multi_row.split(&named, 5) {
        let sql = format!(
            "INSERT INTO tags (id, account_id, name, name_key, created_at) VALUES {values} \
             ON CONFLICT (account_id, name_key) DO UPDATE SET name = tags.name RETURNING id, name_key"
        );
        let mut q = sqlx::query(&sql);
        for tag in chunk {
            q = q
                .bind(new_id())
                .bind(account_id)
                .bind(tag.name())
                .bind(tag.key())
                .bind(now);
        }
        for row in q.fetch_all(&mut *conn).await? {
            ids.insert(row.try_get("name_key")?, row.try_get("id")?);
        }
    }
    let mut rows: Vec<(&str, &str)> = Vec::new();
    for (link, tags) in links {
        for tag in *tags {
            let id = ids.get(tag.key()).ok_or_else(|| {
                StoreError::Internal(format!("tag {:?} not returned by its upsert", tag.key()))
            })?;
            rows.push((link, id.as_str()));
        }
    }
    for (chunk, values) in multi_row.split(&rows, 2) {
        let sql = format!("INSERT INTO link_tags (link_id, tag_id) VALUES {values}");
        let mut q = sqlx::query(&sql);
        for (link, tag) in chunk {
            q = q.bind(*link).bind(*tag);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}
