//! The API key page (spec 5.3): generate, regenerate, revoke. The key is shown once, on the response that made it.

use super::{Done, nav, see_other, show_time};
use crate::DashboardState;
use crate::error::DashboardError;
use crate::forms::CsrfOnly;
use crate::session::SignedIn;
use crate::views::{ConfirmPage, KeyPage, KeyView, render};
use axum::Form;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};

async fn page(
    state: &DashboardState,
    user: &SignedIn,
    new_key: Option<String>,
    notice: Option<&'static str>,
) -> Result<Response, DashboardError> {
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
        csrf: user.csrf.clone(),
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

/// `POST /dashboard/key/generate` and `/regenerate`: a new key replaces any old one at once. The answer is the
/// page itself (not a redirect), marked no-store by the security layer: the key exists in this response only.
pub(crate) async fn generate(
    State(state): State<DashboardState>,
    user: SignedIn,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    let key = state.db.generate_api_key(&user.account.account_id).await?;
    page(&state, &user, Some(key.expose().to_owned()), None).await
}

fn confirm(
    user: &SignedIn,
    title: &str,
    message: &str,
    action: &str,
    button: &'static str,
) -> Response {
    render(&ConfirmPage {
        nav: nav(user, "key"),
        title: title.to_owned(),
        message: message.to_owned(),
        csrf: user.csrf.clone(),
        action: action.to_owned(),
        button,
        cancel: "/dashboard/key".to_owned(),
    })
    .into_response()
}

/// `GET /dashboard/key/regenerate`: the confirmation.
pub(crate) async fn confirm_regenerate(user: SignedIn) -> Response {
    confirm(
        &user,
        "Regenerate the API key?",
        "The current key stops working at once: requests with it get 401. The new key is shown once.",
        "/dashboard/key/regenerate",
        "Regenerate key",
    )
}

/// `GET /dashboard/key/revoke`: the confirmation.
pub(crate) async fn confirm_revoke(user: SignedIn) -> Response {
    confirm(
        &user,
        "Revoke the API key?",
        "The key stops working at once and is not replaced: requests with it get 401. You can generate a new key at any time.",
        "/dashboard/key/revoke",
        "Revoke key",
    )
}

/// `POST /dashboard/key/revoke`.
pub(crate) async fn revoke(
    State(state): State<DashboardState>,
    user: SignedIn,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    state.db.revoke_api_key(&user.account.account_id).await?;
    Ok(see_other("/dashboard/key?done=revoked"))
}
