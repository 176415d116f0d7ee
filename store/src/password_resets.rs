//! "Forgot password": a one-use link, valid one hour, that sets a new password and ends every session of the
//! user. Tokens are [`SecretToken`]s, stored as hashes only; a newer link of a user replaces the older.
//!
//! Asking for a link answers the same whether the email is a user's or not, and does the same database work
//! either way: the throttle's reservation, then one transaction of two statements whose `WHERE` finds the user
//! or nothing. Requests are throttled per email and per client address by the password throttle's reservation
//! ([`crate::password_throttle`]) on subjects of their own (`reset-email:`, `reset-ip:`), so they never use up
//! the sign-in budget: at most [`crate::THROTTLE_FAILURES`] requests per email and per address in any
//! [`crate::THROTTLE_WINDOW_MICROS`], exact under concurrency, whether the email exists or not.

use crate::accounts::normalise_email;
use crate::domain::{Micros, Password, SecretToken};
use crate::error::StoreError;
use crate::password_throttle::Reserved;
use crate::pool::Db;
use crate::web_auth::email_subject;
use sqlx::Row;

/// How long a reset link works (the rule: one hour).
pub const RESET_TTL_MICROS: i64 = 3_600 * 1_000_000;

/// What asking for a reset link came to. The caller must answer [`ResetRequest::Accepted`] the same way whether
/// it carries a link or not.
#[derive(Debug)]
pub enum ResetRequest {
    /// Counted and done. `Some` when the email is an enabled user's: mail them the token; `None` otherwise
    /// (nothing to mail, and nothing to tell the asker).
    Accepted(Option<ResetLink>),
    /// Too many requests for this email or from this address: try again in this many seconds.
    Throttled {
        /// Seconds until a request is counted again.
        retry_after: i64,
    },
}

/// A fresh reset link's token and where to mail it.
#[derive(Debug, Clone)]
pub struct ResetLink {
    /// The token for the URL; exists only here from now on.
    pub token: SecretToken,
    /// The user's email (normalised).
    pub email: String,
    /// When it stops working.
    pub expires_at: Micros,
}

/// What using a reset link came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordReset {
    /// The password is set, the link spent, and every session of the user ended.
    Done {
        /// The user whose password it is.
        user_id: String,
    },
    /// The link is unknown, used, replaced or expired (or its user disabled): nothing changed.
    Gone,
}

fn reset_email_subject(email: &str) -> String {
    format!("reset-email:{email}")
}

fn reset_ip_subject(ip: &str) -> String {
    format!("reset-ip:{}", ip.chars().take(64).collect::<String>())
}

impl Db {
    /// Asks for a reset link for `email` from `ip` (the client address's throttle key). Counted per email and per
    /// address first; then, in one transaction, the user's earlier links are deleted and a new one is stored
    /// when `email` is an enabled user's. The same statements run for an unknown email (they find no user).
    pub async fn request_password_reset(
        &self,
        email: &str,
        ip: &str,
    ) -> Result<ResetRequest, StoreError> {
        // Not an email: counted by its trimmed, lowercased text all the same, and answered the same.
        let email = normalise_email(email).unwrap_or_else(|_| email.trim().to_lowercase());
        let email: String = email.chars().take(254).collect();
        let now = Micros::now().0;
        let subjects = [reset_email_subject(&email), reset_ip_subject(ip)];
        match self.reserve_check(&subjects, now).await? {
            Reserved::Go(_) => {}
            Reserved::Throttled(retry_after) => return Ok(ResetRequest::Throttled { retry_after }),
        }
        let token = SecretToken::generate();
        let expires_at = now + RESET_TTL_MICROS;
        let mut tx = self.begin_write().await?;
        // One live link per user: a newer one replaces the older (concurrent requests for one email take turns).
        self.serialise_on(&mut tx, &format!("password-reset:{email}"))
            .await?;
        sqlx::query(
            "DELETE FROM password_resets WHERE user_id IN (SELECT id FROM users WHERE email = $1)",
        )
        .bind(&email)
        .execute(&mut *tx)
        .await?;
        let stored = sqlx::query(
            "INSERT INTO password_resets (token_hash, user_id, created_at, expires_at) \
             SELECT $1, id, $2, $3 FROM users WHERE email = $4 AND disabled = 0 RETURNING user_id",
        )
        .bind(token.hash())
        .bind(now)
        .bind(expires_at)
        .bind(&email)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(ResetRequest::Accepted(stored.map(|_| ResetLink {
            token,
            email,
            expires_at: Micros(expires_at),
        })))
    }

    /// Whether a reset link can be used now (its page shows the form, or says it cannot be used).
    pub async fn password_reset_is_live(&self, token: &SecretToken) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT 1 AS x FROM password_resets r JOIN users u ON u.id = r.user_id \
             WHERE r.token_hash = $1 AND r.expires_at > $2 AND u.disabled = 0",
        )
        .bind(token.hash())
        .bind(Micros::now().0)
        .fetch_optional(&self.read)
        .await?;
        Ok(row.is_some())
    }

    /// Sets `password` through a reset link: the link is spent (`DELETE … RETURNING`, so of concurrent uses
    /// exactly one succeeds), the user's other links go, every session of the user ends (nobody is signed in:
    /// they sign in with the new password), and the sign-in throttle's failures of their email are cleared
    /// (holding the link proves the mailbox is theirs). A link that is unknown, used or expired costs a read,
    /// never an argon2 computation.
    pub async fn reset_password(
        &self,
        token: &SecretToken,
        password: &Password,
    ) -> Result<PasswordReset, StoreError> {
        if !self.password_reset_is_live(token).await? {
            return Ok(PasswordReset::Gone);
        }
        let phc = self.hashing.hash(password).await?;
        let now = Micros::now().0;
        let mut tx = self.begin_write().await?;
        let spent = sqlx::query(
            "DELETE FROM password_resets WHERE token_hash = $1 RETURNING user_id, expires_at",
        )
        .bind(token.hash())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(spent) = spent else {
            // Used a moment ago by a concurrent request.
            return Ok(PasswordReset::Gone);
        };
        let user_id: String = spent.try_get("user_id")?;
        if spent.try_get::<i64, _>("expires_at")? <= now {
            // Expired while the password was hashed: spent all the same (it could never be used again).
            tx.commit().await?;
            return Ok(PasswordReset::Gone);
        }
        let updated = sqlx::query(
            "UPDATE users SET password_hash = $1 WHERE id = $2 AND disabled = 0 RETURNING email",
        )
        .bind(&phc)
        .bind(&user_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(updated) = updated else {
            tx.commit().await?;
            return Ok(PasswordReset::Gone);
        };
        let email: String = updated.try_get("email")?;
        sqlx::query("DELETE FROM password_resets WHERE user_id = $1")
            .bind(&user_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM sessions WHERE user_id = $1")
            .bind(&user_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM sign_in_failures WHERE subject = $1")
            .bind(email_subject(&email))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(PasswordReset::Done { user_id })
    }
}
