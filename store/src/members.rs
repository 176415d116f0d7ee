//! Teams: invitations to join an account with a role, the members of an account, changing their roles, removing
//! them, renaming the account, and the operator's user controls. Every rule is checked here against the acting
//! member's role ([`Role::may_manage`]); the dashboard only hides what a role may not use. Each change writes its
//! activity-log row in its own transaction ([`crate::audit`]).
//!
//! The last-owner rule is exact under concurrency: every change that can take an owner away serialises on the
//! account ([`Db::serialise_on`]; SQLite's one write lock does it there) before it counts the owners.

use crate::accounts::normalise_email;
use crate::audit::{self, Action, Actor};
use crate::domain::{Micros, Password, Role, SecretToken};
use crate::error::{Entity, StoreError};
use crate::pool::Db;
use crate::web_auth::{NewSession, insert_membership, insert_session, insert_user, parse_role};
use serde_json::json;
use sqlx::{AnyConnection, Row};

/// How long an invitation can be used (the rule: 72 hours).
pub const INVITE_TTL_MICROS: i64 = 72 * 3_600 * 1_000_000;
/// The longest account name, in characters after trimming.
pub const MAX_ACCOUNT_NAME_CHARS: usize = 100;

/// A new invitation: the token exists only here from now on.
#[derive(Debug, Clone)]
pub struct Invite {
    /// The token for the invitation URL.
    pub token: SecretToken,
    /// The account to join.
    pub account_id: String,
    /// Who is invited.
    pub email: String,
    /// With which role.
    pub role: Role,
    /// When the token stops working.
    pub expires_at: Micros,
}

/// A live invitation as its page shows it.
#[derive(Debug, Clone)]
pub struct InvitationView {
    /// The account to join.
    pub account_id: String,
    /// Its name.
    pub account_name: String,
    /// Who is invited.
    pub email: String,
    /// With which role.
    pub role: Role,
    /// Whether a user with that email exists (they accept signed in; others choose a password).
    pub user_exists: bool,
}

/// What accepting an invitation came to.
#[derive(Debug)]
pub enum Accepted {
    /// A new user was made and signed in.
    NewUser(NewSession),
    /// The signed-in user joined the account.
    Joined {
        /// The account joined.
        account_id: String,
    },
    /// The invitation is unknown, used or expired.
    Gone,
    /// A user with the invited email exists: they must sign in to accept.
    SignInFirst,
    /// The signed-in user is not the invited email.
    OtherUser,
}

/// A member of an account.
#[derive(Debug, Clone)]
pub struct MemberRow {
    /// The user's id.
    pub user_id: String,
    /// Their email.
    pub email: String,
    /// Their role.
    pub role: Role,
    /// When they joined.
    pub joined: Micros,
}

/// An invitation not yet accepted.
#[derive(Debug, Clone)]
pub struct PendingInvitation {
    /// Who is invited.
    pub email: String,
    /// With which role.
    pub role: Role,
    /// Until when.
    pub expires_at: Micros,
}

/// Who acts on the members, and with which role (the operator acts as an owner).
#[derive(Debug, Clone)]
pub struct Acting {
    /// For the activity log.
    pub actor: Actor,
    /// What they may do.
    pub role: Role,
}

impl Acting {
    /// The operator, through the `admin` CLI: an owner's powers.
    pub fn operator() -> Self {
        Self {
            actor: Actor::Operator,
            role: Role::Owner,
        }
    }
}

impl Db {
    /// Invites `email` to `account_id` with `role`. The actor must be allowed to manage that role; someone who is
    /// already a member is a conflict. An earlier live invitation of the same email to the account stops working.
    pub async fn invite_member(
        &self,
        account_id: &str,
        by: &Acting,
        email: &str,
        role: Role,
    ) -> Result<Invite, StoreError> {
        if !by.role.may_manage(role) {
            return Err(StoreError::Forbidden);
        }
        let email = normalise_email(email)?;
        let mut tx = self.begin_write().await?;
        let account = sqlx::query("SELECT id FROM accounts WHERE id = $1")
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?;
        if account.is_none() {
            return Err(StoreError::NotFound(Entity::Account));
        }
        let member = sqlx::query(
            "SELECT 1 AS x FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE m.account_id = $1 AND u.email = $2",
        )
        .bind(account_id)
        .bind(&email)
        .fetch_optional(&mut *tx)
        .await?;
        if member.is_some() {
            return Err(StoreError::Conflict(format!(
                "{email} is already a member of this account"
            )));
        }
        let invite = insert_invitation(&mut tx, account_id, &email, role).await?;
        audit::record(
            &mut tx,
            account_id,
            &by.actor,
            Action::MemberInvited,
            &email,
            &json!({ "email": email, "role": role.as_str() }),
        )
        .await?;
        tx.commit().await?;
        Ok(invite)
    }

    /// The operator's owner invitation (`admin account invite`): creates the account (with API access and its
    /// default group) when no account has this email. When a user with the email is already its member, the
    /// invitation still goes out: accepting it signed in changes nothing, and the operator learns nothing new.
    pub async fn invite(&self, email: &str) -> Result<Invite, StoreError> {
        let account_id = match self.find_account(email).await {
            Ok(a) => a.id,
            Err(StoreError::NotFound(Entity::Account)) => {
                match self.create_account(email, true).await {
                    Ok(a) => a.id,
                    // Created by a concurrent invitation a moment ago.
                    Err(StoreError::Conflict(_)) => self.find_account(email).await?.id,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        let email = normalise_email(email)?;
        let mut tx = self.begin_write().await?;
        let invite = insert_invitation(&mut tx, &account_id, &email, Role::Owner).await?;
        audit::record(
            &mut tx,
            &account_id,
            &Actor::Operator,
            Action::MemberInvited,
            &email,
            &json!({ "email": email, "role": Role::Owner.as_str() }),
        )
        .await?;
        tx.commit().await?;
        Ok(invite)
    }

    /// A live invitation, or None when it is unknown, used or expired (or its account is disabled).
    pub async fn invitation(
        &self,
        token: &SecretToken,
    ) -> Result<Option<InvitationView>, StoreError> {
        let row = sqlx::query(
            "SELECT i.account_id, i.email, i.role, a.name, \
             (SELECT COUNT(*) FROM users u WHERE u.email = i.email) AS users \
             FROM invitations i JOIN accounts a ON a.id = i.account_id \
             WHERE i.token_hash = $1 AND i.expires_at > $2 AND a.disabled = 0",
        )
        .bind(token.hash())
        .bind(Micros::now().0)
        .fetch_optional(&self.read)
        .await?;
        row.map(|r| {
            Ok(InvitationView {
                account_id: r.try_get("account_id")?,
                account_name: r.try_get("name")?,
                email: r.try_get("email")?,
                role: parse_role(&r.try_get::<String, _>("role")?)?,
                user_exists: r.try_get::<i64, _>("users")? > 0,
            })
        })
        .transpose()
    }

    /// Accepts an invitation as a new person: makes the user with `password`, joins the account, signs in.
    pub async fn accept_invitation_new_user(
        &self,
        token: &SecretToken,
        password: &Password,
    ) -> Result<Accepted, StoreError> {
        // Looked up before hashing: a made-up, used or expired token costs a read, never an argon2 computation.
        match self.invitation(token).await? {
            None => return Ok(Accepted::Gone),
            Some(v) if v.user_exists => return Ok(Accepted::SignInFirst),
            Some(_) => {}
        }
        let phc = self.hashing.hash(password).await?;
        let now = Micros::now().0;
        let mut tx = self.begin_write().await?;
        let Some((account_id, email, role)) = spend_invitation(&mut tx, token, now).await? else {
            return Ok(Accepted::Gone);
        };
        let user_id = match insert_user(&mut tx, &email, &phc, now).await {
            Ok(id) => id,
            // Made a moment ago by another acceptance or sign-up: the invitation stays unspent.
            Err(StoreError::Conflict(_)) => return Ok(Accepted::SignInFirst),
            Err(e) => return Err(e),
        };
        insert_membership(&mut tx, &account_id, &user_id, role, now).await?;
        let actor = Actor::User {
            id: user_id.clone(),
            email: email.clone(),
        };
        audit::record(
            &mut tx,
            &account_id,
            &actor,
            Action::MemberJoined,
            &email,
            &json!({ "email": email, "role": role.as_str() }),
        )
        .await?;
        let session = insert_session(&mut tx, &user_id, Some(&account_id), now).await?;
        tx.commit().await?;
        Ok(Accepted::NewUser(session))
    }

    /// Accepts an invitation as the signed-in user `user_id` (whose email must be the invited one) and points
    /// their session `session` at the account joined. A user who is already a member keeps their role.
    pub async fn accept_invitation_signed_in(
        &self,
        token: &SecretToken,
        user_id: &str,
        session: &SecretToken,
    ) -> Result<Accepted, StoreError> {
        let now = Micros::now().0;
        let mut tx = self.begin_write().await?;
        let user_email: String = sqlx::query("SELECT email FROM users WHERE id = $1")
            .bind(user_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound(Entity::User))?
            .try_get("email")?;
        let invited =
            sqlx::query("SELECT email FROM invitations WHERE token_hash = $1 AND expires_at > $2")
                .bind(token.hash())
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
        match invited {
            None => return Ok(Accepted::Gone),
            Some(r) if r.try_get::<String, _>("email")? != user_email => {
                return Ok(Accepted::OtherUser);
            }
            Some(_) => {}
        }
        let Some((account_id, email, role)) = spend_invitation(&mut tx, token, now).await? else {
            return Ok(Accepted::Gone);
        };
        if insert_membership(&mut tx, &account_id, user_id, role, now).await? {
            let actor = Actor::User {
                id: user_id.to_owned(),
                email: email.clone(),
            };
            audit::record(
                &mut tx,
                &account_id,
                &actor,
                Action::MemberJoined,
                &email,
                &json!({ "email": email, "role": role.as_str() }),
            )
            .await?;
        }
        sqlx::query("UPDATE sessions SET account_id = $1 WHERE id_hash = $2 AND user_id = $3")
            .bind(&account_id)
            .bind(session.hash())
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Accepted::Joined { account_id })
    }

    /// Makes the user with `email` (created with `password` when there is none, else given it) a member of
    /// `account_id` with `role`, at once: the operator's seeding of demo accounts (`admin member add`); people
    /// join through invitations. A user who already is a member keeps their role.
    pub async fn add_member_with_password(
        &self,
        account_id: &str,
        email: &str,
        role: Role,
        password: &Password,
    ) -> Result<String, StoreError> {
        let email = normalise_email(email)?;
        let user_id = match self.set_password(&email, password).await {
            Ok(id) => id,
            Err(StoreError::NotFound(Entity::User)) => {
                let phc = self.hashing.hash(password).await?;
                let mut tx = self.begin_write().await?;
                let id = insert_user(&mut tx, &email, &phc, Micros::now().0).await?;
                tx.commit().await?;
                id
            }
            Err(e) => return Err(e),
        };
        let mut tx = self.begin_write().await?;
        crate::pool::require_account_in(&mut tx, account_id).await?;
        if insert_membership(&mut tx, account_id, &user_id, role, Micros::now().0).await? {
            audit::record(
                &mut tx,
                account_id,
                &Actor::Operator,
                Action::MemberJoined,
                &email,
                &json!({ "email": email, "role": role.as_str() }),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(user_id)
    }

    /// The account's members, owners first, then by when they joined.
    pub async fn members(&self, account_id: &str) -> Result<Vec<MemberRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT m.user_id, u.email, m.role, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE m.account_id = $1 ORDER BY m.created_at, u.email",
        )
        .bind(account_id)
        .fetch_all(&self.read)
        .await?;
        let mut members = rows
            .iter()
            .map(|r| {
                Ok(MemberRow {
                    user_id: r.try_get("user_id")?,
                    email: r.try_get("email")?,
                    role: parse_role(&r.try_get::<String, _>("role")?)?,
                    joined: Micros(r.try_get("created_at")?),
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        members.sort_by(|a, b| b.role.cmp(&a.role).then(a.joined.0.cmp(&b.joined.0)));
        Ok(members)
    }

    /// The account's live invitations, newest first.
    pub async fn pending_invitations(
        &self,
        account_id: &str,
    ) -> Result<Vec<PendingInvitation>, StoreError> {
        let rows = sqlx::query(
            "SELECT email, role, expires_at FROM invitations WHERE account_id = $1 AND expires_at > $2 \
             ORDER BY created_at DESC",
        )
        .bind(account_id)
        .bind(Micros::now().0)
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(PendingInvitation {
                    email: r.try_get("email")?,
                    role: parse_role(&r.try_get::<String, _>("role")?)?,
                    expires_at: Micros(r.try_get("expires_at")?),
                })
            })
            .collect()
    }

    /// Gives the member `user_id` the role `to`. The actor must be allowed to manage both their current role and
    /// `to`; the last owner cannot be demoted.
    pub async fn change_role(
        &self,
        account_id: &str,
        by: &Acting,
        user_id: &str,
        to: Role,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        self.serialise_on(&mut tx, &owners_key(account_id)).await?;
        let (email, from) = member_in(&mut tx, account_id, user_id).await?;
        if !by.role.may_manage(from) || !by.role.may_manage(to) {
            return Err(StoreError::Forbidden);
        }
        if from == to {
            return Ok(());
        }
        if from == Role::Owner && owners_in(&mut tx, account_id).await? <= 1 {
            return Err(StoreError::LastOwner);
        }
        sqlx::query("UPDATE memberships SET role = $1 WHERE account_id = $2 AND user_id = $3")
            .bind(to.as_str())
            .bind(account_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        audit::record(
            &mut tx,
            account_id,
            &by.actor,
            Action::MemberRoleChanged,
            &email,
            &json!({ "email": email, "from": from.as_str(), "to": to.as_str() }),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes the member `user_id` (leaving is removing oneself). The actor must be allowed to manage their
    /// role; the last owner cannot be removed. Their sessions lose the account at once ([`Db::session`] reads
    /// the membership on every request).
    pub async fn remove_member(
        &self,
        account_id: &str,
        by: &Acting,
        user_id: &str,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        self.serialise_on(&mut tx, &owners_key(account_id)).await?;
        let (email, role) = member_in(&mut tx, account_id, user_id).await?;
        if !by.role.may_manage(role) {
            return Err(StoreError::Forbidden);
        }
        if role == Role::Owner && owners_in(&mut tx, account_id).await? <= 1 {
            return Err(StoreError::LastOwner);
        }
        sqlx::query("DELETE FROM memberships WHERE account_id = $1 AND user_id = $2")
            .bind(account_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        audit::record(
            &mut tx,
            account_id,
            &by.actor,
            Action::MemberRemoved,
            &email,
            &json!({ "email": email, "role": role.as_str() }),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The member with `email` (the operator's commands name members by email).
    pub async fn member_by_email(
        &self,
        account_id: &str,
        email: &str,
    ) -> Result<MemberRow, StoreError> {
        let email = normalise_email(email)?;
        self.members(account_id)
            .await?
            .into_iter()
            .find(|m| m.email == email)
            .ok_or(StoreError::NotFound(Entity::Member))
    }

    /// Renames the account (owners only): 1 to 100 characters after trimming, no control characters.
    pub async fn rename_account(
        &self,
        account_id: &str,
        by: &Acting,
        name: &str,
    ) -> Result<(), StoreError> {
        if !by.role.may(crate::domain::Permission::ManageOwners) {
            return Err(StoreError::Forbidden);
        }
        let name = validate_account_name(name)?;
        let mut tx = self.begin_write().await?;
        let from: String = sqlx::query("SELECT name FROM accounts WHERE id = $1")
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound(Entity::Account))?
            .try_get("name")?;
        if from == name {
            return Ok(());
        }
        sqlx::query("UPDATE accounts SET name = $1 WHERE id = $2")
            .bind(&name)
            .bind(account_id)
            .execute(&mut *tx)
            .await?;
        audit::record(
            &mut tx,
            account_id,
            &by.actor,
            Action::AccountRenamed,
            account_id,
            &json!({ "from": from, "to": name }),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Disables (or re-enables) a user (the operator's `admin user disable`): they cannot sign in, and every
    /// session of theirs ends now.
    pub async fn set_user_disabled(&self, email: &str, disabled: bool) -> Result<(), StoreError> {
        let email = normalise_email(email)?;
        let mut tx = self.begin_write().await?;
        let row = sqlx::query("UPDATE users SET disabled = $1 WHERE email = $2 RETURNING id")
            .bind(i64::from(disabled))
            .bind(&email)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound(Entity::User))?;
        let user_id: String = row.try_get("id")?;
        if disabled {
            sqlx::query("DELETE FROM sessions WHERE user_id = $1")
                .bind(&user_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// The advisory-lock key of an account's owner count.
fn owners_key(account_id: &str) -> String {
    format!("owners:{account_id}")
}

/// Checks an account name: trimmed, 1–100 characters, no control characters.
pub fn validate_account_name(raw: &str) -> Result<String, StoreError> {
    if raw.chars().count() > MAX_ACCOUNT_NAME_CHARS * 2 {
        return Err(StoreError::Invalid(format!(
            "the account name is longer than {MAX_ACCOUNT_NAME_CHARS} characters"
        )));
    }
    let name = raw.trim();
    if name.is_empty() {
        return Err(StoreError::Invalid("the account name is empty".to_owned()));
    }
    if name.chars().count() > MAX_ACCOUNT_NAME_CHARS {
        return Err(StoreError::Invalid(format!(
            "the account name is longer than {MAX_ACCOUNT_NAME_CHARS} characters"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(StoreError::Invalid(
            "the account name has a control character".to_owned(),
        ));
    }
    Ok(name.to_owned())
}

/// Replaces the account's earlier invitation of `email` with a new one.
async fn insert_invitation(
    tx: &mut AnyConnection,
    account_id: &str,
    email: &str,
    role: Role,
) -> Result<Invite, StoreError> {
    let token = SecretToken::generate();
    let now = Micros::now().0;
    let expires_at = Micros(now + INVITE_TTL_MICROS);
    sqlx::query("DELETE FROM invitations WHERE account_id = $1 AND email = $2")
        .bind(account_id)
        .bind(email)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO invitations (token_hash, account_id, email, role, created_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(token.hash())
    .bind(account_id)
    .bind(email)
    .bind(role.as_str())
    .bind(now)
    .bind(expires_at.0)
    .execute(&mut *tx)
    .await?;
    Ok(Invite {
        token,
        account_id: account_id.to_owned(),
        email: email.to_owned(),
        role,
        expires_at,
    })
}

/// Spends a live invitation: deleting the row is what spends it, so of two concurrent uses one deletes it and
/// the other finds nothing. Returns its account, email and role.
async fn spend_invitation(
    tx: &mut AnyConnection,
    token: &SecretToken,
    now: i64,
) -> Result<Option<(String, String, Role)>, StoreError> {
    let row = sqlx::query(
        "DELETE FROM invitations WHERE token_hash = $1 AND expires_at > $2 \
         AND account_id IN (SELECT id FROM accounts WHERE disabled = 0) RETURNING account_id, email, role",
    )
    .bind(token.hash())
    .bind(now)
    .fetch_optional(&mut *tx)
    .await?;
    row.map(|r| {
        Ok((
            r.try_get("account_id")?,
            r.try_get("email")?,
            parse_role(&r.try_get::<String, _>("role")?)?,
        ))
    })
    .transpose()
}

/// A member's email and role, inside the change's transaction; not a member: not found.
async fn member_in(
    tx: &mut AnyConnection,
    account_id: &str,
    user_id: &str,
) -> Result<(String, Role), StoreError> {
    let row = sqlx::query(
        "SELECT u.email, m.role FROM memberships m JOIN users u ON u.id = m.user_id \
         WHERE m.account_id = $1 AND m.user_id = $2",
    )
    .bind(account_id)
    .bind(user_id)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(StoreError::NotFound(Entity::Member))?;
    Ok((
        row.try_get("email")?,
        parse_role(&row.try_get::<String, _>("role")?)?,
    ))
}

/// How many owners the account has.
async fn owners_in(tx: &mut AnyConnection, account_id: &str) -> Result<i64, StoreError> {
    Ok(sqlx::query(
        "SELECT COUNT(*) AS n FROM memberships WHERE account_id = $1 AND role = 'owner'",
    )
    .bind(account_id)
    .fetch_one(&mut *tx)
    .await?
    .try_get("n")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_names() {
        assert_eq!(validate_account_name("  Acme  ").unwrap(), "Acme");
        assert!(validate_account_name("   ").is_err());
        assert!(validate_account_name(&"x".repeat(101)).is_err());
        assert!(validate_account_name(&"x".repeat(100)).is_ok());
        assert!(validate_account_name("a\u{7}b").is_err());
    }
}
