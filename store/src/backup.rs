//! Online backups of an SQLite database (issue "Production"): `VACUUM INTO` writes a consistent, compacted copy from
//! one read transaction while the server keeps serving (WAL: writers are not blocked). PostgreSQL has `pg_dump`, which
//! does the same with more options, so the store does not reimplement it.

use crate::error::StoreError;
use crate::pool::{Db, LinkPath};
use std::path::Path;

impl Db {
    /// Writes a consistent copy of the whole SQLite database to `to`, which must not exist yet (a backup never
    /// overwrites anything). Returns the copy's size in bytes. Links committed before the call are in the copy.
    pub async fn backup_to(&self, to: &Path) -> Result<u64, StoreError> {
        if matches!(self.link_path, LinkPath::Direct) {
            return Err(StoreError::Config(
                "backup is for SQLite; back up PostgreSQL with pg_dump (README \"Backups\")"
                    .to_owned(),
            ));
        }
        if to.exists() {
            return Err(StoreError::Config(format!(
                "{} exists; a backup never overwrites a file",
                to.display()
            )));
        }
        let target = to
            .to_str()
            .ok_or_else(|| StoreError::Config("the backup path must be UTF-8".to_owned()))?;
        sqlx::query("VACUUM INTO $1")
            .bind(target)
            .execute(&self.read)
            .await?;
        scrub_visitors(target).await?;
        std::fs::metadata(to)
            .map(|m| m.len())
            .map_err(|e| StoreError::Config(format!("{}: {e}", to.display())))
    }
}

/// Takes the unique visitors' day salts and hashes out of a backup (and vacuums again, so no free page keeps them):
/// they must not outlive their day, and a backup is kept for longer. A restored database makes new salts at start;
/// visitors of the day the backup was taken count again after a restore.
async fn scrub_visitors(path: &str) -> Result<(), StoreError> {
    use sqlx::Connection;
    let mut copy = sqlx::AnyConnection::connect(&format!("sqlite://{path}")).await?;
    for sql in [
        "DELETE FROM visitor_salts",
        "DELETE FROM day_visitor_keys",
        "VACUUM",
    ] {
        sqlx::query(sql).execute(&mut copy).await?;
    }
    copy.close().await?;
    Ok(())
}
