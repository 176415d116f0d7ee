//! The dashboard's sign-in: passwords (argon2id, [`crate::password_hashing`]), one-use invitations, sessions with
//! idle and absolute expiry, and every password check behind the throttle ([`crate::password_throttle`]).
//! Invitation tokens and session ids are [`SecretToken`]s: handed out once, stored as hashes.

use crate::accounts::normalise_email;
use crate::domain::{Micros, Password, SecretToken};
use crate::error::{Entity, StoreError};
use crate::password_throttle::{Reserved, release};
use crate::pool::Db;
use sqlx::Row;

/// How long an invitation can be used (the rule: 72 hours).
pub const INVITE_TTL_MICROS: i64 = 72 * 3_600 * 1_000_000;
/// A session unused for this long is over.
pub const SESSION_IDLE_MICROS: i64 = 24 * 3_600 * 1_000_000;
/// A session is over this long after sign-in, however active.
pub const SESSION_ABSOLUTE_MICROS: i64 = 14 * 24 * 3_600 * 1_000_000;
/// `last_seen_at` is written at most this often: a page view is a read, not a write on SQLite's one writer.
const TOUCH_EVERY_MICROS: i64 = 60 * 1_000_000;

/// An invitation made by the operator.
#[derive(Debug, Clone)]
pub struct Invite {
    /// The token for the invitation URL; exists only here from now on.
    pub token: SecretToken,
    /// The invited account.
    pub account_id: String,
    /// When the token stops working.
    pub expires_at: Micros,
}

/// A signed-in session: the cookie's value and whose it is.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// The session id for the cookie; exists only here from now on.
    pub token: SecretToken,
    /// The account.
    pub account_id: String,
}

/// The account behind a valid session.
#[derive(Debug, Clone)]
pub struct SessionAccount {
    /// Account id.
    pub account_id: String,
    /// Its email.
    pub email: String,
    /// Its default group (never deleted).
    pub default_group_id: String,
}

/// What a re-entered password came to (the confirmation of a sensitive action, the password change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PasswordCheck {
    /// It is the account's password.
    Right,
    /// It is not (counted against the account's and the address's throttle).
    Wrong,
    /// Too many failed checks for the account or the address: try again in this many seconds (not checked).
    Throttled {
        /// Seconds until a check is allowed again.
        retry_after: i64,
    },
}

/// What a sign-in attempt came to.
#[derive(Debug)]
pub enum SignIn {
    /// Signed in: a new session (a new id at every sign-in, so a planted one is never promoted).
    Ok(NewSession),
    /// Wrong email or password (the caller does not learn which), or a disabled account.
    Refused,
    /// Too many failures for the email or the address: try again in this many seconds.
    Throttled {
        /// Seconds until an attempt is counted again.
        retry_after: i64,
    },
}

impl Db {
    /// An invitation for `email`, creating the account (with API access, and its default group) when there is
    /// none. Earlier unused invitations of the account stop working: only the newest URL is live.
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
        let token = SecretToken::generate();
        let now = Micros::now().0;
        let expires_at = Micros(now + INVITE_TTL_MICROS);
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM invites WHERE account_id = $1")
            .bind(&account_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO invites (token_hash, account_id, created_at, expires_at) VALUES ($1, $2, $3, $4)")
            .bind(token.hash())
            .bind(&account_id)
            .bind(now)
            .bind(expires_at.0)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Invite {
            token,
            account_id,
            expires_at,
        })
    }

    /// The email an unused, unexpired invitation is for, or None.
    pub async fn invited_email(&self, token: &SecretToken) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT a.email FROM invites i JOIN accounts a ON a.id = i.account_id \
             WHERE i.token_hash = $1 AND i.expires_at > $2 AND a.disabled = 0",
        )
        .bind(token.hash())
        .bind(Micros::now().0)
        .fetch_optional(&self.read)
        .await?;
        Ok(row.map(|r| r.try_get("email")).transpose()?)
    }

    /// Uses an invitation: sets the password, spends the invitation, ends the account's other sessions and
    /// opens a new one. None when the invitation is unknown, used or expired.
    pub async fn accept_invite(
        &self,
        token: &SecretToken,
        password: &Password,
    ) -> Result<Option<NewSession>, StoreError> {
        // Looked up before hashing: a made-up, used or expired token costs a read, never an argon2 computation.
        if self.invited_email(token).await?.is_none() {
            return Ok(None);
        }
        let phc = self.hashing.hash(password).await?;
        let now = Micros::now().0;
        let mut tx = self.begin_write().await?;
        // Deleting the row is what spends it: of two concurrent uses, one deletes it and the other finds nothing.
        let row = sqlx::query(
            "DELETE FROM invites WHERE token_hash = $1 AND expires_at > $2 RETURNING account_id",
        )
        .bind(token.hash())
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let account_id: String = row.try_get("account_id")?;
        let updated =
            sqlx::query("UPDATE accounts SET password_hash = $1 WHERE id = $2 AND disabled = 0")
                .bind(&phc)
                .bind(&account_id)
                .execute(&mut *tx)
                .await?;
        if updated.rows_affected() == 0 {
            return Ok(None);
        }
        sqlx::query("DELETE FROM sessions WHERE account_id = $1")
            .bind(&account_id)
            .execute(&mut *tx)
            .await?;
        let session = insert_session(&mut tx, &account_id, now).await?;
        tx.commit().await?;
        Ok(Some(session))
    }

    /// A sign-in attempt from `ip` (the client address's throttle key). Each attempt is counted per email and per
    /// address before the password is checked ([`crate::password_throttle`]); past [`crate::THROTTLE_FAILURES`]
    /// failed or unfinished checks in the window on either, the password is not even looked at.
    pub async fn sign_in(
        &self,
        email: &str,
        password: &str,
        ip: &str,
    ) -> Result<SignIn, StoreError> {
        // An email that is not one is still counted (by its trimmed, lowercased text), so typos cannot probe.
        let email = normalise_email(email).unwrap_or_else(|_| email.trim().to_lowercase());
        let email: String = email.chars().take(254).collect();
        let subjects = [email_subject(&email), ip_subject(ip)];
        let now = Micros::now().0;
        let reservation = match self.reserve_check(&subjects, now).await? {
            Reserved::Go(r) => r,
            Reserved::Throttled(retry_after) => return Ok(SignIn::Throttled { retry_after }),
        };
        let row = sqlx::query("SELECT id, password_hash, disabled FROM accounts WHERE email = $1")
            .bind(&email)
            .fetch_optional(&self.read)
            .await?;
        let (account, phc) = match &row {
            Some(r) => (
                Some((
                    r.try_get::<String, _>("id")?,
                    r.try_get::<i64, _>("disabled")? != 0,
                )),
                r.try_get::<Option<String>, _>("password_hash")?,
            ),
            None => (None, None),
        };
        // Busy (no hashing permit in time): the reserved check stays counted, as a failure would. It is one of the
        // attempts the throttle allows, and a flood that makes the origin busy should not get them back.
        let matches = self.hashing.verify(password, phc).await?;
        match account {
            Some((account_id, false)) if matches => {
                let mut tx = self.begin_write().await?;
                release(&mut tx, &reservation, Some(&subjects[0])).await?;
                let session = insert_session(&mut tx, &account_id, now).await?;
                tx.commit().await?;
                Ok(SignIn::Ok(session))
            }
            // The reservation stays: it is the failure.
            _ => Ok(SignIn::Refused),
        }
    }

    /// Checks the password of a signed-in account again (changing the password, confirming a sensitive action),
    /// under the same throttle as sign-in: the account's email and the client address `ip` are each charged
    /// before the check and cleared of their failures by a right answer.
    pub async fn check_password(
        &self,
        account_id: &str,
        password: &str,
        ip: &str,
    ) -> Result<PasswordCheck, StoreError> {
        let row = sqlx::query("SELECT email, password_hash FROM accounts WHERE id = $1")
            .bind(account_id)
            .fetch_optional(&self.read)
            .await?
            .ok_or(StoreError::NotFound(Entity::Account))?;
        let email: String = row.try_get("email")?;
        let phc: Option<String> = row.try_get("password_hash")?;
        let subjects = [email_subject(&email), ip_subject(ip)];
        let reservation = match self.reserve_check(&subjects, Micros::now().0).await? {
            Reserved::Go(r) => r,
            Reserved::Throttled(retry_after) => {
                return Ok(PasswordCheck::Throttled { retry_after });
            }
        };
        if !self.hashing.verify(password, phc).await? {
            return Ok(PasswordCheck::Wrong);
        }
        let mut tx = self.begin_write().await?;
        release(&mut tx, &reservation, Some(&subjects[0])).await?;
        tx.commit().await?;
        Ok(PasswordCheck::Right)
    }

    /// The account of a live session, refreshing its idle timer; None when the session is unknown, idle too
    /// long, too old, or its account is disabled.
    pub async fn session(&self, token: &SecretToken) -> Result<Option<SessionAccount>, StoreError> {
        let now = Micros::now().0;
        let row = sqlx::query(
            "SELECT s.account_id, s.created_at, s.last_seen_at, a.email, a.default_group_id, a.disabled \
             FROM sessions s JOIN accounts a ON a.id = s.account_id WHERE s.id_hash = $1",
        )
        .bind(token.hash())
        .fetch_optional(&self.read)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let created_at: i64 = row.try_get("created_at")?;
        let last_seen_at: i64 = row.try_get("last_seen_at")?;
        if row.try_get::<i64, _>("disabled")? != 0
            || now - last_seen_at >= SESSION_IDLE_MICROS
            || now - created_at >= SESSION_ABSOLUTE_MICROS
        {
            self.end_session(token).await?;
            return Ok(None);
        }
        if now - last_seen_at >= TOUCH_EVERY_MICROS {
            sqlx::query("UPDATE sessions SET last_seen_at = $1 WHERE id_hash = $2")
                .bind(now)
                .bind(token.hash())
                .execute(&self.write)
                .await?;
        }
        Ok(Some(SessionAccount {
            account_id: row.try_get("account_id")?,
            email: row.try_get("email")?,
            default_group_id: row.try_get("default_group_id")?,
        }))
    }

    /// Ends a session (sign-out); nothing happens for an unknown one.
    pub async fn end_session(&self, token: &SecretToken) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM sessions WHERE id_hash = $1")
            .bind(token.hash())
            .execute(&self.write)
            .await?;
        Ok(())
    }

    /// Changes the password after checking the current one ([`Db::check_password`], throttled like sign-in);
    /// the account's other sessions end. Anything but [`PasswordCheck::Right`] changes nothing.
    pub async fn change_password(
        &self,
        account_id: &str,
        keep: &SecretToken,
        current: &str,
        new: &Password,
        ip: &str,
    ) -> Result<PasswordCheck, StoreError> {
        let check = self.check_password(account_id, current, ip).await?;
        if check != PasswordCheck::Right {
            return Ok(check);
        }
        let new_phc = self.hashing.hash(new).await?;
        let mut tx = self.begin_write().await?;
        sqlx::query("UPDATE accounts SET password_hash = $1 WHERE id = $2")
            .bind(&new_phc)
            .bind(account_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM sessions WHERE account_id = $1 AND id_hash <> $2")
            .bind(account_id)
            .bind(keep.hash())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(PasswordCheck::Right)
    }

    /// Deletes what can no longer be used, for the hourly maintenance: expired invitations, sessions past their
    /// idle or absolute limit, and password-check rows that left the throttle's window. Each would otherwise stay
    /// forever (an expired session goes only when its cookie comes back). Returns how many rows went.
    pub async fn prune_web_auth(&self, now: Micros) -> Result<u64, StoreError> {
        let now = now.0;
        let invites = sqlx::query("DELETE FROM invites WHERE expires_at <= $1")
            .bind(now)
            .execute(&self.write)
            .await?
            .rows_affected();
        let sessions =
            sqlx::query("DELETE FROM sessions WHERE last_seen_at <= $1 OR created_at <= $2")
                .bind(now - SESSION_IDLE_MICROS)
                .bind(now - SESSION_ABSOLUTE_MICROS)
                .execute(&self.write)
                .await?
                .rows_affected();
        Ok(invites + sessions + self.prune_password_checks(now).await?)
    }

    /// Sets a password directly (the operator's seeding of a demo account); other sessions end.
    pub async fn set_password(
        &self,
        account_id: &str,
        password: &Password,
    ) -> Result<(), StoreError> {
        let phc = self.hashing.hash(password).await?;
        let mut tx = self.begin_write().await?;
        let updated = sqlx::query("UPDATE accounts SET password_hash = $1 WHERE id = $2")
            .bind(&phc)
            .bind(account_id)
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound(Entity::Account));
        }
        sqlx::query("DELETE FROM sessions WHERE account_id = $1")
            .bind(account_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}

async fn insert_session(
    tx: &mut sqlx::AnyConnection,
    account_id: &str,
    now: i64,
) -> Result<NewSession, StoreError> {
    let token = SecretToken::generate();
    sqlx::query("INSERT INTO sessions (id_hash, account_id, created_at, last_seen_at) VALUES ($1, $2, $3, $3)")
        .bind(token.hash())
        .bind(account_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    Ok(NewSession {
        token,
        account_id: account_id.to_owned(),
    })
}

/// The throttle's subject for an email (normalised as accounts store it).
fn email_subject(email: &str) -> String {
    format!("email:{email}")
}

/// The throttle's subject for a client address key (at most an IPv6 /64 in text: bounded by the caller).
fn ip_subject(ip: &str) -> String {
    format!("ip:{}", ip.chars().take(64).collect::<String>())
}
