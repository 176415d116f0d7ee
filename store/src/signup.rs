//! Sign-up (`--signup open`): anyone makes a user and an account they own, with its default group and no API
//! key, and is signed in. Attempts are throttled per client address before any work is done, by the password
//! throttle's reservation ([`crate::password_throttle`]) on a subject of their own, so they never eat into the
//! sign-in budget of the same address: at most [`crate::THROTTLE_FAILURES`] sign-ups (successful or not) per
//! address in any [`crate::THROTTLE_WINDOW_MICROS`], exact under concurrency.

use crate::accounts::{insert_account, normalise_email};
use crate::audit::{self, Action, Actor};
use crate::domain::{Micros, Password, Role};
use crate::error::StoreError;
use crate::password_throttle::Reserved;
use crate::pool::Db;
use crate::web_auth::{NewSession, insert_membership, insert_session, insert_user};
use serde_json::json;

/// What a sign-up came to.
#[derive(Debug)]
pub enum SignUp {
    /// The user and their account were made, and this session signed in.
    Created {
        /// The new session (the cookie's value).
        session: NewSession,
        /// The account made.
        account_id: String,
    },
    /// A user or an account with this email exists already (nothing was made).
    Taken,
    /// Too many sign-ups from this address: try again in this many seconds (nothing was looked at).
    Throttled {
        /// Seconds until an attempt is counted again.
        retry_after: i64,
    },
}

/// The throttle's subject for sign-ups from a client address (bounded like [`crate::web_auth`]'s).
fn signup_ip_subject(ip: &str) -> String {
    format!("signup-ip:{}", ip.chars().take(64).collect::<String>())
}

impl Db {
    /// Makes a user of `email` with `password` who owns a new account (named by the email, with API access as
    /// `admin account create` gives by default, its default group and no API key) and signs them in, writing
    /// the account's first activity row (`member.joined`, by the new user). `ip` is the client address's
    /// throttle key: the attempt is counted before anything is looked up or hashed. An email that is not one is
    /// [`StoreError::Invalid`], refused before it is counted.
    pub async fn sign_up(
        &self,
        email: &str,
        password: &Password,
        ip: &str,
    ) -> Result<SignUp, StoreError> {
        let email = normalise_email(email)?;
        let now = Micros::now().0;
        match self.reserve_check(&[signup_ip_subject(ip)], now).await? {
            Reserved::Go(_) => {}
            Reserved::Throttled(retry_after) => return Ok(SignUp::Throttled { retry_after }),
        }
        // A taken email costs a read, not an argon2 computation (the insertions below decide under concurrency).
        let taken = sqlx::query(
            "SELECT 1 AS x FROM users WHERE email = $1 UNION ALL SELECT 1 AS x FROM accounts WHERE email = $1",
        )
        .bind(&email)
        .fetch_optional(&self.read)
        .await?;
        if taken.is_some() {
            return Ok(SignUp::Taken);
        }
        let phc = self.hashing.hash(password).await?;
        let mut tx = self.begin_write().await?;
        let account = match insert_account(&mut tx, &email, true, now).await {
            Ok(a) => a,
            Err(StoreError::Conflict(_)) => return Ok(SignUp::Taken),
            Err(e) => return Err(e),
        };
        let user_id = match insert_user(&mut tx, &email, &phc, now).await {
            Ok(id) => id,
            Err(StoreError::Conflict(_)) => return Ok(SignUp::Taken),
            Err(e) => return Err(e),
        };
        insert_membership(&mut tx, &account.id, &user_id, Role::Owner, now).await?;
        let actor = Actor::User {
            id: user_id.clone(),
            email: email.clone(),
        };
        audit::record(
            &mut tx,
            &account.id,
            &actor,
            Action::MemberJoined,
            &email,
            &json!({ "email": email, "role": Role::Owner.as_str(), "via": "sign_up" }),
        )
        .await?;
        let session = insert_session(&mut tx, &user_id, Some(&account.id), now).await?;
        tx.commit().await?;
        Ok(SignUp::Created {
            session,
            account_id: account.id,
        })
    }
}
