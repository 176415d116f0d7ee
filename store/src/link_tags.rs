//! A link's tags, set in the transaction that creates or edits the link (the writers' side of [`crate::tags`],
//! apart from it so the writers do not depend on the pools).

use crate::domain::{Micros, Tag};
use crate::error::StoreError;
use crate::ids::new_id;
use crate::webhooks::emit::is_postgres;
use sqlx::{AnyConnection, Row};

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
    if tags.is_empty() {
        return Ok(());
    }
    // At most 10 tags (domain::MAX_TAGS): one statement each for the tags and the links' rows.
    let values: Vec<String> = (0..tags.len())
        .map(|i| format!("(${}, $1, ${}, ${}, $2)", 3 + 3 * i, 4 + 3 * i, 5 + 3 * i))
        .collect();
    let sql = format!(
        "INSERT INTO tags (id, account_id, name, name_key, created_at) VALUES {} \
         ON CONFLICT (account_id, name_key) DO UPDATE SET name = tags.name RETURNING id",
        values.join(", ")
    );
    let mut q = sqlx::query(&sql).bind(account_id).bind(Micros::now().0);
    for tag in tags {
        q = q.bind(new_id()).bind(tag.name()).bind(tag.key());
    }
    let ids: Vec<String> = q
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| r.try_get("id"))
        .collect::<Result<_, sqlx::Error>>()?;
    let values: Vec<String> = (0..ids.len())
        .map(|i| format!("($1, ${})", i + 2))
        .collect();
    let sql = format!(
        "INSERT INTO link_tags (link_id, tag_id) VALUES {}",
        values.join(", ")
    );
    let mut q = sqlx::query(&sql).bind(link_id);
    for id in &ids {
        q = q.bind(id.as_str());
    }
    q.execute(&mut *conn).await?;
    Ok(())
}
