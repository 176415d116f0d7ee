//! The activity log (audit trail): one row per change to an account's links, groups, API key, members, domains or
//! the account itself, written by [`record`] on the change's own transaction, so a change rolled back leaves no row
//! and a committed change always has one. Rows say who acted ([`Actor`]), what they did ([`Action`]), to what, and
//! a JSON object of what changed: never a secret, a password or a key.

use crate::domain::Micros;
use crate::error::StoreError;
use crate::pool::Db;
use sqlx::{AnyConnection, Row};

/// How long rows are kept unless the operator says otherwise.
pub const DEFAULT_AUDIT_RETENTION_DAYS: u32 = 365;

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A person signed in to the dashboard.
    User {
        /// The user's id.
        id: String,
        /// Their email, kept in the row so it still reads after they leave.
        email: String,
    },
    /// The account's API key.
    ApiKey,
    /// The operator, through the `admin` CLI.
    Operator,
}

impl Actor {
    /// The `actor.type` of the row.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::User { .. } => "user",
            Self::ApiKey => "api_key",
            Self::Operator => "operator",
        }
    }

    fn email(&self) -> Option<&str> {
        match self {
            Self::User { email, .. } => Some(email),
            Self::ApiKey | Self::Operator => None,
        }
    }
}

/// What was done (the row's `action`, exact names from the issue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    LinkCreated,
    LinkUpdated,
    LinkDeleted,
    LinkPaused,
    LinkResumed,
    GroupCreated,
    GroupUpdated,
    GroupDeleted,
    GroupKeyRotated,
    ApiKeyGenerated,
    ApiKeyRevoked,
    MemberInvited,
    MemberJoined,
    MemberRoleChanged,
    MemberRemoved,
    AccountRenamed,
    DomainAdded,
    DomainDisabled,
}

impl Action {
    /// The action's name in the log and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LinkCreated => "link.created",
            Self::LinkUpdated => "link.updated",
            Self::LinkDeleted => "link.deleted",
            Self::LinkPaused => "link.paused",
            Self::LinkResumed => "link.resumed",
            Self::GroupCreated => "group.created",
            Self::GroupUpdated => "group.updated",
            Self::GroupDeleted => "group.deleted",
            Self::GroupKeyRotated => "group.key_rotated",
            Self::ApiKeyGenerated => "api_key.generated",
            Self::ApiKeyRevoked => "api_key.revoked",
            Self::MemberInvited => "member.invited",
            Self::MemberJoined => "member.joined",
            Self::MemberRoleChanged => "member.role_changed",
            Self::MemberRemoved => "member.removed",
            Self::AccountRenamed => "account.renamed",
            Self::DomainAdded => "domain.added",
            Self::DomainDisabled => "domain.disabled",
        }
    }

    /// What the row's target is (`link`, `group`, `api_key`, `member`, `account`, `domain`).
    pub fn target_type(self) -> &'static str {
        match self {
            Self::LinkCreated
            | Self::LinkUpdated
            | Self::LinkDeleted
            | Self::LinkPaused
            | Self::LinkResumed => "link",
            Self::GroupCreated | Self::GroupUpdated | Self::GroupDeleted | Self::GroupKeyRotated => {
                "group"
            }
            Self::ApiKeyGenerated | Self::ApiKeyRevoked => "api_key",
            Self::MemberInvited
            | Self::MemberJoined
            | Self::MemberRoleChanged
            | Self::MemberRemoved => "member",
            Self::AccountRenamed => "account",
            Self::DomainAdded | Self::DomainDisabled => "domain",
        }
    }
}

/// Writes one row on `conn`, which must be the change's own transaction. `target_id` identifies the target (a
/// link's or group's id, a member's email, the account's id); `details` is a JSON object of what changed.
pub(crate) async fn record(
    conn: &mut AnyConnection,
    account_id: &str,
    actor: &Actor,
    action: Action,
    target_id: &str,
    details: &serde_json::Value,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO audit_log (account_id, at, actor_type, actor_email, action, target_type, target_id, details) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(account_id)
    .bind(Micros::now().0)
    .bind(actor.kind())
    .bind(actor.email())
    .bind(action.as_str())
    .bind(action.target_type())
    .bind(target_id)
    .bind(details.to_string())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// One row of the log as the API and the Activity page show it.
#[derive(Debug, Clone)]
pub struct AuditEntry {
    /// The row's id (increasing).
    pub id: i64,
    /// When (microseconds since the epoch).
    pub at: Micros,
    /// `user`, `api_key` or `operator`.
    pub actor_type: String,
    /// The user's email when `actor_type` is `user`.
    pub actor_email: Option<String>,
    /// The action's name.
    pub action: String,
    /// What kind of thing was changed.
    pub target_type: String,
    /// Which one.
    pub target_id: String,
    /// What changed (a JSON object).
    pub details: serde_json::Value,
}

/// A page of the log, newest first, and how many rows the account has.
#[derive(Debug, Clone)]
pub struct AuditPage {
    /// All of the account's rows.
    pub total: i64,
    /// The page.
    pub results: Vec<AuditEntry>,
}

impl Db {
    /// The account's log, newest first (`at`, then insertion order), `limit` rows from `offset`.
    pub async fn audit_log(
        &self,
        account_id: &str,
        limit: i64,
        offset: i64,
    ) -> Result<AuditPage, StoreError> {
        let total: i64 = sqlx::query("SELECT COUNT(*) AS n FROM audit_log WHERE account_id = $1")
            .bind(account_id)
            .fetch_one(&self.read)
            .await?
            .try_get("n")?;
        let rows = sqlx::query(
            "SELECT id, at, actor_type, actor_email, action, target_type, target_id, details FROM audit_log \
             WHERE account_id = $1 ORDER BY at DESC, id DESC LIMIT $2 OFFSET $3",
        )
        .bind(account_id)
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.read)
        .await?;
        let results = rows
            .iter()
            .map(|r| {
                let details: String = r.try_get("details")?;
                Ok(AuditEntry {
                    id: r.try_get("id")?,
                    at: Micros(r.try_get("at")?),
                    actor_type: r.try_get("actor_type")?,
                    actor_email: r.try_get("actor_email")?,
                    action: r.try_get("action")?,
                    target_type: r.try_get("target_type")?,
                    target_id: r.try_get("target_id")?,
                    details: serde_json::from_str(&details)
                        .map_err(|e| StoreError::Internal(format!("audit details: {e}")))?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(AuditPage { total, results })
    }

    /// Deletes rows older than `before` (the hourly maintenance); returns how many went.
    pub async fn prune_audit_log(&self, before: Micros) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM audit_log WHERE at < $1")
            .bind(before.0)
            .execute(&self.write)
            .await?
            .rows_affected())
    }
}
