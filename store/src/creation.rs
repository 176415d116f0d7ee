//! One link creation inside a transaction: the rate-limit count and the insert ([`insert_link`]), then, once per
//! transaction, the accounts' link counters, the outbox rows, the activity log and the webhooks' `link.created`
//! events ([`record_created`]). Both commit paths (SQLite's
//! batched writer, PostgreSQL's own transaction) are built from these two, so the rules are written once.

use crate::audit::{self, Action, Actor};
use crate::domain::{LongUrl, Micros, ShortCode, Tag, Title};
use crate::error::StoreError;
use crate::ids::new_id;
use crate::link_options::{COLUMNS, LinkOptions, bind};
use crate::link_tags;
use crate::listed::{search_text, short_url};
use crate::outbox;
use crate::rate_limit::{RateLimitState, RateWindow};
use crate::webhooks::{self, EventType};
use sqlx::{AnyConnection, Row};

/// What create-link needs, already validated.
#[derive(Debug, Clone)]
pub struct CreateLink {
    /// Who creates it: the hourly limit is counted per creator.
    pub creator: Creator,
    /// Its account.
    pub account_id: String,
    /// Destination.
    pub long_url: LongUrl,
    /// Requested alias, or None to generate one.
    pub short_code: Option<ShortCode>,
    /// Requested group (falls back to the default group when absent or not the caller's).
    pub group_id: Option<String>,
    /// Requested domain (falls back to a platform domain when absent or not usable).
    pub domain_id: Option<String>,
    /// When the link stops redirecting; `None`: never.
    pub expires_at: Option<Micros>,
    /// Whether the edge appends the visitor's query string to the destination.
    pub forward_query: bool,
    /// Who acts, for the activity log (the API key, a signed-in user, the operator).
    pub actor: Actor,
    /// Its title; `None`: none.
    pub title: Option<Title>,
    /// Its tags (merged, at most 10: [`Tag::parse_list`]).
    pub tags: Vec<Tag>,
    /// Its smart-link fields (rules, app links, password, …); the default is a plain link.
    pub options: LinkOptions,
}

/// Who creates a link. The hourly limit (spec 8) is per API key; the dashboard's creations are counted apart, per
/// account, with the same limit: a person at a form gets the budget a key gets, and regenerating the key does not
/// reset it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Creator {
    /// The API key with this row id.
    ApiKey(String),
    /// The account's holder, signed in to the dashboard.
    Dashboard,
    /// The import with this id: counted against the imports' daily budget, not the hourly limit.
    Import(String),
}

impl CreateLink {
    /// What `links.created_by_key` and `deleted_creations.key_id` record, and the limit counts by: the key's row
    /// id, or `dashboard:<account id>` (never a UUID, so never a key's).
    pub(crate) fn rate_subject(&self) -> String {
        match &self.creator {
            Creator::ApiKey(id) => id.clone(),
            Creator::Dashboard => format!("dashboard:{}", self.account_id),
            Creator::Import(id) => format!("import:{id}"),
        }
    }
}

/// A created link (spec 2 "Link (as created)").
#[derive(Debug, Clone)]
pub struct CreatedLink {
    /// Link id.
    pub id: String,
    /// Stored (lowercase) alias.
    pub short_code: String,
    /// `https://<domain>/<short_code>`.
    pub short_url: String,
    /// The group it went to.
    pub group_id: String,
    /// The domain's hostname.
    pub domain: String,
    /// The domain's id.
    pub domain_id: String,
}

/// Where a new link goes: resolved before the write transaction, on a read connection.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) group_id: String,
    pub(crate) domain_id: String,
    pub(crate) host: String,
}

/// Why an attempt must be retried rather than reported.
pub(crate) enum Retry {
    /// A generated code collided.
    CodeTaken,
    /// The group or domain was deleted between resolving it and inserting (foreign key).
    TargetGone,
}

/// What one attempt at a creation came to: the link, or a reason to try again.
pub(crate) type Attempt = Result<(CreatedLink, RateLimitState), Retry>;

/// The rate-limit check and the insert of one link inside the caller's transaction; the caller then writes the
/// counters and outbox rows of its transaction's creations ([`record_created`]) and commits. Creations with one
/// key must be serialised for the count to be exact: SQLite's `BEGIN IMMEDIATE` holds the database's write lock,
/// and on PostgreSQL the caller has written the key row. A failed insert changes nothing, so the transaction can
/// go on with other creations.
pub(crate) async fn insert_link(
    conn: &mut AnyConnection,
    req: &CreateLink,
    target: &Target,
    code: &ShortCode,
    now: i64,
) -> Result<Attempt, StoreError> {
    let subject = req.rate_subject();
    // An import has its own budget, counted by its runner (crate::link_import): no hourly window to read.
    let limit = match req.creator {
        Creator::Import(_) => RateLimitState {
            limit: 0,
            remaining: 0,
            reset_at: 0,
            retry_after: 0,
        },
        _ => {
            let limit = rate_window(
                conn,
                &subject,
                matches!(req.creator, Creator::ApiKey(_)),
                now,
            )
            .await?;
            if limit.remaining == 0 {
                return Err(StoreError::RateLimited(limit));
            }
            limit
        }
    };
    let id = new_id();
    // The smart-link fields' columns follow the others: $13, $14, …
    let smart_values: Vec<String> = (13..13 + COLUMNS.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "INSERT INTO links (id, account_id, group_id, domain_id, short_code, long_url, is_active, created_at, \
         created_by_key, expires_at, forward_query, title, search_text, {}) \
         VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9, $10, $11, $12, {})",
        COLUMNS.join(", "),
        smart_values.join(", ")
    );
    let mut insert = sqlx::query(&sql)
        .bind(&id)
        .bind(&req.account_id)
        .bind(&target.group_id)
        .bind(&target.domain_id)
        .bind(code.as_str())
        .bind(req.long_url.as_str())
        .bind(now)
        .bind(&subject)
        .bind(req.expires_at.map(|t| t.0))
        .bind(i64::from(req.forward_query))
        .bind(req.title.as_ref().map(Title::as_str))
        .bind(search_text(
            code.as_str(),
            req.long_url.as_str(),
            req.title.as_ref().map(Title::as_str),
        ));
    for value in req.options.columns() {
        insert = bind(insert, value);
    }
    let inserted = insert.execute(&mut *conn).await;
    match inserted {
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            return Ok(Err(Retry::CodeTaken));
        }
        Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation() => {
            return Ok(Err(Retry::TargetGone));
        }
        r => r?,
    };
    if !req.tags.is_empty() {
        link_tags::set_link_tags(conn, &req.account_id, &id, &req.tags).await?;
    }
    let state = limit.after_use(RateWindow::CREATIONS, now);
    let link = CreatedLink {
        short_url: short_url(&target.host, code.as_str()),
        short_code: code.as_str().to_owned(),
        id,
        group_id: target.group_id.clone(),
        domain: target.host.clone(),
        domain_id: target.domain_id.clone(),
    };
    Ok(Ok((link, state)))
}

/// The accounts' link counters, the outbox rows and the activity log's `link.created` rows (one per link) for the
/// links a transaction created, `(request, link)`: three statements however many links, so a batch of creations
/// costs its writer three calls more, not three per link.
pub(crate) async fn record_created(
    conn: &mut AnyConnection,
    created: &[(&CreateLink, &CreatedLink)],
) -> Result<(), StoreError> {
    if created.is_empty() {
        return Ok(());
    }
    let mut per_account: Vec<(&str, i64)> = Vec::new();
    for (req, _) in created {
        let account = req.account_id.as_str();
        match per_account.iter_mut().find(|(a, _)| *a == account) {
            Some((_, n)) => *n += 1,
            None => per_account.push((account, 1)),
        }
    }
    // link_count + CASE id WHEN $1 THEN $2 WHEN $3 THEN $4 … END, for the ids $1, $3, …
    let arms: Vec<String> = (0..per_account.len())
        .map(|i| format!("WHEN ${} THEN ${}", 2 * i + 1, 2 * i + 2))
        .collect();
    let ids: Vec<String> = (0..per_account.len())
        .map(|i| format!("${}", 2 * i + 1))
        .collect();
    let sql = format!(
        "UPDATE accounts SET link_count = link_count + CASE id {} END WHERE id IN ({})",
        arms.join(" "),
        ids.join(", ")
    );
    let mut update = sqlx::query(&sql);
    for (account, n) in &per_account {
        update = update.bind(*account).bind(*n);
    }
    update.execute(&mut *conn).await?;
    let keys: Vec<String> = created
        .iter()
        .map(|(_, link)| kv_model::link_key(&link.domain, &link.short_code))
        .collect();
    outbox::enqueue(conn, &keys).await?;
    let entries: Vec<audit::Entry<'_>> = created
        .iter()
        .map(|(req, link)| {
            let mut details = serde_json::json!({
                "short_url": link.short_url,
                "long_url": req.long_url.as_str(),
                "group_id": link.group_id,
                "expires_at": req.expires_at.map(Micros::to_iso8601),
                "forward_query": req.forward_query,
            });
            // Given only: a link created without them reads as before.
            if let Some(title) = &req.title {
                details["title"] = title.as_str().into();
            }
            if !req.tags.is_empty() {
                details["tags"] = req.tags.iter().map(Tag::name).collect::<Vec<_>>().into();
            }
            req.options.details(&mut details);
            audit::Entry {
                account_id: &req.account_id,
                actor: &req.actor,
                action: Action::LinkCreated,
                target_id: &link.id,
                details,
            }
        })
        .collect();
    audit::record_many(conn, &entries).await?;
    let links: Vec<(&str, &str)> = created
        .iter()
        .map(|(req, link)| (req.account_id.as_str(), link.id.as_str()))
        .collect();
    webhooks::emit::emit_links(conn, EventType::LinkCreated, &links).await
}

/// What is left of the creator's limit in the window ending now: its own links created in the last hour,
/// including those deleted since (`deleted_creations`, see [`crate::link_edits`]). For a key, also checks that it
/// still exists (it may have been revoked since authentication), in the same statement.
async fn rate_window(
    conn: &mut AnyConnection,
    key_id: &str,
    is_key: bool,
    now: i64,
) -> Result<RateLimitState, StoreError> {
    let row = sqlx::query(
        "SELECT (SELECT COUNT(*) FROM api_keys WHERE id = $1) AS key_exists, COUNT(*) AS n, MIN(created_at) AS oldest \
         FROM (SELECT created_at FROM links WHERE created_by_key = $1 AND created_at > $2 \
               UNION ALL SELECT created_at FROM deleted_creations WHERE key_id = $1 AND created_at > $2) w",
    )
    .bind(key_id)
    .bind(RateWindow::CREATIONS.start(now))
    .fetch_one(&mut *conn)
    .await?;
    if is_key && row.try_get::<i64, _>("key_exists")? == 0 {
        return Err(StoreError::KeyRevoked);
    }
    Ok(RateWindow::CREATIONS.state(row.try_get("n")?, row.try_get("oldest")?, now))
}
