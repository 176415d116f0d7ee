//! The API key page (spec 5.3): generate, regenerate, revoke, each confirmed with the current password
//! ([`crate::reauth`]). The key is shown once, on the response that made it.

use super::{Done, nav, see_other, show_time};
use crate::DashboardState;
use crate::client::ClientKey;
use crate::error::DashboardError;
use crate::reauth::{self, ConfirmForm};
use crate::session::SignedIn;
use crate::views::{ConfirmPage, KeyPage, KeyView, render};
use axum::Form;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use shortlink_store::domain::Permission;

async fn page(
    state: &DashboardState,
    user: &SignedIn,
    new_key: Option<String>,
    notice: Option<&'static str>,
) -> Result<Response, DashboardError> {
    user.require(Permission::ManageApiKey)?;
    let key = state.db.api_key_info(&user.account.account_id).await?.map(
        |(masked, created, last_used)| KeyView {
            masked,
            created_at: show_time(&created),
            last_used_at: last_used.as_deref().map(show_time),
        },
    );
    Ok(render(&KeyPage {
        nav: nav(user, "key"),
        title: "API key",
        key,
        new_key,
        notice,
    })
    .into_response())
}

/// `GET /dashboard/key`: the masked key, or the button to make one.
pub(crate) async fn show(
    State(state): State<DashboardState>,
    user: SignedIn,
    Query(done): Query<Done>,
) -> Result<Response, DashboardError> {
    page(&state, &user, None, done.notice()).await
}

/// The three confirmations: title, message, the path they post to, the button.
const GENERATE: (&str, &str, &str, &str) = (
    "Generate an API key?",
    "The key is shown once, on the next page. Anyone who has it can manage this account's links.",
    "/dashboard/key/generate",
    "Generate key",
);
const REGENERATE: (&str, &str, &str, &str) = (
    "Regenerate the API key?",
    "The current key stops working at once: requests with it get 401. The new key is shown once.",
    "/dashboard/key/regenerate",
    "Regenerate key",
);
const REVOKE: (&str, &str, &str, &str) = (
    "Revoke the API key?",
    "The key stops working at once and is not replaced: requests with it get 401. You can generate a new key at any time.",
    "/dashboard/key/revoke",
    "Revoke key",
);

fn confirm_page(
    user: &SignedIn,
    (title, message, action, button): (&str, &str, &str, &'static str),
) -> ConfirmPage {
    ConfirmPage {
        nav: nav(user, "key"),
        title: title.to_owned(),
        message: message.to_owned(),
        csrf: user.csrf.clone(),
        action: action.to_owned(),
        button,
        cancel: "/dashboard/key".to_owned(),
        password: true,
        error: None,
    }
}

/// `GET /dashboard/key/generate`: the confirmation.
pub(crate) async fn confirm_generate(user: SignedIn) -> Result<Response, DashboardError> {
    user.require(Permission::ManageApiKey)?;
    Ok(render(&confirm_page(&user, GENERATE)).into_response())
}

/// `GET /dashboard/key/regenerate`: the confirmation.
pub(crate) async fn confirm_regenerate(user: SignedIn) -> Result<Response, DashboardError> {
    user.require(Permission::ManageApiKey)?;
    Ok(render(&confirm_page(&user, REGENERATE)).into_response())
}

/// `GET /dashboard/key/revoke`: the confirmation.
pub(crate) async fn confirm_revoke(user: SignedIn) -> Result<Response, DashboardError> {
    user.require(Permission::ManageApiKey)?;
    Ok(render(&confirm_page(&user, REVOKE)).into_response())
}

/// `POST /dashboard/key/generate`, with the password.
pub(crate) async fn generate(
    State(state): State<DashboardState>,
    user: SignedIn,
    ClientKey(client): ClientKey,
    Form(form): Form<ConfirmForm>,
) -> Result<Response, DashboardError> {
    new_key(&state, &user, &client, &form, GENERATE).await
}

/// `POST /dashboard/key/regenerate`, with the password.
pub(crate) async fn regenerate(
    State(state): State<DashboardState>,
    user: SignedIn,
    ClientKey(client): ClientKey,
    Form(form): Form<ConfirmForm>,
) -> Result<Response, DashboardError> {
    new_key(&state, &user, &client, &form, REGENERATE).await
}

/// A new key replaces any old one at once. The answer is the page itself (not a redirect), marked no-store by the
/// security layer: the key exists in this response only.
async fn new_key(
    state: &DashboardState,
    user: &SignedIn,
    client: &str,
    form: &ConfirmForm,
    which: (&str, &str, &str, &'static str),
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageApiKey)?;
    if let Some(refused) =
        reauth::confirm(state, user, client, form, confirm_page(user, which)).await?
    {
        return Ok(refused);
    }
    let key = state
        .db
        .generate_api_key(&user.account.account_id, &user.actor())
        .await?;
    page(state, user, Some(key.expose().to_owned()), None).await
}

/// `POST /dashboard/key/revoke`, with the password.
pub(crate) async fn revoke(
    State(state): State<DashboardState>,
    user: SignedIn,
    ClientKey(client): ClientKey,
    Form(form): Form<ConfirmForm>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageApiKey)?;
    if let Some(refused) =
        reauth::confirm(&state, &user, &client, &form, confirm_page(&user, REVOKE)).await?
    {
        return Ok(refused);
    }
    state
        .db
        .revoke_api_key(&user.account.account_id, &user.actor())
        .await?;
    Ok(see_other("/dashboard/key?done=revoked"))
}
