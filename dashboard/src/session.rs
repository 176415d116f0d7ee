//! The session cookie and the signed-in extractor. The cookie holds a [`SecretToken`] (the store keeps its
//! hash); the CSRF token of the session's forms is derived from it, so it needs no storage and dies with it.

use crate::DashboardState;
use crate::error::DashboardError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use cookie::{Cookie, SameSite};
use shortlink_store::domain::Permission;
use shortlink_store::domain::SecretToken;
use shortlink_store::{Acting, Actor, SESSION_ABSOLUTE_MICROS, SessionAccount, SessionUser};
use subtle::ConstantTimeEq;

/// The cookie over plain http (development).
const PLAIN_COOKIE: &str = "shortlink_session";
/// Over https: the `__Host-` prefix makes the browser refuse it unless Secure, host-only and `Path=/`.
const SECURE_COOKIE: &str = "__Host-shortlink_session";

fn cookie_name(secure: bool) -> &'static str {
    if secure { SECURE_COOKIE } else { PLAIN_COOKIE }
}

/// `Set-Cookie` for a new session: HttpOnly, SameSite=Lax, Secure over https, gone with the session's
/// absolute lifetime (its idle expiry is the server's).
pub(crate) fn set_cookie(token: &SecretToken, secure: bool) -> HeaderValue {
    let cookie = Cookie::build((cookie_name(secure), token.expose().to_owned()))
        .path("/")
        .http_only(true)
        .secure(secure)
        .same_site(SameSite::Lax)
        .max_age(cookie::time::Duration::seconds(
            SESSION_ABSOLUTE_MICROS / 1_000_000,
        ))
        .build();
    HeaderValue::from_str(&cookie.to_string()).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// `Set-Cookie` that removes the session cookie.
pub(crate) fn clear_cookie(secure: bool) -> HeaderValue {
    let cookie = Cookie::build((cookie_name(secure), ""))
        .path("/")
        .http_only(true)
        .secure(secure)
        .same_site(SameSite::Lax)
        .max_age(cookie::time::Duration::ZERO)
        .build();
    HeaderValue::from_str(&cookie.to_string()).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The session token the request carries, if any well-formed one.
pub(crate) fn token(headers: &HeaderMap, secure: bool) -> Option<SecretToken> {
    let name = cookie_name(secure);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .and_then(|c| SecretToken::parse(c.value()))
}

/// A request from a signed-in member of an account; anything else is sent to the sign-in page (or, for a user
/// who belongs to no account any more, to a page that says so).
#[derive(Debug, Clone)]
pub(crate) struct SignedIn {
    /// Whose session it is, and their accounts.
    pub(crate) user: SessionUser,
    /// The account they are looking at, and their role in it.
    pub(crate) account: SessionAccount,
    /// The session (to end it, or to keep it when the password changes).
    pub(crate) token: SecretToken,
    /// The CSRF token every form of this session carries.
    pub(crate) csrf: String,
}

impl SignedIn {
    /// Who acts, for the activity log.
    pub(crate) fn actor(&self) -> Actor {
        Actor::User {
            id: self.user.user_id.clone(),
            email: self.user.email.clone(),
        }
    }

    /// Who acts on members, with their role in the current account.
    pub(crate) fn acting(&self) -> Acting {
        Acting {
            actor: self.actor(),
            role: self.account.role,
        }
    }

    /// Whether the member's role allows `p`.
    pub(crate) fn may(&self, p: Permission) -> bool {
        self.account.role.may(p)
    }

    /// Refuses (403, a readable page) what the member's role does not allow: a forged post for a control the page
    /// did not show.
    pub(crate) fn require(&self, p: Permission) -> Result<(), DashboardError> {
        if self.may(p) {
            Ok(())
        } else {
            Err(DashboardError::Forbidden)
        }
    }

    /// Refuses a form whose CSRF token is not this session's (constant-time comparison).
    pub(crate) fn check_csrf(&self, presented: &str) -> Result<(), DashboardError> {
        if bool::from(self.csrf.as_bytes().ct_eq(presented.as_bytes())) {
            Ok(())
        } else {
            Err(DashboardError::CsrfToken)
        }
    }
}

impl FromRequestParts<DashboardState> for SignedIn {
    type Rejection = DashboardError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &DashboardState,
    ) -> Result<Self, Self::Rejection> {
        let token =
            token(&parts.headers, state.secure_cookies).ok_or(DashboardError::SignInRequired)?;
        let mut user = state
            .db
            .session(&token)
            .await?
            .ok_or(DashboardError::SignInRequired)?;
        let csrf = token.derive("csrf");
        let Some(account) = user.account.take() else {
            return Err(DashboardError::NoAccount { csrf });
        };
        Ok(SignedIn {
            user,
            account,
            csrf,
            token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_attributes() {
        let t = SecretToken::generate();
        let plain = set_cookie(&t, false);
        let plain = plain.to_str().unwrap();
        assert!(plain.starts_with("shortlink_session="), "{plain}");
        for attr in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=1209600"] {
            assert!(plain.contains(attr), "{plain} lacks {attr}");
        }
        assert!(!plain.contains("Secure"), "{plain}");
        let secure = set_cookie(&t, true);
        let secure = secure.to_str().unwrap();
        assert!(
            secure.starts_with("__Host-shortlink_session=") && secure.contains("Secure"),
            "{secure}"
        );
    }

    #[test]
    fn reads_its_own_cookie_only() {
        let t = SecretToken::generate();
        let mut h = HeaderMap::new();
        let value = format!("other=1; shortlink_session={}; x=y", t.expose());
        h.insert(header::COOKIE, HeaderValue::from_str(&value).unwrap());
        assert_eq!(token(&h, false).unwrap().expose(), t.expose());
        assert!(token(&h, true).is_none());
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("shortlink_session=not-a-token"),
        );
        assert!(token(&h, false).is_none());
    }
}
