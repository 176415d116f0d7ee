//! The transactional outbox, writing side: a change adds the KV keys it affects inside its own transaction. The
//! rows carry no values: the publisher reads each key's current record ([`crate::publishing`]), so a replayed or
//! reordered row can never publish stale data, and a deleted entity becomes a KV delete.

use crate::domain::Micros;
use crate::error::StoreError;
use crate::sql_chunks::MultiRow;
use sqlx::AnyConnection;

/// Adds `keys` to the outbox on `conn` (the caller's transaction).
pub(crate) async fn enqueue(conn: &mut AnyConnection, keys: &[String]) -> Result<(), StoreError> {
    if keys.is_empty() {
        return Ok(());
    }
    let now = Micros::now().0;
    for (chunk, values) in MultiRow::of(conn).split(keys, 2) {
        let sql = format!("INSERT INTO outbox (kv_key, created_at) VALUES {values}");
        let mut q = sqlx::query(&sql);
        for key in chunk {
            q = q.bind(key.as_str()).bind(now);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}
