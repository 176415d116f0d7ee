//! The export of an account's links (issue 24): every link a list query matches, in the list's order, with its
//! group's name and its clicks of all time.
//!
//! Read in keyset batches, each a short read of its own, so an export of a million links holds no connection,
//! snapshot or memory between batches, whatever the client's pace: the caller asks for the batch after the last
//! link it got ([`ExportCursor`]). Each batch seeks past the previous one on the sort key and its ties (creation
//! time, then id), so in the creation orders every link that exists throughout the export is read exactly once.
//! In the `short_code` and `clicks` orders a link whose code or count changes between two batches can move across
//! the cursor (read twice or not at all), as with any paginated read; the README says so.

use crate::domain::{LinkSort, ListQuery};
use crate::error::StoreError;
use crate::links::{Arg, CLICKS_TOTAL, Conditions, bind_all, conditions, short_code_bytes};
use crate::listed::{LISTED_COLUMNS, ListedLink};
use crate::pool::Db;
use crate::webhooks::emit::is_postgres;
use sqlx::Row;

/// Most links read in one batch.
pub const MAX_EXPORT_BATCH: u32 = 5_000;

/// A link as exported: as listed, with its group's name and its clicks of all time.
#[derive(Debug, Clone)]
pub struct ExportedLink {
    /// The link as the API lists it.
    pub link: ListedLink,
    /// Its group's name.
    pub group_name: String,
    /// Its clicks of all time.
    pub clicks: i64,
}

/// Where the next batch starts: the sort key of the last link read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportCursor {
    created_at: i64,
    id: String,
    short_code: String,
    clicks: i64,
}

/// One batch of an export.
#[derive(Debug, Clone)]
pub struct ExportBatch {
    /// The links, in the query's order.
    pub links: Vec<ExportedLink>,
    /// Where the next batch starts; `None` when this batch was the last.
    pub next: Option<ExportCursor>,
}

impl Db {
    /// The links of the account matching `query`'s filters, in its order (its `limit` and `offset` are not used),
    /// at most `batch` (1 to [`MAX_EXPORT_BATCH`]) of them, after `after` (`None`: from the first).
    pub async fn export_links(
        &self,
        account_id: &str,
        query: &ListQuery,
        after: Option<&ExportCursor>,
        batch: u32,
    ) -> Result<ExportBatch, StoreError> {
        let batch = batch.clamp(1, MAX_EXPORT_BATCH);
        let mut conn = self.read.acquire().await?;
        let postgres = is_postgres(&conn);
        let Conditions {
            sql: mut where_sql,
            mut binds,
        } = conditions(query);
        if let Some(cursor) = after {
            where_sql.push_str(" AND ");
            where_sql.push_str(&seek(query.sort, postgres, cursor, &mut binds));
        }
        let code = short_code_bytes(postgres);
        let (inner, outer) = match query.sort {
            LinkSort::Newest => (
                "l.created_at DESC, l.id DESC".to_owned(),
                "l.created_at DESC, l.id DESC".to_owned(),
            ),
            LinkSort::Oldest => (
                "l.created_at ASC, l.id ASC".to_owned(),
                "l.created_at ASC, l.id ASC".to_owned(),
            ),
            LinkSort::ShortCode => {
                let o = format!("{code} ASC, l.created_at DESC, l.id DESC");
                (o.clone(), o)
            }
            LinkSort::Clicks => (
                "clicks DESC, l.created_at DESC, l.id DESC".to_owned(),
                "l.clicks DESC, l.created_at DESC, l.id DESC".to_owned(),
            ),
        };
        let lim = binds.len() + 2;
        // The batch is chosen on the links table alone (its account indexes), then joined to its domains,
        // groups and tags.
        let sql = format!(
            "SELECT {LISTED_COLUMNS}, g.name AS group_name, l.clicks \
             FROM (SELECT l.id, l.short_code, l.long_url, l.domain_id, l.group_id, l.is_active, l.created_at, \
                          l.expires_at, l.forward_query, l.title, {CLICKS_TOTAL} AS clicks FROM links l \
                   WHERE l.account_id = $1{where_sql} ORDER BY {inner} LIMIT ${lim}) l \
             JOIN domains d ON d.id = l.domain_id JOIN groups g ON g.id = l.group_id ORDER BY {outer}"
        );
        let rows = bind_all(&sql, account_id, &binds)
            .bind(i64::from(batch))
            .fetch_all(&mut *conn)
            .await?;
        let mut links = Vec::with_capacity(rows.len());
        let mut next = None;
        for r in &rows {
            let link = ListedLink::from_row(r)?;
            let clicks: i64 = r.try_get("clicks")?;
            next = Some(ExportCursor {
                created_at: r.try_get("created_at")?,
                id: link.id.clone(),
                short_code: link.short_code.clone(),
                clicks,
            });
            links.push(ExportedLink {
                link,
                group_name: r.try_get("group_name")?,
                clicks,
            });
        }
        // A short batch is the last one; a full one may be too, which the next (empty) batch tells.
        if rows.len() < batch as usize {
            next = None;
        }
        Ok(ExportBatch { links, next })
    }
}

/// The condition "after `cursor` in the order of `sort`", binding its values after `binds`.
fn seek(sort: LinkSort, postgres: bool, cursor: &ExportCursor, binds: &mut Vec<Arg>) -> String {
    let mut bind = |value: Arg| {
        binds.push(value);
        format!("${}", binds.len() + 1)
    };
    let created = bind(Arg::Int(cursor.created_at));
    let id = bind(Arg::Text(cursor.id.clone()));
    let newer_ties =
        format!("(l.created_at < {created} OR (l.created_at = {created} AND l.id < {id}))");
    match sort {
        LinkSort::Newest => newer_ties,
        LinkSort::Oldest => {
            format!("(l.created_at > {created} OR (l.created_at = {created} AND l.id > {id}))")
        }
        LinkSort::ShortCode => {
            let c = bind(Arg::Text(cursor.short_code.clone()));
            let code = short_code_bytes(postgres);
            format!("({code} > {c} OR ({code} = {c} AND {newer_ties}))")
        }
        LinkSort::Clicks => {
            let n = bind(Arg::Int(cursor.clicks));
            format!("({CLICKS_TOTAL} < {n} OR ({CLICKS_TOTAL} = {n} AND {newer_ties}))")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cursor() -> ExportCursor {
        ExportCursor {
            created_at: 7,
            id: "b".to_owned(),
            short_code: "abc".to_owned(),
            clicks: 3,
        }
    }

    #[test]
    fn seeks_bind_after_the_filters() {
        let mut binds = vec![Arg::Text("x".to_owned())];
        let sql = seek(LinkSort::Newest, false, &cursor(), &mut binds);
        assert_eq!(
            sql,
            "(l.created_at < $3 OR (l.created_at = $3 AND l.id < $4))"
        );
        assert_eq!(binds.len(), 3);
        let mut binds = Vec::new();
        let sql = seek(LinkSort::ShortCode, true, &cursor(), &mut binds);
        assert!(
            sql.starts_with("(l.short_code COLLATE \"C\" > $4 OR"),
            "{sql}"
        );
        let mut binds = Vec::new();
        let sql = seek(LinkSort::Oldest, false, &cursor(), &mut binds);
        assert!(sql.starts_with("(l.created_at > $2"), "{sql}");
    }
}
