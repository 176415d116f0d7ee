//! The dashboard's sign-in: passwords (argon2id), one-use invitations, sessions with idle and absolute expiry,
//! and the throttle on failed sign-ins. Invitation tokens and session ids are [`SecretToken`]s: handed out once,
//! stored as hashes. Password hashing is CPU work of tens of milliseconds, so it runs on the blocking pool.

use crate::accounts::normalise_email;
use crate::domain::{Micros, Password, SecretToken};
use crate::error::{Entity, StoreError};
use crate::pool::Db;
use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use sqlx::Row;

/// How long an invitation can be used (the rule: 72 hours).
pub const INVITE_TTL_MICROS: i64 = 72 * 3_600 * 1_000_000;
/// A session unused for this long is over.
pub const SESSION_IDLE_MICROS: i64 = 24 * 3_600 * 1_000_000;
/// A session is over this long after sign-in, however active.
pub const SESSION_ABSOLUTE_MICROS: i64 = 14 * 24 * 3_600 * 1_000_000;
/// Failed sign-ins counted per email and per IP address…
pub const THROTTLE_FAILURES: i64 = 10;
/// …within this window; the eleventh attempt waits until the oldest of them leaves it.
pub const THROTTLE_WINDOW_MICROS: i64 = 15 * 60 * 1_000_000;
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

/// A PHC hash of nothing anyone can type, verified against when the email is unknown, so that an unknown email
/// takes as long to refuse as a wrong password.
fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_blocking(SecretToken::generate().expose()).unwrap_or_default())
}

fn hash_blocking(password: &str) -> Result<String, StoreError> {
    let salt: [u8; 16] = rand::random();
    let salt = SaltString::encode_b64(&salt).map_err(|e| StoreError::Internal(e.to_string()))?;
    // Argon2::default() is argon2id, v19, m = 19 MiB, t = 2, p = 1: OWASP's recommended minimum.
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| StoreError::Internal(e.to_string()))
}

fn verify_blocking(password: &str, phc: &str) -> bool {
    // The comparison inside argon2's verify is constant-time.
    PasswordHash::new(phc).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

async fn hash(password: &Password) -> Result<String, StoreError> {
    let password = password.expose().to_owned();
    tokio::task::spawn_blocking(move || hash_blocking(&password))
        .await
        .map_err(|e| StoreError::Internal(e.to_string()))?
}

async fn verify(password: &str, phc: Option<String>) -> Result<bool, StoreError> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || match phc {
        Some(phc) => verify_blocking(&password, &phc),
        None => {
            let _ = verify_blocking(&password, decoy_hash());
            false
        }
    })
    .await
    .map_err(|e| StoreError::Internal(e.to_string()))
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
        let phc = hash(password).await?;
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

    /// A sign-in attempt from `ip`. Refused attempts are counted per email and per address; past
    /// [`THROTTLE_FAILURES`] in [`THROTTLE_WINDOW_MICROS`] on either, the password is not even checked.
    pub async fn sign_in(
        &self,
        email: &str,
        password: &str,
        ip: &str,
    ) -> Result<SignIn, StoreError> {
        // An email that is not one is still counted (by its trimmed, lowercased text), so typos cannot probe.
        let email = normalise_email(email).unwrap_or_else(|_| email.trim().to_lowercase());
        let email: String = email.chars().take(254).collect();
        let subjects = [format!("email:{email}"), format!("ip:{ip}")];
        let now = Micros::now().0;
        if let Some(retry_after) = self.throttled(&subjects, now).await? {
            return Ok(SignIn::Throttled { retry_after });
        }
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
        let matches = verify(password, phc).await?;
        let mut tx = self.begin_write().await?;
        match account {
            Some((account_id, false)) if matches => {
                sqlx::query("DELETE FROM sign_in_failures WHERE subject = $1")
                    .bind(&subjects[0])
                    .execute(&mut *tx)
                    .await?;
                let session = insert_session(&mut tx, &account_id, now).await?;
                tx.commit().await?;
                Ok(SignIn::Ok(session))
            }
            _ => {
                for subject in &subjects {
                    sqlx::query("DELETE FROM sign_in_failures WHERE subject = $1 AND at <= $2")
                        .bind(subject)
                        .bind(now - THROTTLE_WINDOW_MICROS)
                        .execute(&mut *tx)
                        .await?;
                    sqlx::query("INSERT INTO sign_in_failures (subject, at) VALUES ($1, $2)")
                        .bind(subject)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(SignIn::Refused)
            }
        }
    }

    /// Seconds until the busier of the subjects may try again, or None when neither is throttled.
    async fn throttled(&self, subjects: &[String], now: i64) -> Result<Option<i64>, StoreError> {
        let mut wait = None;
        for subject in subjects {
            // The THROTTLE_FAILURES-th newest failure in the window: once it leaves, an attempt is allowed.
            let row = sqlx::query(
                "SELECT at FROM sign_in_failures WHERE subject = $1 AND at > $2 ORDER BY at DESC LIMIT 1 OFFSET $3",
            )
            .bind(subject)
            .bind(now - THROTTLE_WINDOW_MICROS)
            .bind(THROTTLE_FAILURES - 1)
            .fetch_optional(&self.read)
            .await?;
            if let Some(r) = row {
                let at: i64 = r.try_get("at")?;
                let secs = (at + THROTTLE_WINDOW_MICROS - now + 999_999) / 1_000_000;
                wait = Some(wait.unwrap_or(0).max(secs.max(1)));
            }
        }
        Ok(wait)
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

    /// Changes the password after checking the current one; the account's other sessions end. False when the
    /// current password is wrong.
    pub async fn change_password(
        &self,
        account_id: &str,
        keep: &SecretToken,
        current: &str,
        new: &Password,
    ) -> Result<bool, StoreError> {
        let phc: Option<String> = sqlx::query("SELECT password_hash FROM accounts WHERE id = $1")
            .bind(account_id)
            .fetch_optional(&self.read)
            .await?
            .ok_or(StoreError::NotFound(Entity::Account))?
            .try_get("password_hash")?;
        if !verify(current, phc).await? {
            return Ok(false);
        }
        let new_phc = hash(new).await?;
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
        Ok(true)
    }

    /// Sets a password directly (the operator's seeding of a demo account); other sessions end.
    pub async fn set_password(
        &self,
        account_id: &str,
        password: &Password,
    ) -> Result<(), StoreError> {
        let phc = hash(password).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argon2id_round_trip() {
        let phc = hash_blocking("correct horse battery").unwrap();
        assert!(phc.starts_with("$argon2id$v=19$"), "{phc}");
        assert!(verify_blocking("correct horse battery", &phc));
        assert!(!verify_blocking("correct horse batterz", &phc));
        assert!(!verify_blocking("correct horse battery", "not a hash"));
        // A fresh salt each time.
        assert_ne!(phc, hash_blocking("correct horse battery").unwrap());
    }
}
