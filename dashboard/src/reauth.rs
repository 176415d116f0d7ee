//! Sensitive actions (the API key's generate, regenerate and revoke; a group's key rotation and deletion) ask for
//! the current password again on their confirmation page: a session left open on a shared computer, or a stolen
//! session cookie, is then not enough to take over the account's API access or break its dynamic links. The check
//! is the store's, throttled per account and per client address exactly like sign-in.

use crate::DashboardState;
use crate::error::DashboardError;
use crate::session::SignedIn;
use crate::views::{ConfirmPage, render};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use shortlink_store::PasswordCheck;
use shortlink_store::domain::MAX_PASSWORD_CHARS;

/// The confirmation form of a sensitive action.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(crate) struct ConfirmForm {
    pub(crate) csrf: String,
    pub(crate) password: String,
}

/// Checks the form (CSRF, then the password). `Ok(None)`: go ahead. `Ok(Some(page))`: the confirmation page
/// again, with why (422 for a wrong password, 429 with `Retry-After` when throttled); nothing was done.
pub(crate) async fn confirm(
    state: &DashboardState,
    user: &SignedIn,
    client: &str,
    form: &ConfirmForm,
    page: ConfirmPage,
) -> Result<Option<Response>, DashboardError> {
    user.check_csrf(&form.csrf)?;
    let check = if form.password.is_empty() || form.password.chars().count() > MAX_PASSWORD_CHARS {
        // Nothing typed, or longer than any password that can be set: not worth a check, nor a throttle row.
        PasswordCheck::Wrong
    } else {
        state
            .db
            .check_password(&user.user.user_id, &form.password, client)
            .await?
    };
    let refuse = |status: StatusCode, message: String| {
        ConfirmPage {
            error: Some(message),
            ..page
        }
        .into_status(status)
    };
    Ok(match check {
        PasswordCheck::Right => None,
        PasswordCheck::Wrong => Some(refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            "The password is wrong. Nothing was changed.".to_owned(),
        )),
        PasswordCheck::Throttled { retry_after } => {
            let mut r = refuse(StatusCode::TOO_MANY_REQUESTS, throttled(retry_after));
            r.headers_mut()
                .insert(header::RETRY_AFTER, retry_after.into());
            Some(r)
        }
    })
}

/// What a throttled password check says: when to try again, in whole minutes.
pub(crate) fn throttled(retry_after: i64) -> String {
    let minutes = (retry_after + 59) / 60;
    format!(
        "Too many wrong passwords. Try again in {minutes} minute{}.",
        if minutes == 1 { "" } else { "s" }
    )
}

impl ConfirmPage {
    fn into_status(self, status: StatusCode) -> Response {
        (status, render(&self)).into_response()
    }
}
