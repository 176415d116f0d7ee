//! The activity log (audit trail): one row per change to an account's links, groups, API key, members, domains or
//! the account itself, written by [`record`] on the change's own transaction, so a change rolled back leaves no row
//! and a committed change always has one. Rows say who acted ([`Actor`]), what they did ([`Action`]), to what, and
//! a JSON object of what changed: never a secret, a password or a key.

use crate::domain::Micros;
use crate::error::StoreError;
use crate::sql_chunks::MultiRow;
use sqlx::AnyConnection;

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
    /// A link was created (one row per link, bulk creations included).
    LinkCreated,
    /// A link's destination, group, expiry or query forwarding changed (with or without its state).
    LinkUpdated,
    /// A link was deleted.
    LinkDeleted,
    /// A link was paused (a change of `is_active` alone, to false).
    LinkPaused,
    /// A link was resumed (a change of `is_active` alone, to true).
    LinkResumed,
    /// A group was created.
    GroupCreated,
    /// A group was renamed or its settings replaced.
    GroupUpdated,
    /// A group was deleted (its links moved to the default group).
    GroupDeleted,
    /// A group's signing key was replaced (the key is never in the row).
    GroupKeyRotated,
    /// The account's API key was generated or regenerated (the key is never in the row).
    ApiKeyGenerated,
    /// The account's API key was revoked.
    ApiKeyRevoked,
    /// Someone was invited to join the account.
    MemberInvited,
    /// An invitation was accepted.
    MemberJoined,
    /// A member's role changed.
    MemberRoleChanged,
    /// A member was removed (or left).
    MemberRemoved,
    /// The account was renamed.
    AccountRenamed,
    /// A custom domain of the account was added.
    DomainAdded,
    /// A custom domain of the account was disabled.
    DomainDisabled,
    /// A webhook endpoint was created.
    WebhookCreated,
    /// A webhook endpoint's URL, events, description or state changed.
    WebhookUpdated,
    /// A webhook endpoint was deleted.
    WebhookDeleted,
    /// A webhook endpoint's signing secret was replaced (the secret is never in the row).
    WebhookSecretRotated,
    /// A tag was renamed, or merged into another tag of the account.
    TagRenamed,
    /// A tag was removed from every link.
    TagDeleted,
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
            Self::WebhookCreated => "webhook.created",
            Self::WebhookUpdated => "webhook.updated",
            Self::WebhookDeleted => "webhook.deleted",
            Self::WebhookSecretRotated => "webhook.secret_rotated",
            Self::TagRenamed => "tag.renamed",
            Self::TagDeleted => "tag.deleted",
        }
    }

    /// What the row's target is (`link`, `group`, `api_key`, `member`, `account`, `domain`, `webhook`, `tag`).
    pub fn target_type(self) -> &'static str {
        match self {
            Self::LinkCreated
            | Self::LinkUpdated
            | Self::LinkDeleted
            | Self::LinkPaused
            | Self::LinkResumed => "link",
            Self::GroupCreated
            | Self::GroupUpdated
            | Self::GroupDeleted
            | Self::GroupKeyRotated => "group",
            Self::ApiKeyGenerated | Self::ApiKeyRevoked => "api_key",
            Self::MemberInvited
            | Self::MemberJoined
            | Self::MemberRoleChanged
            | Self::MemberRemoved => "member",
            Self::AccountRenamed => "account",
            Self::DomainAdded | Self::DomainDisabled => "domain",
            Self::WebhookCreated
            | Self::WebhookUpdated
            | Self::WebhookDeleted
            | Self::WebhookSecretRotated => "webhook",
            Self::TagRenamed | Self::TagDeleted => "tag",
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

/// One row for [`record_many`].
pub(crate) struct Entry<'a> {
    /// Whose log.
    pub(crate) account_id: &'a str,
    /// Who acted.
    pub(crate) actor: &'a Actor,
    /// What they did.
    pub(crate) action: Action,
    /// To what.
    pub(crate) target_id: &'a str,
    /// What changed (a JSON object).
    pub(crate) details: serde_json::Value,
}

/// [`record`] for several rows at once, on `conn` (the changes' own transaction), all at the same time: a batch
/// of link creations costs one statement, not one per link. The rows keep the order of `entries` (their ids
/// increase in that order).
pub(crate) async fn record_many(
    conn: &mut AnyConnection,
    entries: &[Entry<'_>],
) -> Result<(), StoreError> {
    let at = Micros::now().0;
    for (chunk, values) in MultiRow::of(conn).split(entries, 8) {
        let sql = format!(
            "INSERT INTO audit_log (account_id, at, actor_type, actor_email, action, target_type, target_id, \
             details) VALUES {values}"
        );
        let mut q = sqlx::query(&sql);
        for e in chunk {
            q = q
                .bind(e.account_id)
                .bind(at)
                .bind(e.actor.kind())
                .bind(e.actor.email())
                .bind(e.action.as_str())
                .bind(e.action.target_type())
                .bind(e.target_id)
                .bind(e.details.to_string());
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::pool::Db;

    /// A fresh, migrated SQLite database in a directory of its own, removed by the caller.
    async fn fresh() -> (Db, std::path::PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("shortlink-audit-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db::connect(&format!("sqlite://{}", dir.join("db.sqlite").display()), 2)
            .await
            .unwrap();
        db.migrate().await.unwrap();
        (db, dir)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_row_lives_and_dies_with_its_transaction() {
        let (db, dir) = fresh().await;
        let account = db.create_account("audit@example.com", true).await.unwrap();
        let before = db.audit_log(&account.id, 100, 0).await.unwrap().total;
        let details = serde_json::json!({ "name": "Promo" });

        // Rolled back (dropped without commit): no row.
        let mut tx = db.begin_write().await.unwrap();
        record(
            &mut tx,
            &account.id,
            &Actor::Operator,
            Action::GroupCreated,
            "g1",
            &details,
        )
        .await
        .unwrap();
        let entries = [Entry {
            account_id: &account.id,
            actor: &Actor::ApiKey,
            action: Action::LinkCreated,
            target_id: "l1",
            details: serde_json::json!({}),
        }];
        record_many(&mut tx, &entries).await.unwrap();
        drop(tx);
        assert_eq!(
            db.audit_log(&account.id, 100, 0).await.unwrap().total,
            before
        );

        // Committed: both rows, newest (highest id) first.
        let mut tx = db.begin_write().await.unwrap();
        record(
            &mut tx,
            &account.id,
            &Actor::Operator,
            Action::GroupCreated,
            "g1",
            &details,
        )
        .await
        .unwrap();
        record_many(&mut tx, &entries).await.unwrap();
        tx.commit().await.unwrap();
        let page = db.audit_log(&account.id, 100, 0).await.unwrap();
        assert_eq!(page.total, before + 2);
        let (newest, older) = (&page.results[0], &page.results[1]);
        assert_eq!(
            (
                newest.action.as_str(),
                newest.actor_type.as_str(),
                newest.target_id.as_str()
            ),
            ("link.created", "api_key", "l1")
        );
        assert_eq!(
            (
                older.action.as_str(),
                older.target_type.as_str(),
                &older.details
            ),
            ("group.created", "group", &details)
        );
        db.close().await;
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_change_writes_no_row() {
        let (db, dir) = fresh().await;
        let account = db
            .create_account("refused@example.com", true)
            .await
            .unwrap();
        let before = db.audit_log(&account.id, 100, 0).await.unwrap().total;
        let actor = Actor::User {
            id: "u1".to_owned(),
            email: "someone@example.com".to_owned(),
        };
        // The default group cannot be deleted; an unknown group is not found; a name of 101 characters is refused.
        assert!(
            db.delete_group(Some(&account.id), &account.default_group_id, &actor)
                .await
                .is_err()
        );
        assert!(
            db.rotate_group_key(Some(&account.id), &uuid::Uuid::new_v4().to_string(), &actor)
                .await
                .is_err()
        );
        let long = "a".repeat(101);
        assert!(
            db.create_group(&account.id, &long, &Default::default(), &actor)
                .await
                .is_err()
        );
        assert_eq!(
            db.audit_log(&account.id, 100, 0).await.unwrap().total,
            before
        );

        // A change that goes through: one row, the user's email kept.
        let group = db
            .create_group(&account.id, "Promo", &Default::default(), &actor)
            .await
            .unwrap();
        let page = db.audit_log(&account.id, 100, 0).await.unwrap();
        assert_eq!(page.total, before + 1);
        let row = &page.results[0];
        assert_eq!(row.action, "group.created");
        assert_eq!(row.target_id, group.id);
        assert_eq!(row.actor_email.as_deref(), Some("someone@example.com"));
        assert_eq!(row.details["name"], "Promo");
        assert!(
            !row.details.to_string().contains(&group.key),
            "never the group key"
        );
        db.close().await;
        let _ = std::fs::remove_dir_all(dir);
    }
}
