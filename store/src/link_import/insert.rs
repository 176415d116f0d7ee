//! A chunk's new links written with a few multi-row statements instead of several statements per row: the
//! requested codes looked up with one query per domain, the links inserted skipping taken codes (made up again
//! and retried), their tags with one upsert and one insert ([`link_tags::tag_new_links`]). On SQLite every
//! statement costs two thread hand-offs and the chunk holds the only writer, so the statements per chunk are both
//! the import's speed and what a create-link meanwhile waits for.

use crate::creation::{CreateLink, CreatedLink, Target};
use crate::domain::{ShortCode, Title, generate_short_code};
use crate::error::StoreError;
use crate::ids::new_id;
use crate::listed::{search_text, short_url};
use crate::sql_chunks::{MultiRow, in_lists};
use sqlx::{AnyConnection, Row};
use std::collections::{HashMap, HashSet};

/// Rounds of made-up codes for rows whose code was taken (each made-up code collides with odds ~n/36^7).
const CODE_ROUNDS: usize = 8;
/// Columns of a link's row as inserted.
const COLUMNS: usize = 13;

/// A row the chunk creates.
pub(super) struct NewLink {
    /// Create-link's request; its `short_code` is the one asked for (cleared when it is made up instead).
    pub(super) req: CreateLink,
    /// Where it goes.
    pub(super) target: Target,
    /// Whether it starts active.
    pub(super) active: bool,
}

/// The codes of `requested` (`(domain id, code)`) that links already use, in the caller's transaction: one
/// query per domain.
pub(super) async fn taken_codes(
    conn: &mut AnyConnection,
    requested: &[(&str, &str)],
) -> Result<HashSet<(String, String)>, StoreError> {
    let mut by_domain: HashMap<&str, Vec<&str>> = HashMap::new();
    for (domain, code) in requested {
        by_domain.entry(domain).or_default().push(code);
    }
    let mut taken = HashSet::new();
    for (domain, codes) in by_domain {
        for (placeholders, chunk) in in_lists(&codes, 2) {
            let sql = format!(
                "SELECT short_code FROM links WHERE domain_id = $1 AND short_code IN ({placeholders})"
            );
            let mut q = sqlx::query(&sql).bind(domain);
            for code in chunk {
                q = q.bind(code);
            }
            for row in q.fetch_all(&mut *conn).await? {
                taken.insert((domain.to_owned(), row.try_get("short_code")?));
            }
        }
    }
    Ok(taken)
}

/// Why a chunk's links could not be inserted, to be tried again from the start.
pub(super) struct TargetGone;

/// Inserts `links` and returns each one created, in order, with the code it asked for when that code turned out
/// to be taken (by a creation committed since [`taken_codes`], PostgreSQL only) and was made up instead. A
/// taken code skips its row (`ON CONFLICT DO NOTHING`) rather than failing the statement, which on PostgreSQL
/// would spoil the transaction; the skipped rows go again with new codes. `Err(TargetGone)`: a group or domain
/// was deleted since it was resolved (a foreign key), which does spoil it.
pub(super) async fn insert_links(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    links: &mut [NewLink],
    now: i64,
) -> Result<Result<Vec<(CreatedLink, Option<ShortCode>)>, TargetGone>, StoreError> {
    let ids: Vec<String> = links.iter().map(|_| new_id()).collect();
    let mut codes: Vec<ShortCode> = links
        .iter()
        .map(|l| l.req.short_code.clone().unwrap_or_else(generate_short_code))
        .collect();
    let mut replaced: Vec<Option<ShortCode>> = vec![None; links.len()];
    let mut pending: Vec<usize> = (0..links.len()).collect();
    for _ in 0..CODE_ROUNDS {
        if pending.is_empty() {
            break;
        }
        let mut inserted: HashSet<String> = HashSet::with_capacity(pending.len());
        for (chunk, values) in multi_row.split(&pending, COLUMNS) {
            let sql = format!(
                "INSERT INTO links (id, account_id, group_id, domain_id, short_code, long_url, is_active, \
                 created_at, created_by_key, expires_at, forward_query, title, search_text) VALUES {values} \
                 ON CONFLICT (domain_id, short_code) DO NOTHING RETURNING id"
            );
            let mut q = sqlx::query(&sql);
            for &i in chunk {
                let NewLink {
                    req,
                    target,
                    active,
                } = &links[i];
                let title = req.title.as_ref().map(Title::as_str);
                q = q
                    .bind(ids[i].as_str())
                    .bind(req.account_id.as_str())
                    .bind(target.group_id.as_str())
                    .bind(target.domain_id.as_str())
                    .bind(codes[i].as_str())
                    .bind(req.long_url.as_str())
                    .bind(i64::from(*active))
                    .bind(now)
                    .bind(req.rate_subject())
                    .bind(req.expires_at.map(|t| t.0))
                    .bind(i64::from(req.forward_query))
                    .bind(title)
                    .bind(search_text(codes[i].as_str(), req.long_url.as_str(), title));
            }
            match q.fetch_all(&mut *conn).await {
                Ok(rows) => {
                    for row in rows {
                        inserted.insert(row.try_get("id")?);
                    }
                }
                Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation() => {
                    return Ok(Err(TargetGone));
                }
                Err(e) => return Err(e.into()),
            }
        }
        pending.retain(|i| !inserted.contains(&ids[*i]));
        for &i in &pending {
            if let Some(asked) = links[i].req.short_code.take() {
                replaced[i] = Some(asked);
            }
            codes[i] = generate_short_code();
        }
    }
    if !pending.is_empty() {
        // 36^7 codes: only a nearly full code space gets here, which is ours to fix, not the importer's.
        return Err(StoreError::Internal(format!(
            "no free short code in {CODE_ROUNDS} rounds"
        )));
    }
    Ok(Ok(links
        .iter()
        .zip(ids)
        .zip(codes)
        .zip(replaced)
        .map(|(((link, id), code), replaced)| {
            let created = CreatedLink {
                short_url: short_url(&link.target.host, code.as_str()),
                short_code: code.as_str().to_owned(),
                id,
                group_id: link.target.group_id.clone(),
                domain: link.target.host.clone(),
                domain_id: link.target.domain_id.clone(),
            };
            (created, replaced)
        })
        .collect()))
}
