//! An account's endpoints: create (at most [`MAX_WEBHOOKS_PER_ACCOUNT`], exact under concurrency), read, change,
//! enable and disable, delete, a new signing secret; and the log of their attempts. Each change writes its
//! activity-log row (`webhook.*`, never the secret) in its own transaction. Another account's endpoint is not
//! found, like a missing one.

use super::{
    EventType, MAX_WEBHOOK_DESCRIPTION_CHARS, MAX_WEBHOOKS_PER_ACCOUNT, events_from_json,
    events_to_json,
};
use crate::audit::{self, Action, Actor};
use crate::domain::Micros;
use crate::error::{Entity, StoreError};
use crate::ids::new_id;
use crate::pool::{Db, require_account_in};
use sqlx::{AnyConnection, Row};

/// An endpoint as its account sees it (never with its secret: that is shown once, by whoever made it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEndpoint {
    /// Endpoint id.
    pub id: String,
    /// Where events are POSTed (checked by the caller before it was stored).
    pub url: String,
    /// What the account wrote about it.
    pub description: Option<String>,
    /// The event types it receives, in [`EventType::SUBSCRIBABLE`]'s order.
    pub events: Vec<EventType>,
    /// Whether events are sent to it.
    pub enabled: bool,
    /// When it was made.
    pub created_at: Micros,
    /// When its current unbroken run of failed deliveries began; `None` after a success.
    pub failing_since: Option<Micros>,
    /// Why it was disabled: by the account, or after failing for five days (with the last error).
    pub disabled_reason: Option<String>,
}

const ENDPOINT_COLUMNS: &str =
    "id, url, description, events, enabled, created_at, failing_since, disabled_reason";

impl WebhookEndpoint {
    fn from_row(r: &sqlx::any::AnyRow) -> Result<Self, StoreError> {
        let events: String = r.try_get("events")?;
        Ok(Self {
            id: r.try_get("id")?,
            url: r.try_get("url")?,
            description: r.try_get("description")?,
            events: events_from_json(&events),
            enabled: r.try_get::<i64, _>("enabled")? != 0,
            created_at: Micros(r.try_get("created_at")?),
            failing_since: r.try_get::<Option<i64>, _>("failing_since")?.map(Micros),
            disabled_reason: r.try_get("disabled_reason")?,
        })
    }

    /// The activity log's details: what the account set, never the secret.
    fn details(&self) -> serde_json::Value {
        serde_json::json!({
            "url": self.url,
            "events": self.events.iter().map(|e| e.as_str()).collect::<Vec<_>>(),
            "description": self.description,
            "enabled": self.enabled,
        })
    }
}

/// A new endpoint, its URL already checked by the caller.
#[derive(Clone)]
pub struct NewWebhook {
    /// Where events are POSTed.
    pub url: String,
    /// What it receives (see [`EventType::parse_subscriptions`]); at least one.
    pub events: Vec<EventType>,
    /// At most [`MAX_WEBHOOK_DESCRIPTION_CHARS`] characters; blank is none.
    pub description: Option<String>,
    /// The signing secret (`whsec_…`), made by the caller.
    pub secret: String,
}

impl std::fmt::Debug for NewWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewWebhook")
            .field("url", &self.url)
            .field("events", &self.events)
            .field("description", &self.description)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// Changes to an endpoint; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct WebhookPatch {
    /// A new URL, already checked by the caller.
    pub url: Option<String>,
    /// New subscriptions (at least one).
    pub events: Option<Vec<EventType>>,
    /// `Some(None)` removes the description.
    pub description: Option<Option<String>>,
    /// Disable (its pending deliveries are dropped) or enable (it starts fresh: no failure run, no reason).
    pub enabled: Option<bool>,
}

impl WebhookPatch {
    /// True when the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.url.is_none()
            && self.events.is_none()
            && self.description.is_none()
            && self.enabled.is_none()
    }
}

/// One attempt of the log, as the account reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRow {
    /// The row's id (increasing).
    pub id: i64,
    /// The event's id (`webhook-id`).
    pub event_id: String,
    /// The event's type.
    pub event_type: String,
    /// 1 for the first try, 2 for the first retry, …; a redelivery starts at 1 again.
    pub attempt: i64,
    /// When it was made.
    pub at: Micros,
    /// The receiver's HTTP status, if it answered.
    pub status_code: Option<i64>,
    /// How long it took.
    pub duration_ms: i64,
    /// Why it failed (`None`: it succeeded).
    pub error: Option<String>,
}

/// A page of the log, newest first, and how many attempts the endpoint has.
#[derive(Debug, Clone)]
pub struct AttemptPage {
    /// All of the endpoint's attempts still kept.
    pub total: i64,
    /// The page.
    pub results: Vec<AttemptRow>,
}

/// A description as stored: trimmed, blank is none, bounded.
fn check_description(d: Option<&str>) -> Result<Option<String>, StoreError> {
    let Some(d) = d else { return Ok(None) };
    if d.chars().count() > MAX_WEBHOOK_DESCRIPTION_CHARS {
        return Err(StoreError::Invalid(format!(
            "description: at most {MAX_WEBHOOK_DESCRIPTION_CHARS} characters"
        )));
    }
    if d.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(StoreError::Invalid(
            "description: no control characters".to_owned(),
        ));
    }
    let d = d.trim();
    Ok((!d.is_empty()).then(|| d.to_owned()))
}

fn check_events(events: &[EventType]) -> Result<(), StoreError> {
    if events.is_empty() || events.contains(&EventType::Ping) {
        return Err(StoreError::Invalid(
            "events must name at least one event type, and not ping".to_owned(),
        ));
    }
    Ok(())
}

/// One of the account's endpoints on `conn`.
pub(super) async fn endpoint_in(
    conn: &mut AnyConnection,
    account_id: &str,
    id: &str,
) -> Result<WebhookEndpoint, StoreError> {
    let sql = format!(
        "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1 AND account_id = $2"
    );
    let row = sqlx::query(&sql)
        .bind(id)
        .bind(account_id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(StoreError::NotFound(Entity::Webhook))?;
    WebhookEndpoint::from_row(&row)
}

/// Drops the endpoint's pending deliveries (it was disabled): they are `failed` with `why`, and no longer
/// claimed.
pub(super) async fn drop_pending(
    conn: &mut AnyConnection,
    endpoint_id: &str,
    why: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE webhook_deliveries SET state = 'failed', last_error = $2, claimed_by = NULL, claimed_until = NULL \
         WHERE endpoint_id = $1 AND state = 'pending'",
    )
    .bind(endpoint_id)
    .bind(why)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

impl Db {
    /// Creates an endpoint for an account that has fewer than [`MAX_WEBHOOKS_PER_ACCOUNT`]; at the cap it is
    /// [`StoreError::WebhookLimit`]. Exact under concurrency: the account's endpoint creations are serialised
    /// ([`Db::serialise_on`]). The endpoint and its `webhook.created` row (by `actor`; never the secret) commit
    /// together.
    pub async fn create_webhook(
        &self,
        account_id: &str,
        new: &NewWebhook,
        actor: &Actor,
    ) -> Result<WebhookEndpoint, StoreError> {
        check_events(&new.events)?;
        let description = check_description(new.description.as_deref())?;
        let mut tx = self.begin_write().await?;
        self.serialise_on(&mut tx, &format!("webhooks:{account_id}"))
            .await?;
        require_account_in(&mut tx, account_id).await?;
        let count: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM webhook_endpoints WHERE account_id = $1")
                .bind(account_id)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
        if count >= i64::from(MAX_WEBHOOKS_PER_ACCOUNT) {
            return Err(StoreError::WebhookLimit(MAX_WEBHOOKS_PER_ACCOUNT));
        }
        let endpoint = WebhookEndpoint {
            id: new_id(),
            url: new.url.clone(),
            description,
            events: new.events.clone(),
            enabled: true,
            created_at: Micros::now(),
            failing_since: None,
            disabled_reason: None,
        };
        sqlx::query(
            "INSERT INTO webhook_endpoints (id, account_id, url, description, events, enabled, secret, created_at) \
             VALUES ($1, $2, $3, $4, $5, 1, $6, $7)",
        )
        .bind(&endpoint.id)
        .bind(account_id)
        .bind(&endpoint.url)
        .bind(endpoint.description.as_deref())
        .bind(events_to_json(&endpoint.events))
        .bind(&new.secret)
        .bind(endpoint.created_at.0)
        .execute(&mut *tx)
        .await?;
        audit::record(
            &mut tx,
            account_id,
            actor,
            Action::WebhookCreated,
            &endpoint.id,
            &endpoint.details(),
        )
        .await?;
        tx.commit().await?;
        Ok(endpoint)
    }

    /// The account's endpoints, oldest first.
    pub async fn webhooks(&self, account_id: &str) -> Result<Vec<WebhookEndpoint>, StoreError> {
        let sql = format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE account_id = $1 ORDER BY created_at, id"
        );
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .fetch_all(&self.read)
            .await?;
        rows.iter().map(WebhookEndpoint::from_row).collect()
    }

    /// One of the account's endpoints.
    pub async fn webhook(&self, account_id: &str, id: &str) -> Result<WebhookEndpoint, StoreError> {
        let mut conn = self.read.acquire().await?;
        endpoint_in(&mut conn, account_id, id).await
    }

    /// Applies `patch` to one of the account's endpoints and returns it as it now is. Disabling it drops its
    /// pending deliveries (`failed`, "endpoint disabled"); enabling a disabled one starts it fresh (no failure
    /// run, no reason; what happened while it was disabled is not sent). The change and its `webhook.updated` row
    /// commit together; an empty patch changes nothing and writes no row.
    pub async fn update_webhook(
        &self,
        account_id: &str,
        id: &str,
        patch: &WebhookPatch,
        actor: &Actor,
    ) -> Result<WebhookEndpoint, StoreError> {
        if patch.is_empty() {
            return self.webhook(account_id, id).await;
        }
        if let Some(events) = &patch.events {
            check_events(events)?;
        }
        let description = patch
            .description
            .as_ref()
            .map(|d| check_description(d.as_deref()))
            .transpose()?;
        let mut tx = self.begin_write().await?;
        // Locks the row (a no-op update) before reading it, so concurrent patches apply one after the other.
        let locked = sqlx::query(
            "UPDATE webhook_endpoints SET enabled = enabled WHERE id = $1 AND account_id = $2",
        )
        .bind(id)
        .bind(account_id)
        .execute(&mut *tx)
        .await?;
        if locked.rows_affected() == 0 {
            return Err(StoreError::NotFound(Entity::Webhook));
        }
        let before = endpoint_in(&mut tx, account_id, id).await?;
        let mut after = before.clone();
        if let Some(url) = &patch.url {
            after.url = url.clone();
        }
        if let Some(events) = &patch.events {
            after.events = events.clone();
        }
        if let Some(description) = description {
            after.description = description;
        }
        match patch.enabled {
            Some(true) if !before.enabled => {
                after.enabled = true;
                after.failing_since = None;
                after.disabled_reason = None;
            }
            Some(false) if before.enabled => {
                after.enabled = false;
                after.failing_since = None;
                after.disabled_reason = Some("disabled by the account".to_owned());
                drop_pending(&mut tx, id, "endpoint disabled by the account").await?;
            }
            _ => {}
        }
        sqlx::query(
            "UPDATE webhook_endpoints SET url = $3, description = $4, events = $5, enabled = $6, \
             failing_since = $7, disabled_reason = $8 WHERE id = $1 AND account_id = $2",
        )
        .bind(id)
        .bind(account_id)
        .bind(&after.url)
        .bind(after.description.as_deref())
        .bind(events_to_json(&after.events))
        .bind(i64::from(after.enabled))
        .bind(after.failing_since.map(|t| t.0))
        .bind(after.disabled_reason.as_deref())
        .execute(&mut *tx)
        .await?;
        audit::record(
            &mut tx,
            account_id,
            actor,
            Action::WebhookUpdated,
            id,
            &after.details(),
        )
        .await?;
        tx.commit().await?;
        Ok(after)
    }

    /// Deletes one of the account's endpoints, with its deliveries and its log. Of concurrent deletes one
    /// succeeds, the others find it gone.
    pub async fn delete_webhook(
        &self,
        account_id: &str,
        id: &str,
        actor: &Actor,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query(
            "DELETE FROM webhook_endpoints WHERE id = $1 AND account_id = $2 RETURNING url",
        )
        .bind(id)
        .bind(account_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::NotFound(Entity::Webhook))?;
        let url: String = row.try_get("url")?;
        audit::record(
            &mut tx,
            account_id,
            actor,
            Action::WebhookDeleted,
            id,
            &serde_json::json!({ "url": url }),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Replaces an endpoint's signing secret with `secret` (made by the caller): every attempt from now on, retries
    /// of earlier events included, is signed with it. The rotation and its `webhook.secret_rotated` row (never a
    /// secret) commit together.
    pub async fn rotate_webhook_secret(
        &self,
        account_id: &str,
        id: &str,
        secret: &str,
        actor: &Actor,
    ) -> Result<WebhookEndpoint, StoreError> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE webhook_endpoints SET secret = $3 WHERE id = $1 AND account_id = $2",
        )
        .bind(id)
        .bind(account_id)
        .bind(secret)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(Entity::Webhook));
        }
        let endpoint = endpoint_in(&mut tx, account_id, id).await?;
        audit::record(
            &mut tx,
            account_id,
            actor,
            Action::WebhookSecretRotated,
            id,
            &serde_json::json!({ "url": endpoint.url }),
        )
        .await?;
        tx.commit().await?;
        Ok(endpoint)
    }

    /// The endpoint's attempts, newest first (`at`, then id), `limit` from `offset`; another account's endpoint
    /// is not found.
    pub async fn webhook_attempts(
        &self,
        account_id: &str,
        endpoint_id: &str,
        limit: i64,
        offset: i64,
    ) -> Result<AttemptPage, StoreError> {
        // One read transaction, so the total and the page come from the same snapshot.
        let mut tx = self.read.begin().await?;
        endpoint_in(&mut tx, account_id, endpoint_id).await?;
        let total: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM webhook_attempts WHERE endpoint_id = $1")
                .bind(endpoint_id)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
        let rows = sqlx::query(
            "SELECT id, event_id, event_type, attempt, at, status_code, duration_ms, error FROM webhook_attempts \
             WHERE endpoint_id = $1 ORDER BY at DESC, id DESC LIMIT $2 OFFSET $3",
        )
        .bind(endpoint_id)
        .bind(limit)
        .bind(offset)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let results = rows
            .iter()
            .map(|r| {
                Ok(AttemptRow {
                    id: r.try_get("id")?,
                    event_id: r.try_get("event_id")?,
                    event_type: r.try_get("event_type")?,
                    attempt: r.try_get("attempt")?,
                    at: Micros(r.try_get("at")?),
                    status_code: r.try_get("status_code")?,
                    duration_ms: r.try_get("duration_ms")?,
                    error: r.try_get("error")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        Ok(AttemptPage { total, results })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_trimmed_bounded_and_blank_is_none() {
        assert_eq!(check_description(None).unwrap(), None);
        assert_eq!(check_description(Some("  ")).unwrap(), None);
        assert_eq!(
            check_description(Some(" CRM ")).unwrap().as_deref(),
            Some("CRM")
        );
        assert!(check_description(Some(&"a".repeat(MAX_WEBHOOK_DESCRIPTION_CHARS))).is_ok());
        assert!(check_description(Some(&"a".repeat(MAX_WEBHOOK_DESCRIPTION_CHARS + 1))).is_err());
        assert!(check_description(Some("a\u{0}b")).is_err());
    }

    #[test]
    fn a_new_endpoint_never_shows_its_secret() {
        let new = NewWebhook {
            url: "https://example.com/hook".to_owned(),
            events: vec![EventType::LinkCreated],
            description: None,
            secret: "whsec_c2VjcmV0c2VjcmV0c2VjcmV0".to_owned(),
        };
        assert!(!format!("{new:?}").contains("whsec_"));
    }
}
