//! The dashboard's one error type, each variant mapped explicitly to a status and a page. Validation problems
//! are not errors here: they are shown next to their field on the re-rendered form.

use crate::views::{ErrorPage, render};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use shortlink_store::StoreError;

/// Why a dashboard request was not served.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    /// No such page, or a link or group that is not the signed-in account's (the same answer for both).
    #[error("not found")]
    NotFound,
    /// No live session: go and sign in.
    #[error("sign-in required")]
    SignInRequired,
    /// A form without this session's CSRF token.
    #[error("CSRF token missing or wrong")]
    CsrfToken,
    /// The member's role does not allow this (a control the page did not show).
    #[error("forbidden by role")]
    Forbidden,
    /// The signed-in user belongs to no account (any more): a page that says so, with a sign-out button.
    #[error("no account")]
    NoAccount {
        /// The session's CSRF token, for the sign-out form.
        csrf: String,
    },
    /// A form posted from another site.
    #[error("cross-site post")]
    CrossSite,
    /// A form body over [`crate::MAX_FORM_BYTES`].
    #[error("form too large")]
    TooLarge,
    /// The account made its budget of changes for the last minute: retry after this many seconds.
    #[error("too many changes")]
    TooManyChanges {
        /// Seconds until one more change is allowed.
        retry_after: i64,
    },
    /// An export's search or filters break the list's rules (a hand-made address: the page never links one).
    #[error("bad filters")]
    BadFilters,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl IntoResponse for DashboardError {
    fn into_response(self) -> Response {
        let (status, title, message) = match &self {
            Self::SignInRequired => {
                return (
                    [(header::CACHE_CONTROL, "no-store")],
                    Redirect::to("/dashboard/sign-in"),
                )
                    .into_response();
            }
            Self::NotFound | Self::Store(StoreError::NotFound(_)) => (
                StatusCode::NOT_FOUND,
                "Not found",
                "There is nothing here, or it is not yours.",
            ),
            Self::Forbidden | Self::Store(StoreError::Forbidden) => (
                StatusCode::FORBIDDEN,
                "Not allowed",
                "Your role in this account does not allow this. Nothing was changed; an admin or owner can change your role.",
            ),
            Self::Store(StoreError::LastOwner) => (
                StatusCode::CONFLICT,
                "An account needs an owner",
                "This would leave the account without an owner. Nothing was changed: make another member an owner first.",
            ),
            Self::NoAccount { csrf } => {
                return (
                    StatusCode::FORBIDDEN,
                    render(&crate::views::NoAccountPage {
                        nav: None,
                        title: "No account",
                        csrf: csrf.clone(),
                    }),
                )
                    .into_response();
            }
            Self::CsrfToken | Self::CrossSite => (
                StatusCode::FORBIDDEN,
                "Form refused",
                "This form was not sent from this dashboard's page, or the page is too old. Go back, reload the page and try again.",
            ),
            Self::BadFilters => (
                StatusCode::BAD_REQUEST,
                "Filters refused",
                "The search or filters of this export are not valid. Go back to Links, correct them and export again.",
            ),
            Self::TooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "Form too large",
                "This form sent more than the dashboard accepts. Go back and shorten what you typed.",
            ),
            Self::Store(StoreError::Busy { retry_after }) => {
                return too_many(
                    "Try again in a moment",
                    "Too many people are signing in or confirming passwords right now. Nothing was changed; try again in a few seconds.",
                    *retry_after,
                );
            }
            Self::TooManyChanges { retry_after } => {
                return too_many(
                    "Too many changes",
                    "You made as many changes in the last minute as an account may. Nothing was changed; go back and try again in a minute.",
                    *retry_after,
                );
            }
            Self::Store(StoreError::Unavailable(_)) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "Try again in a moment",
                "The service is busy right now. Nothing was changed.",
            ),
            Self::Store(e) => {
                // Logged without the request's data: the store's messages name no secret.
                tracing::error!(error = %e, "dashboard request failed");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Something went wrong",
                    "The request failed on our side and has been logged.",
                )
            }
        };
        (
            status,
            render(&ErrorPage {
                nav: None,
                title,
                message,
            }),
        )
            .into_response()
    }
}

/// A 429 page that says when to come back (`Retry-After`, seconds).
fn too_many(title: &'static str, message: &'static str, retry_after: i64) -> Response {
    let page = render(&ErrorPage {
        nav: None,
        title,
        message,
    });
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, retry_after.to_string())],
        page,
    )
        .into_response()
}
