//! Changing and deleting a link: the account's own links only, each change with its outbox row in the same
//! transaction, so the edge follows within the publisher's propagation time.
//!
//! A deleted link's row goes (its short code is free again, its clicks go with it, also out of its groups' and
//! its account's statistics), but its creation keeps
//! counting against the key's hourly limit: deleting is not a way around the limit. The creation time moves to
//! `deleted_creations`, which [`crate::creation`]'s window counts beside the key's live links.

use crate::audit::{self, Action, Actor};
use crate::digests::write::{self, Change, DayKey};
use crate::digests::{Digest, Scope, fold};
use crate::domain::{LongUrl, Micros, Tag, Title};
use crate::error::{Entity, StoreError};
use crate::link_options::{
    LinkOptionsPatch, SMART_COLUMNS, SmartFields, bind, check_destinations, check_max_clicks_group,
};
use crate::link_tags::set_link_tags;
use crate::links::get_link_in;
use crate::listed::{ListedLink, search_text, tag_list};
use crate::outbox;
use crate::pool::Db;
use crate::rate_limit::RateWindow;
use crate::sql_chunks::MultiRow;
use crate::webhooks::EventType;
use crate::webhooks::emit::emit;
use sqlx::{AnyConnection, Row};
use std::collections::BTreeMap;

/// The fields a PATCH may change; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct LinkPatch {
    /// New destination (create-link's rules; checked against the blocklist here).
    pub long_url: Option<LongUrl>,
    /// Pause (false) or resume (true).
    pub is_active: Option<bool>,
    /// Move to another of the account's groups.
    pub group_id: Option<String>,
    /// `Some(None)` removes the expiry.
    pub expires_at: Option<Option<Micros>>,
    /// Whether the visitor's query string is forwarded.
    pub forward_query: Option<bool>,
    /// `Some(None)` removes the title.
    pub title: Option<Option<Title>>,
    /// Replaces the whole list of tags (`Some(vec![])` removes them all).
    pub tags: Option<Vec<Tag>>,
    /// The smart-link fields it changes.
    pub options: LinkOptionsPatch,
}

impl LinkPatch {
    /// True when the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.long_url.is_none()
            && self.is_active.is_none()
            && self.group_id.is_none()
            && self.expires_at.is_none()
            && self.forward_query.is_none()
            && self.title.is_none()
            && self.tags.is_none()
            && self.options.is_empty()
    }

    /// True when the patch changes what the edge serves (the link's KV record): anything but the title and the
    /// tags, which are not served (every smart-link field is).
    fn touches_edge(&self) -> bool {
        !self.options.is_empty()
            || self.long_url.is_some()
            || self.is_active.is_some()
            || self.group_id.is_some()
            || self.expires_at.is_some()
            || self.forward_query.is_some()
    }

    /// The activity log's action for this patch: `link.paused` / `link.resumed` when it changes `is_active` alone,
    /// else `link.updated`.
    fn action(&self) -> Action {
        let only_state = LinkPatch {
            is_active: None,
            ..self.clone()
        }
        .is_empty();
        match self.is_active {
            Some(false) if only_state => Action::LinkPaused,
            Some(true) if only_state => Action::LinkResumed,
            _ => Action::LinkUpdated,
        }
    }

    /// The activity log's details: the link's short URL (what the row is about), then each field the patch sets,
    /// with its new value (`tags`: the link's tags after the change, as the account spells them).
    fn details(&self, link: &ListedLink) -> serde_json::Value {
        let mut details = serde_json::Map::new();
        details.insert("short_url".to_owned(), link.short_url().into());
        if let Some(url) = &self.long_url {
            details.insert("long_url".to_owned(), url.as_str().into());
        }
        if let Some(active) = self.is_active {
            details.insert("is_active".to_owned(), active.into());
        }
        if let Some(group) = &self.group_id {
            details.insert("group_id".to_owned(), group.as_str().into());
        }
        if let Some(expires) = self.expires_at {
            details.insert(
                "expires_at".to_owned(),
                expires.map(Micros::to_iso8601).into(),
            );
        }
        if let Some(forward) = self.forward_query {
            details.insert("forward_query".to_owned(), forward.into());
        }
        if let Some(title) = &self.title {
            details.insert("title".to_owned(), title.as_ref().map(Title::as_str).into());
        }
        if self.tags.is_some() {
            details.insert("tags".to_owned(), link.tags.clone().into());
        }
        self.options.details(&mut details);
        details.into()
    }
}

/// Takes a deleted link's clicks out of the statistics: out of the day digests of the groups it was in when they
/// happened and of its account's, then deletes its own digests (its raw clicks went with the link row). The
/// deltas of the link, its groups and its account are folded first ([`fold::of_owners`]). Run after
/// the link row is deleted: that waits for any click report holding the link (PostgreSQL), so every click counted
/// for it is seen here, and the locks are taken in the reports' order (link, its digests, group digests, account
/// digests).
async fn forget_clicks(
    conn: &mut AnyConnection,
    account_id: &str,
    link_id: &str,
) -> Result<(), StoreError> {
    let multi_row = MultiRow::of(conn);
    // The link's reports' deltas into its day rows first, so that they hold all its clicks.
    fold::of_owners(conn, multi_row, &[link_id]).await?;
    let rows = sqlx::query(
        "SELECT period, group_id, clicks, bots, uniques, data FROM link_click_digests \
         WHERE link_id = $1 AND span = 'day'",
    )
    .bind(link_id)
    .fetch_all(&mut *conn)
    .await?;
    // Each day row of the link: its day, the group its clicks went to, and what it added there.
    let mut days: Vec<(i64, String, Change)> = Vec::with_capacity(rows.len());
    for r in rows {
        let change = Change {
            clicks: r.try_get("clicks")?,
            bots: r.try_get("bots")?,
            uniques: r.try_get("uniques")?,
            digest: Digest::decode(&r.try_get::<Vec<u8>, _>("data")?)?,
        };
        days.push((r.try_get("period")?, r.try_get("group_id")?, change));
    }
    let mut groups: BTreeMap<DayKey<'_>, Change> = BTreeMap::new();
    let mut accounts: BTreeMap<DayKey<'_>, Change> = BTreeMap::new();
    for (day, group, day_change) in &days {
        for change in [
            groups.entry((group.as_str(), *day, "")).or_default(),
            accounts.entry((account_id, *day, "")).or_default(),
        ] {
            change.clicks += day_change.clicks;
            change.bots += day_change.bots;
            change.uniques += day_change.uniques;
            change.digest.merge(&day_change.digest, 1);
        }
    }
    // And its groups' and account's deltas into theirs, so that the link's clicks are all there to take out.
    let mut owners: Vec<&str> = groups.keys().map(|k| k.0).collect();
    owners.dedup();
    owners.push(account_id);
    fold::of_owners(conn, multi_row, &owners).await?;
    write::take_out(conn, multi_row, Scope::GROUPS, &groups).await?;
    write::take_out(conn, multi_row, Scope::ACCOUNTS, &accounts).await?;
    sqlx::query("DELETE FROM link_click_digests WHERE link_id = $1")
        .bind(link_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

impl Db {
    /// Applies `patch` to one of the account's links and returns the link as it now is. A group that is not
    /// the account's is [`StoreError::Invalid`]; a link that is not the account's is not found. The change and
    /// its activity-log row (`link.paused`, `link.resumed` or `link.updated`, by `actor`) commit together; an empty
    /// patch changes nothing and writes no row.
    pub async fn update_link(
        &self,
        account_id: &str,
        link_id: &str,
        patch: &LinkPatch,
        actor: &Actor,
    ) -> Result<ListedLink, StoreError> {
        if patch.is_empty() {
            return self.get_link(account_id, link_id).await;
        }
        if let Some(url) = &patch.long_url {
            if self.is_host_blocked(url.host()).await? {
                return Err(StoreError::BlockedDestination);
            }
        }
        let destinations = patch.options.destinations();
        if !destinations.is_empty() {
            let mut conn = self.read.acquire().await?;
            check_destinations(&mut conn, &destinations).await?;
        }
        let smart = patch.options.columns();
        let mut sets = Vec::new();
        let mut n = 2;
        let mut next = |column: &str| {
            n += 1;
            sets.push(format!("{column} = ${n}"));
        };
        // The order of these calls is the order of the binds below.
        patch.long_url.iter().for_each(|_| next("long_url"));
        patch.is_active.iter().for_each(|_| next("is_active"));
        patch.group_id.iter().for_each(|_| next("group_id"));
        patch.expires_at.iter().for_each(|_| next("expires_at"));
        patch
            .forward_query
            .iter()
            .for_each(|_| next("forward_query"));
        patch.title.iter().for_each(|_| next("title"));
        smart.iter().for_each(|(column, _)| next(column));
        if sets.is_empty() {
            // Tags only: the statement still finds (and on PostgreSQL locks) the account's link.
            sets.push("is_active = is_active".to_owned());
        }
        let sql = format!(
            "UPDATE links SET {} WHERE id = $1 AND account_id = $2",
            sets.join(", ")
        );
        let mut tx = self.begin_write().await?;
        if let Some(group) = &patch.group_id {
            let owned = sqlx::query("SELECT id FROM groups WHERE id = $1 AND account_id = $2")
                .bind(group)
                .bind(account_id)
                .fetch_optional(&mut *tx)
                .await?;
            if owned.is_none() {
                // Checked before the link, so another account's link id with a bad group is still a 404 below.
                get_link_in(&mut tx, account_id, link_id).await?;
                return Err(StoreError::Invalid(
                    "group_id is not one of this account's groups".to_owned(),
                ));
            }
        }
        let mut update = sqlx::query(&sql).bind(link_id).bind(account_id);
        if let Some(url) = &patch.long_url {
            update = update.bind(url.as_str());
        }
        if let Some(active) = patch.is_active {
            update = update.bind(i64::from(active));
        }
        if let Some(group) = &patch.group_id {
            update = update.bind(group.as_str());
        }
        if let Some(expires) = patch.expires_at {
            update = update.bind(expires.map(|t| t.0));
        }
        if let Some(forward) = patch.forward_query {
            update = update.bind(i64::from(forward));
        }
        if let Some(title) = &patch.title {
            update = update.bind(title.as_ref().map(|t| t.as_str().to_owned()));
        }
        for (_, value) in smart {
            update = bind(update, value);
        }
        if update.execute(&mut *tx).await?.rows_affected() == 0 {
            return Err(StoreError::NotFound(Entity::Link));
        }
        // A click limit needs its group to count clicks: checked on the link as it now is, whichever of the two
        // (the limit, the group) changed; refusing drops the transaction, so nothing is changed.
        if matches!(patch.options.max_clicks, Some(Some(_))) || patch.group_id.is_some() {
            let row = sqlx::query("SELECT group_id, max_clicks FROM links WHERE id = $1")
                .bind(link_id)
                .fetch_one(&mut *tx)
                .await?;
            if row.try_get::<Option<i64>, _>("max_clicks")?.is_some() {
                check_max_clicks_group(&mut tx, &row.try_get::<String, _>("group_id")?).await?;
            }
        }
        if let Some(tags) = &patch.tags {
            set_link_tags(&mut tx, account_id, link_id, tags).await?;
        }
        let link = get_link_in(&mut tx, account_id, link_id).await?;
        if patch.long_url.is_some() || patch.title.is_some() {
            sqlx::query("UPDATE links SET search_text = $1 WHERE id = $2")
                .bind(search_text(
                    &link.short_code,
                    &link.long_url,
                    link.title.as_deref(),
                ))
                .bind(link_id)
                .execute(&mut *tx)
                .await?;
        }
        // Titles and tags are not served: a change of only these leaves the edge alone.
        if patch.touches_edge() {
            outbox::enqueue(
                &mut tx,
                &[kv_model::link_key(&link.domain, &link.short_code)],
            )
            .await?;
        }
        audit::record(
            &mut tx,
            account_id,
            actor,
            patch.action(),
            link_id,
            &patch.details(&link),
        )
        .await?;
        // Paused and resumed included: receivers see the link as it now is.
        emit(
            &mut tx,
            account_id,
            EventType::LinkUpdated,
            link_id,
            link.to_json(),
        )
        .await?;
        tx.commit().await?;
        Ok(link)
    }

    /// Deletes one of the account's links: the edge drops it (the outbox deletes its KV key), its short code is
    /// free again, its clicks are gone, and its creation still counts against its key's limit for the rest of
    /// the hour.
    ///
    /// The `DELETE` itself decides whether this call deleted the link, and only then are the counters touched.
    /// Reading the row first and deleting it after let two concurrent deletes of one link on PostgreSQL (read
    /// committed: both read the row, the second `DELETE` waits for the first and then removes nothing) both
    /// answer 204, both decrement the account's link count and both charge a deleted creation. The deletion and
    /// its `link.deleted` row (by `actor`, with the link's short code, domain and destination) commit together.
    pub async fn delete_link(
        &self,
        account_id: &str,
        link_id: &str,
        actor: &Actor,
    ) -> Result<(), StoreError> {
        let now = Micros::now().0;
        let window_start = RateWindow::CREATIONS.start(now);
        let mut tx = self.begin_write().await?;
        // Its tags for its last state, read before the row (and its tags with it) goes.
        let tags: Option<String> = sqlx::query(
            "SELECT string_agg(t.name, '\n') AS tags FROM link_tags lt JOIN tags t ON t.id = lt.tag_id \
             WHERE lt.link_id = $1",
        )
        .bind(link_id)
        .fetch_one(&mut *tx)
        .await?
        .try_get("tags")?;
        // SMART_COLUMNS reads `l.…`; a DELETE's RETURNING names the table's own columns.
        let sql = format!(
            "DELETE FROM links WHERE id = $1 AND account_id = $2 \
             RETURNING created_by_key, created_at, short_code, domain_id, long_url, group_id, is_active, expires_at, \
             forward_query, title, {}",
            SMART_COLUMNS.replace("l.", "")
        );
        let row = sqlx::query(&sql)
            .bind(link_id)
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?
            // Never there, another account's, or deleted by a concurrent call that committed first.
            .ok_or(StoreError::NotFound(Entity::Link))?;
        let created_at: i64 = row.try_get("created_at")?;
        if let Some(key) = row.try_get::<Option<String>, _>("created_by_key")? {
            sqlx::query("DELETE FROM deleted_creations WHERE key_id = $1 AND created_at <= $2")
                .bind(&key)
                .bind(window_start)
                .execute(&mut *tx)
                .await?;
            if created_at > window_start {
                sqlx::query("INSERT INTO deleted_creations (key_id, created_at) VALUES ($1, $2)")
                    .bind(&key)
                    .bind(created_at)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        forget_clicks(&mut tx, account_id, link_id).await?;
        sqlx::query("UPDATE accounts SET link_count = link_count - 1 WHERE id = $1")
            .bind(account_id)
            .execute(&mut *tx)
            .await?;
        // A link's domain is never deleted while it has links (foreign key), so it is still there.
        let host: String = sqlx::query("SELECT host FROM domains WHERE id = $1")
            .bind(row.try_get::<String, _>("domain_id")?)
            .fetch_one(&mut *tx)
            .await?
            .try_get("host")?;
        let short_code: String = row.try_get("short_code")?;
        let key = kv_model::link_key(&host, &short_code);
        outbox::enqueue(&mut tx, &[key]).await?;
        // The link's last state, from the row the DELETE removed (after any change committed before it).
        let last = ListedLink {
            id: link_id.to_owned(),
            short_code,
            long_url: row.try_get("long_url")?,
            domain: host,
            group_id: row.try_get("group_id")?,
            is_active: row.try_get::<i64, _>("is_active")? != 0,
            created_at: Micros(created_at).to_iso8601(),
            expires_at: row
                .try_get::<Option<i64>, _>("expires_at")?
                .map(|t| Micros(t).to_iso8601()),
            forward_query: row.try_get::<i64, _>("forward_query")? != 0,
            title: row.try_get("title")?,
            tags: tag_list(tags),
            smart: SmartFields::from_row(&row)?,
        };
        let details = serde_json::json!({
            "short_url": last.short_url(),
            "short_code": last.short_code,
            "domain": last.domain,
            "long_url": last.long_url,
        });
        audit::record(
            &mut tx,
            account_id,
            actor,
            Action::LinkDeleted,
            link_id,
            &details,
        )
        .await?;
        emit(
            &mut tx,
            account_id,
            EventType::LinkDeleted,
            link_id,
            last.to_json(),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
