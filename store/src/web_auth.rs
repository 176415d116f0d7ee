//! The dashboard's sign-in: users' passwords (argon2id, [`crate::password_hashing`]), sessions with idle and
//! absolute expiry, and every password check behind the throttle ([`crate::password_throttle`]).
//! Session ids are [`SecretToken`]s: handed out once, stored as hashes. Invitations and memberships are
//! [`crate::members`]'s.

use crate::accounts::normalise_email;
use crate::domain::{Micros, Password, Role, SecretToken};
use crate::error::{Entity, StoreError, is_unique_violation};
use crate::ids::new_id;
use crate::password_throttle::{Reserved, release};
use crate::pool::Db;
use sqlx::Row;

/// A session unused for this long is over.
pub const SESSION_IDLE_MICROS: i64 = 24 * 3_600 * 1_000_000;
/// A session is over this long after sign-in, however active.
pub const SESSION_ABSOLUTE_MICROS: i64 = 14 * 24 * 3_600 * 1_000_000;
/// `last_seen_at` is written at most this often: a page view is a read, not a write on SQLite's one writer.
const TOUCH_EVERY_MICROS: i64 = 60 * 1_000_000;

/// A signed-in session: the cookie's value and whose it is.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// The session id for the cookie; exists only here from now on.
    pub token: SecretToken,
    /// The user.
    pub user_id: String,
}

/// The account a session is looking at, and the user's role in it.
#[derive(Debug, Clone)]
pub struct SessionAccount {
    /// Account id.
    pub account_id: String,
    /// Its name (shown on every page).
    pub name: String,
    /// The user's role in it.
    pub role: Role,
    /// Its default group (never deleted).
    pub default_group_id: String,
}

/// One of a user's accounts, for the account switcher.
#[derive(Debug, Clone)]
pub struct AccountChoice {
    /// Account id.
    pub account_id: String,
    /// Its name.
    pub name: String,
}

/// The user behind a valid session.
#[derive(Debug, Clone)]
pub struct SessionUser {
    /// User id.
    pub user_id: String,
    /// Their email.
    pub email: String,
    /// The account they are looking at; None when they belong to none (any more).
    pub account: Option<SessionAccount>,
    /// Every account they belong to, oldest membership first.
    pub accounts: Vec<AccountChoice>,
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
        let row = sqlx::query("SELECT id, password_hash, disabled FROM users WHERE email = $1")
            .bind(&email)
            .fetch_optional(&self.read)
            .await?;
        let (user, phc) = match &row {
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
        match user {
            Some((user_id, false)) if matches => {
                let mut tx = self.begin_write().await?;
                release(&mut tx, &reservation, Some(&subjects[0])).await?;
                let session = insert_session(&mut tx, &user_id, None, now).await?;
                tx.commit().await?;
                Ok(SignIn::Ok(session))
            }
            // The reservation stays: it is the failure.
            _ => Ok(SignIn::Refused),
        }
    }

    /// Checks the password of a signed-in user again (changing the password, confirming a sensitive action),
    /// under the same throttle as sign-in: the account's email and the client address `ip` are each charged
    /// before the check and cleared of their failures by a right answer.
    pub async fn check_password(
        &self,
        user_id: &str,
        password: &str,
        ip: &str,
    ) -> Result<PasswordCheck, StoreError> {
        let row = sqlx::query("SELECT email, password_hash FROM users WHERE id = $1")
            .bind(user_id)
            .fetch_optional(&self.read)
            .await?
            .ok_or(StoreError::NotFound(Entity::User))?;
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

    /// The user of a live session and the account they are looking at, refreshing the idle timer; None when the
    /// session is unknown, idle too long, too old, or its user is disabled. The membership is read on every call,
    /// so a removed member's session loses that account at once: it moves to the user's oldest remaining account
    /// (an enabled one), or to none.
    pub async fn session(&self, token: &SecretToken) -> Result<Option<SessionUser>, StoreError> {
        let now = Micros::now().0;
        let row = sqlx::query(
            "SELECT s.user_id, s.account_id, s.created_at, s.last_seen_at, u.email, u.disabled \
             FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id_hash = $1",
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
        let user_id: String = row.try_get("user_id")?;
        let looking_at: Option<String> = row.try_get("account_id")?;
        let memberships = sqlx::query(
            "SELECT m.account_id, m.role, a.name, a.default_group_id FROM memberships m \
             JOIN accounts a ON a.id = m.account_id WHERE m.user_id = $1 AND a.disabled = 0 \
             ORDER BY m.created_at, m.account_id",
        )
        .bind(&user_id)
        .fetch_all(&self.read)
        .await?;
        let mut accounts = Vec::with_capacity(memberships.len());
        let mut current = None;
        for m in &memberships {
            let account = SessionAccount {
                account_id: m.try_get("account_id")?,
                name: m.try_get("name")?,
                role: parse_role(&m.try_get::<String, _>("role")?)?,
                default_group_id: m.try_get("default_group_id")?,
            };
            accounts.push(AccountChoice {
                account_id: account.account_id.clone(),
                name: account.name.clone(),
            });
            if looking_at.as_deref() == Some(account.account_id.as_str()) {
                current = Some(account);
            }
        }
        // Not (or no longer) a member of the account the session was on: the oldest remaining one.
        if current.is_none() {
            if let Some(m) = memberships.first() {
                current = Some(SessionAccount {
                    account_id: m.try_get("account_id")?,
                    name: m.try_get("name")?,
                    role: parse_role(&m.try_get::<String, _>("role")?)?,
                    default_group_id: m.try_get("default_group_id")?,
                });
            }
        }
        let moved = current.as_ref().map(|a| a.account_id.as_str()) != looking_at.as_deref();
        if moved || now - last_seen_at >= TOUCH_EVERY_MICROS {
            sqlx::query(
                "UPDATE sessions SET last_seen_at = $1, account_id = $2 WHERE id_hash = $3",
            )
            .bind(now)
            .bind(current.as_ref().map(|a| a.account_id.clone()))
            .bind(token.hash())
            .execute(&self.write)
            .await?;
        }
        Ok(Some(SessionUser {
            user_id,
            email: row.try_get("email")?,
            account: current,
            accounts,
        }))
    }

    /// Points a session at another of its user's accounts (the account switcher). Not a member: not found.
    pub async fn switch_account(
        &self,
        token: &SecretToken,
        user_id: &str,
        account_id: &str,
    ) -> Result<(), StoreError> {
        let updated = sqlx::query(
            "UPDATE sessions SET account_id = $1 WHERE id_hash = $2 AND user_id = $3 AND EXISTS \
             (SELECT 1 FROM memberships m JOIN accounts a ON a.id = m.account_id \
              WHERE m.user_id = $3 AND m.account_id = $1 AND a.disabled = 0)",
        )
        .bind(account_id)
        .bind(token.hash())
        .bind(user_id)
        .execute(&self.write)
        .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound(Entity::Account));
        }
        Ok(())
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
    /// the user's other sessions end. Anything but [`PasswordCheck::Right`] changes nothing.
    pub async fn change_password(
        &self,
        user_id: &str,
        keep: &SecretToken,
        current: &str,
        new: &Password,
        ip: &str,
    ) -> Result<PasswordCheck, StoreError> {
        let check = self.check_password(user_id, current, ip).await?;
        if check != PasswordCheck::Right {
            return Ok(check);
        }
        let new_phc = self.hashing.hash(new).await?;
        let mut tx = self.begin_write().await?;
        sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
            .bind(&new_phc)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM sessions WHERE user_id = $1 AND id_hash <> $2")
            .bind(user_id)
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
        let invites = sqlx::query("DELETE FROM invitations WHERE expires_at <= $1")
            .bind(now)
            .execute(&self.write)
            .await?
            .rows_affected();
        let resets = sqlx::query("DELETE FROM password_resets WHERE expires_at <= $1")
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
        Ok(invites + resets + sessions + self.prune_password_checks(now).await?)
    }

    /// Sets the password of the user with `email` directly (the operator's `set-password`, the seeding of a demo
    /// account). With no such user but an account of that email (made by `admin account create`), the user is
    /// made as the account's owner. The user's sessions end. Returns the user's id.
    pub async fn set_password(
        &self,
        email: &str,
        password: &Password,
    ) -> Result<String, StoreError> {
        let email = normalise_email(email)?;
        let phc = self.hashing.hash(password).await?;
        let now = Micros::now().0;
        let mut tx = self.begin_write().await?;
        let user = sqlx::query("UPDATE users SET password_hash = $1 WHERE email = $2 RETURNING id")
            .bind(&phc)
            .bind(&email)
            .fetch_optional(&mut *tx)
            .await?;
        let user_id: String = match user {
            Some(r) => r.try_get("id")?,
            None => {
                let account = sqlx::query("SELECT id FROM accounts WHERE email = $1")
                    .bind(&email)
                    .fetch_optional(&mut *tx)
                    .await?
                    .ok_or(StoreError::NotFound(Entity::User))?;
                let account_id: String = account.try_get("id")?;
                let user_id = insert_user(&mut tx, &email, &phc, now).await?;
                insert_membership(&mut tx, &account_id, &user_id, Role::Owner, now).await?;
                user_id
            }
        };
        sqlx::query("DELETE FROM sessions WHERE user_id = $1")
            .bind(&user_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(user_id)
    }
}

/// Inserts a user; returns its id. An email taken meanwhile is a conflict.
pub(crate) async fn insert_user(
    tx: &mut sqlx::AnyConnection,
    email: &str,
    phc: &str,
    now: i64,
) -> Result<String, StoreError> {
    let id = new_id();
    let inserted = sqlx::query(
        "INSERT INTO users (id, email, password_hash, disabled, created_at) VALUES ($1, $2, $3, 0, $4)",
    )
    .bind(&id)
    .bind(email)
    .bind(phc)
    .bind(now)
    .execute(&mut *tx)
    .await;
    match inserted {
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(format!(
            "a user with email {email} exists"
        ))),
        r => r.map(|_| id).map_err(Into::into),
    }
}

/// Makes `user_id` a member of `account_id` with `role`; a user who already is keeps their role.
pub(crate) async fn insert_membership(
    tx: &mut sqlx::AnyConnection,
    account_id: &str,
    user_id: &str,
    role: Role,
    now: i64,
) -> Result<bool, StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO memberships (account_id, user_id, role, created_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (account_id, user_id) DO NOTHING",
    )
    .bind(account_id)
    .bind(user_id)
    .bind(role.as_str())
    .bind(now)
    .execute(&mut *tx)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// A stored role name; anything else is a broken invariant (the column has a CHECK).
pub(crate) fn parse_role(raw: &str) -> Result<Role, StoreError> {
    raw.parse()
        .map_err(|_| StoreError::Internal(format!("stored role {raw:?}")))
}

/// A new session of `user_id`, looking at `account_id` (None: [`Db::session`] picks their oldest account).
pub(crate) async fn insert_session(
    tx: &mut sqlx::AnyConnection,
    user_id: &str,
    account_id: Option<&str>,
    now: i64,
) -> Result<NewSession, StoreError> {
    let token = SecretToken::generate();
    sqlx::query(
        "INSERT INTO sessions (id_hash, user_id, account_id, created_at, last_seen_at) VALUES ($1, $2, $3, $4, $4)",
    )
    .bind(token.hash())
    .bind(user_id)
    .bind(account_id)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    Ok(NewSession {
        token,
        user_id: user_id.to_owned(),
    })
}

/// The throttle's subject for an email (normalised as users store it).
pub(crate) fn email_subject(email: &str) -> String {
    format!("email:{email}")
}

/// The throttle's subject for a client address key (at most an IPv6 /64 in text: bounded by the caller).
pub(crate) fn ip_subject(ip: &str) -> String {
    format!("ip:{}", ip.chars().take(64).collect::<String>())
}
