//! The store's one error type. Each variant is a distinct outcome a caller may answer differently (the API maps
//! them to statuses explicitly); database errors are split into "unavailable, retry" and everything else.

use crate::rate_limit::RateLimitState;
use std::fmt;

/// A kind of stored thing, for [`StoreError::NotFound`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entity {
    /// An account.
    Account,
    /// A link group.
    Group,
    /// A link domain.
    Domain,
    /// A persistent link.
    Link,
    /// A user (a person who signs in).
    User,
    /// A member of an account.
    Member,
    /// An invitation (unknown, used or expired).
    Invitation,
    /// A webhook endpoint.
    Webhook,
    /// A webhook event (of one endpoint).
    WebhookEvent,
    /// A tag of the account (that some link carries).
    Tag,
    /// A link import (of the account).
    Import,
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Account => "account",
            Self::Group => "group",
            Self::Domain => "domain",
            Self::Link => "link",
            Self::User => "user",
            Self::Member => "member",
            Self::Invitation => "invitation",
            Self::Webhook => "webhook",
            Self::WebhookEvent => "webhook event",
            Self::Tag => "tag",
            Self::Import => "import",
        })
    }
}

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The named thing does not exist.
    #[error("{0} not found")]
    NotFound(Entity),
    /// The API key was revoked or replaced after the request authenticated with it.
    #[error("the API key was revoked")]
    KeyRevoked,
    /// A value the store refuses (an email that is not one, a group name out of bounds, …).
    #[error("{0}")]
    Invalid(String),
    /// The change contradicts existing data (a duplicate email, host, …).
    #[error("{0}")]
    Conflict(String),
    /// The account's default group cannot be deleted.
    #[error("the account's default group cannot be deleted")]
    DefaultGroup,
    /// The acting member's role does not allow this (the dashboard's 403 page).
    #[error("your role does not allow this")]
    Forbidden,
    /// The change would leave the account without an owner.
    #[error("an account keeps at least one owner")]
    LastOwner,
    /// A bad configuration value.
    #[error("{0}")]
    Config(String),
    /// An invariant of ours broke (stored data that does not parse, no randomness, …).
    #[error("internal: {0}")]
    Internal(String),
    /// The database cannot be reached or is overloaded right now; the request may be retried.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// Anything else the database reported.
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    /// The key's rate limit is used up.
    #[error("rate limit exceeded")]
    RateLimited(RateLimitState),
    /// The requested short code is taken on the target domain.
    #[error("short code exists")]
    ShortCodeExists,
    /// The destination's host (or a parent domain) is on the blocklist.
    #[error("destination domain is blocked")]
    BlockedDestination,
    /// No platform domain is enabled.
    #[error("no platform domain is available")]
    PlatformDomainUnavailable,
    /// Too many password checks are running in this process: retry after this many seconds.
    #[error("busy: retry in {retry_after} s")]
    Busy {
        /// Seconds to wait.
        retry_after: i64,
    },
    /// The account has its most webhook endpoints already.
    #[error("an account has at most {0} webhook endpoints: delete one before creating another")]
    WebhookLimit(u32),
    /// The webhook endpoint is disabled (enable it first).
    #[error("the webhook endpoint is disabled: enable it first")]
    WebhookDisabled,
    /// Migrations failed.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
                Self::Unavailable(e)
            }
            // SQLite busy beyond busy_timeout, or PostgreSQL shutting down / too many clients.
            // SQLite: BUSY and LOCKED with their extended codes (BUSY_RECOVERY, BUSY_SNAPSHOT,
            // BUSY_TIMEOUT, LOCKED_SHAREDCACHE). PostgreSQL: shutting down, starting up, too many
            // connections, and class 08 (connection exceptions).
            sqlx::Error::Database(ref d)
                if matches!(
                    d.code().as_deref(),
                    Some(
                        "5" | "261"
                            | "517"
                            | "773"
                            | "6"
                            | "262"
                            | "57P01"
                            | "57P02"
                            | "57P03"
                            | "53300"
                    )
                ) || d.code().is_some_and(|c| c.starts_with("08")) =>
            {
                Self::Unavailable(e)
            }
            _ => Self::Database(e),
        }
    }
}

impl StoreError {
    /// An error of the same kind (and so the same HTTP answer) as this one, for each creation of a failed SQLite
    /// batch: database errors cannot be cloned, their text can.
    pub(crate) fn same_kind(&self) -> Self {
        match self {
            Self::Unavailable(inner) => Self::Unavailable(sqlx::Error::Protocol(inner.to_string())),
            Self::Internal(text) => Self::Internal(text.clone()),
            other => Self::Database(sqlx::Error::Protocol(other.to_string())),
        }
    }
}

/// True when `e` is a unique-constraint violation (on either engine).
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_batch_answers_every_creation_alike() {
        let busy = StoreError::Unavailable(sqlx::Error::PoolTimedOut);
        assert!(matches!(busy.same_kind(), StoreError::Unavailable(_)));
        let broken = StoreError::Database(sqlx::Error::RowNotFound);
        assert!(matches!(broken.same_kind(), StoreError::Database(_)));
        let internal = StoreError::Internal("x".to_owned());
        assert!(matches!(internal.same_kind(), StoreError::Internal(t) if t == "x"));
    }

    #[test]
    fn not_found_names_the_thing() {
        assert_eq!(
            StoreError::NotFound(Entity::Group).to_string(),
            "group not found"
        );
    }
}
