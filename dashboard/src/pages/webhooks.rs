//! Webhooks (admins and owners, like the API key: account-level integration settings): the account's endpoints
//! with the API's capabilities. Add one (its signing secret shown once, on the response that made it), change its
//! URL, events and description, send a test event, disable and enable it, rotate its secret, delete it; read its
//! delivery log (50 a page, newest first) and redeliver an event. URLs are checked as the API checks them
//! (`webhook-sender`: form, then the host resolving to public addresses, unless the operator allows private
//! targets); the store enforces the rest (at most 20 endpoints, descriptions) and writes the activity rows.

use super::{Done, charge_change, nav, see_other, show_time, uuid};
use crate::DashboardState;
use crate::error::DashboardError;
use crate::forms::CsrfOnly;
use crate::session::SignedIn;
use crate::views::{
    ConfirmPage, DeliveryItem, EventChoice, WebhookForm, WebhookItem, WebhookPage, WebhooksPage,
    render,
};
use axum::Form;
use axum::extract::{Path, Query, RawForm, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use shortlink_store::domain::Permission;
use shortlink_store::{
    EventType, MAX_WEBHOOKS_PER_ACCOUNT, NewWebhook, StoreError, UnknownEvent, WebhookEndpoint,
    WebhookPatch,
};
use std::time::Duration;
use webhook_sender::{UrlError, WebhookSecret};

/// Delivery-log rows per page (as Activity).
const PER_PAGE: i64 = 50;

/// How long the DNS check of a new URL may take before it is refused as not resolving (the API's bound).
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// The notice on the response that shows a new secret (no redirect: the secret is in that response only).
const ADDED: &str = "Endpoint added. Copy its signing secret now: it is not shown again.";
const ROTATED: &str = "New signing secret made: every delivery from now on, retries included, is signed with it. \
     Copy it now and give it to your receiver: it is not shown again.";

/// `?page=N` of the delivery log.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct PageParam {
    page: Option<String>,
}

/// The add and edit forms' fields. `events` repeats, one value per checked box, which `Form` (serde_urlencoded)
/// cannot collect: the body is read as pairs.
#[derive(Debug, Default)]
struct EndpointForm {
    csrf: String,
    url: String,
    description: String,
    events: Vec<String>,
}

impl EndpointForm {
    fn parse(body: &[u8]) -> Self {
        let mut f = Self::default();
        for (k, v) in form_urlencoded::parse(body) {
            match &*k {
                "csrf" => f.csrf = v.into_owned(),
                "url" => f.url = v.into_owned(),
                "description" => f.description = v.into_owned(),
                // More boxes than there are events is a forged form: the rest are ignored.
                "events" if f.events.len() < 32 => f.events.push(v.into_owned()),
                _ => {}
            }
        }
        f
    }

    /// The form as typed, to show again with `error` (bounded: the page never echoes more than a field holds).
    fn again(&self, prefix: &str, error: String) -> WebhookForm {
        let checked: Vec<EventType> = self
            .events
            .iter()
            .filter_map(|n| EventType::from_name(n))
            .collect();
        WebhookForm {
            url: self.url.chars().take(webhook_sender::MAX_URL_LEN).collect(),
            description: self
                .description
                .chars()
                .take(shortlink_store::MAX_WEBHOOK_DESCRIPTION_CHARS)
                .collect(),
            events: choices(prefix, &checked),
            error: Some(error),
        }
    }
}

/// One checkbox per event type an endpoint may receive.
fn choices(prefix: &str, checked: &[EventType]) -> Vec<EventChoice> {
    EventType::SUBSCRIBABLE
        .into_iter()
        .map(|t| EventChoice {
            name: t.as_str(),
            id: format!("{prefix}event-{}", t.as_str().replace('.', "-")),
            checked: checked.contains(&t),
        })
        .collect()
}

/// An empty add form.
fn blank_form() -> WebhookForm {
    WebhookForm {
        url: String::new(),
        description: String::new(),
        events: choices("", &[]),
        error: None,
    }
}

/// The edit form, filled with the endpoint's values.
fn form_of(e: &WebhookEndpoint) -> WebhookForm {
    WebhookForm {
        url: e.url.clone(),
        description: e.description.clone().unwrap_or_default(),
        events: choices("edit-", &e.events),
        error: None,
    }
}

/// A URL refusal as a sentence ("The endpoint URL must use https.").
fn url_message(e: UrlError) -> String {
    format!("The endpoint {}.", e.to_string().replacen("url", "URL", 1))
}

/// A store refusal as a sentence ("Description: at most 500 characters.").
fn sentence(m: &str) -> String {
    let mut c = m.chars();
    match c.next() {
        Some(first) => format!(
            "{}{}.",
            first.to_uppercase(),
            c.as_str().trim_end_matches('.')
        ),
        None => String::new(),
    }
}

/// An endpoint as the pages show it.
fn item(e: &WebhookEndpoint) -> WebhookItem {
    let status_detail = match (&e.disabled_reason, e.failing_since) {
        (Some(reason), _) if !e.enabled => disabled_detail(reason),
        (_, Some(since)) if e.enabled => format!(
            "Failing since {}: deliveries are retried; five days of failures disable it.",
            show_time(&since.to_iso8601())
        ),
        _ => String::new(),
    };
    WebhookItem {
        id: e.id.clone(),
        url: e.url.clone(),
        events: e
            .events
            .iter()
            .map(|t| t.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        description: e.description.clone().unwrap_or_default(),
        enabled: e.enabled,
        status: if e.enabled { "Enabled" } else { "Disabled" },
        status_detail,
        created: show_time(&e.created_at.to_iso8601()),
    }
}

/// Why an endpoint is disabled, from the store's reason: by the account, or automatically after failing for five
/// days (the reason says since when, and the last error).
fn disabled_detail(reason: &str) -> String {
    const AUTO: &str = "failing continuously since ";
    if let Some(rest) = reason.strip_prefix(AUTO) {
        let (since, last) = rest.split_once("; ").unwrap_or((rest, ""));
        let last = last.strip_prefix("last error: ").unwrap_or(last);
        return format!(
            "Disabled automatically: deliveries failed continuously for five days, since {}. Last error: {last}. \
             Enable it once the receiver works again.",
            show_time(since)
        );
    }
    if reason == "disabled by the account" {
        return "Disabled by the account.".to_owned();
    }
    format!("Disabled: {reason}.")
}

/// The Webhooks page, with the add form as given.
async fn list_page(
    state: &DashboardState,
    user: &SignedIn,
    notice: Option<&'static str>,
    form: WebhookForm,
    status: StatusCode,
) -> Result<Response, DashboardError> {
    let endpoints = state.db.webhooks(&user.account.account_id).await?;
    Ok((
        status,
        render(&WebhooksPage {
            nav: nav(user, "webhooks"),
            title: "Webhooks",
            csrf: user.csrf.clone(),
            endpoints: endpoints.iter().map(item).collect(),
            max: MAX_WEBHOOKS_PER_ACCOUNT,
            form,
            notice,
        }),
    )
        .into_response())
}

/// What an endpoint's page shows besides the endpoint and its log.
struct Shown {
    secret: Option<String>,
    page: i64,
    notice: Option<&'static str>,
    error: Option<String>,
    form: Option<WebhookForm>,
    status: StatusCode,
}

impl Default for Shown {
    fn default() -> Self {
        Self {
            secret: None,
            page: 1,
            notice: None,
            error: None,
            form: None,
            status: StatusCode::OK,
        }
    }
}

/// An endpoint's page: its details, its controls, one page of its delivery log.
async fn endpoint_page(
    state: &DashboardState,
    user: &SignedIn,
    endpoint: &WebhookEndpoint,
    shown: Shown,
) -> Result<Response, DashboardError> {
    let log = state
        .db
        .webhook_attempts(
            &user.account.account_id,
            &endpoint.id,
            PER_PAGE,
            (shown.page - 1) * PER_PAGE,
        )
        .await?;
    let deliveries = log
        .results
        .into_iter()
        .map(|a| DeliveryItem {
            at: show_time(&a.at.to_iso8601()),
            success: a.error.is_none(),
            event_id: a.event_id,
            event_type: a.event_type,
            attempt: a.attempt,
            status_code: a
                .status_code
                .map_or_else(|| "none".to_owned(), |s| s.to_string()),
            duration: format!("{} ms", a.duration_ms),
            error: a.error.unwrap_or_default(),
        })
        .collect();
    let pages = ((log.total + PER_PAGE - 1) / PER_PAGE).max(1);
    Ok((
        shown.status,
        render(&WebhookPage {
            nav: nav(user, "webhooks"),
            title: format!("Webhook {}", endpoint.url),
            csrf: user.csrf.clone(),
            endpoint: item(endpoint),
            secret: shown.secret,
            deliveries,
            page: shown.page,
            pages,
            total: log.total,
            notice: shown.notice,
            error: shown.error,
            form: shown.form.unwrap_or_else(|| form_of(endpoint)),
        }),
    )
        .into_response())
}

/// The endpoint a path names, if it is this account's; anything else is not found (404, as a missing one).
async fn endpoint(
    state: &DashboardState,
    user: &SignedIn,
    raw: &str,
) -> Result<WebhookEndpoint, DashboardError> {
    let id = uuid(raw).ok_or(DashboardError::NotFound)?;
    Ok(state.db.webhook(&user.account.account_id, &id).await?)
}

/// The URL's form, then (when `resolve`) its host resolving now to public addresses only, unless the operator
/// allows private targets; each delivery checks again at connect time. Err: the sentence to show.
async fn check_url(state: &DashboardState, raw: &str, resolve: bool) -> Result<String, String> {
    let allow = state.webhooks.allow_private;
    let url = webhook_sender::check_url(raw.trim(), allow).map_err(url_message)?;
    if resolve {
        match tokio::time::timeout(RESOLVE_TIMEOUT, webhook_sender::resolve_public(&url, allow))
            .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(url_message(e)),
            Err(_) => return Err(url_message(UrlError::DoesNotResolve)),
        }
    }
    Ok(url.to_string())
}

/// The checked boxes as subscriptions. Err: the sentence to show.
fn check_events(names: &[String]) -> Result<Vec<EventType>, String> {
    EventType::parse_subscriptions(names).map_err(|e| match e {
        UnknownEvent::Empty => "Choose at least one event.".to_owned(),
        other => sentence(&other.to_string()),
    })
}

/// `GET /dashboard/webhooks`: the endpoints and the add form.
pub(crate) async fn index(
    State(state): State<DashboardState>,
    user: SignedIn,
    Query(done): Query<Done>,
) -> Result<Response, DashboardError> {
    user.require(Permission::ManageWebhooks)?;
    list_page(&state, &user, done.notice(), blank_form(), StatusCode::OK).await
}

/// `POST /dashboard/webhooks`: a new endpoint with a fresh signing secret. The answer is the endpoint's page itself
/// (no redirect), marked no-store by the security layer: the secret exists in this response only. A refusal is
/// the Webhooks page again with what was typed and why (422; 409 at the account's limit).
pub(crate) async fn create(
    State(state): State<DashboardState>,
    user: SignedIn,
    RawForm(body): RawForm,
) -> Result<Response, DashboardError> {
    let form = EndpointForm::parse(&body);
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageWebhooks)?;
    let refuse = |status: StatusCode, message: String| {
        list_page(&state, &user, None, form.again("", message), status)
    };
    let events = match check_events(&form.events) {
        Ok(e) => e,
        Err(m) => return refuse(StatusCode::UNPROCESSABLE_ENTITY, m).await,
    };
    if let Err(m) = check_url(&state, &form.url, false).await {
        return refuse(StatusCode::UNPROCESSABLE_ENTITY, m).await;
    }
    charge_change(&state, &user).await?;
    let url = match check_url(&state, &form.url, true).await {
        Ok(u) => u,
        Err(m) => return refuse(StatusCode::UNPROCESSABLE_ENTITY, m).await,
    };
    let secret = WebhookSecret::generate();
    let new = NewWebhook {
        url,
        events,
        description: Some(form.description.clone()),
        secret: secret.expose().to_owned(),
    };
    match state
        .db
        .create_webhook(&user.account.account_id, &new, &user.actor())
        .await
    {
        Ok(endpoint) => {
            endpoint_page(
                &state,
                &user,
                &endpoint,
                Shown {
                    secret: Some(new.secret),
                    notice: Some(ADDED),
                    ..Shown::default()
                },
            )
            .await
        }
        Err(StoreError::WebhookLimit(n)) => {
            refuse(
                StatusCode::CONFLICT,
                format!(
                    "This account has {n} endpoints, the most it may have. Delete one before adding another."
                ),
            )
            .await
        }
        Err(StoreError::Invalid(m)) => refuse(StatusCode::UNPROCESSABLE_ENTITY, sentence(&m)).await,
        Err(e) => Err(e.into()),
    }
}

/// `GET /dashboard/webhooks/{id}?page=N`: the endpoint and its delivery log.
pub(crate) async fn show(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(raw): Path<String>,
    Query(done): Query<Done>,
    Query(p): Query<PageParam>,
) -> Result<Response, DashboardError> {
    user.require(Permission::ManageWebhooks)?;
    let e = endpoint(&state, &user, &raw).await?;
    let page = p
        .page
        .as_deref()
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|n| (1..=1_000_000).contains(n))
        .unwrap_or(1);
    endpoint_page(
        &state,
        &user,
        &e,
        Shown {
            page,
            notice: done.notice(),
            ..Shown::default()
        },
    )
    .await
}

/// `POST /dashboard/webhooks/{id}`: a new URL, events and description (a blank description removes it).
pub(crate) async fn edit(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(raw): Path<String>,
    RawForm(body): RawForm,
) -> Result<Response, DashboardError> {
    let form = EndpointForm::parse(&body);
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageWebhooks)?;
    // Another account's id learns nothing from a refused URL: look first.
    let e = endpoint(&state, &user, &raw).await?;
    let refuse = |status: StatusCode, message: String| {
        endpoint_page(
            &state,
            &user,
            &e,
            Shown {
                form: Some(form.again("edit-", message)),
                status,
                ..Shown::default()
            },
        )
    };
    let events = match check_events(&form.events) {
        Ok(ev) => ev,
        Err(m) => return refuse(StatusCode::UNPROCESSABLE_ENTITY, m).await,
    };
    if let Err(m) = check_url(&state, &form.url, false).await {
        return refuse(StatusCode::UNPROCESSABLE_ENTITY, m).await;
    }
    charge_change(&state, &user).await?;
    let url = match check_url(&state, &form.url, true).await {
        Ok(u) => u,
        Err(m) => return refuse(StatusCode::UNPROCESSABLE_ENTITY, m).await,
    };
    let patch = WebhookPatch {
        url: Some(url),
        events: Some(events),
        description: Some(Some(form.description.clone())),
        enabled: None,
    };
    match state
        .db
        .update_webhook(&user.account.account_id, &e.id, &patch, &user.actor())
        .await
    {
        Ok(_) => Ok(see_other(&format!(
            "/dashboard/webhooks/{}?done=saved",
            e.id
        ))),
        Err(StoreError::Invalid(m)) => refuse(StatusCode::UNPROCESSABLE_ENTITY, sentence(&m)).await,
        Err(err) => Err(err.into()),
    }
}

/// `POST /dashboard/webhooks/{id}/test`: a `ping` sent now by the origin's own test code (the API's
/// `POST webhooks/{id}/test`), enabled or not; the page then says how it went and the log shows it.
pub(crate) async fn test(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(raw): Path<String>,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageWebhooks)?;
    let e = endpoint(&state, &user, &raw).await?;
    charge_change(&state, &user).await?;
    let (_, outcome) = state
        .webhooks
        .tester
        .test(&state.db, &user.account.account_id, &e.id)
        .await?;
    let done = if outcome.success {
        "tested"
    } else {
        "test_failed"
    };
    Ok(see_other(&format!(
        "/dashboard/webhooks/{}?done={done}",
        e.id
    )))
}

/// Enables or disables an endpoint (disabling drops its pending deliveries; enabling starts it fresh).
async fn set_enabled(
    state: &DashboardState,
    user: &SignedIn,
    raw: &str,
    csrf: &str,
    enabled: bool,
) -> Result<Response, DashboardError> {
    user.check_csrf(csrf)?;
    user.require(Permission::ManageWebhooks)?;
    let e = endpoint(state, user, raw).await?;
    charge_change(state, user).await?;
    let patch = WebhookPatch {
        enabled: Some(enabled),
        ..WebhookPatch::default()
    };
    state
        .db
        .update_webhook(&user.account.account_id, &e.id, &patch, &user.actor())
        .await?;
    let done = if enabled { "enabled" } else { "disabled" };
    Ok(see_other(&format!(
        "/dashboard/webhooks/{}?done={done}",
        e.id
    )))
}

/// `POST /dashboard/webhooks/{id}/enable`.
pub(crate) async fn enable(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(raw): Path<String>,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    set_enabled(&state, &user, &raw, &form.csrf, true).await
}

/// `POST /dashboard/webhooks/{id}/disable`.
pub(crate) async fn disable(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(raw): Path<String>,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    set_enabled(&state, &user, &raw, &form.csrf, false).await
}

fn confirm_page(
    user: &SignedIn,
    e: &WebhookEndpoint,
    rotate: bool,
) -> Result<Response, DashboardError> {
    user.require(Permission::ManageWebhooks)?;
    let (title, message, action, button) = if rotate {
        (
            "Rotate the signing secret?",
            format!(
                "{} gets a new signing secret, shown once on the next page. Every delivery from then on, retries \
                 included, is signed with it: until the receiver has the new secret, it rejects them.",
                e.url
            ),
            "rotate",
            "Rotate secret",
        )
    } else {
        (
            "Delete this endpoint?",
            format!(
                "{} stops receiving events at once. Its pending deliveries and its delivery log are deleted too.",
                e.url
            ),
            "delete",
            "Delete endpoint",
        )
    };
    Ok(render(&ConfirmPage {
        nav: nav(user, "webhooks"),
        title: title.to_owned(),
        message,
        csrf: user.csrf.clone(),
        action: format!("/dashboard/webhooks/{}/{action}", e.id),
        button,
        cancel: format!("/dashboard/webhooks/{}", e.id),
        password: false,
        error: None,
    })
    .into_response())
}

/// `GET /dashboard/webhooks/{id}/rotate`: the confirmation.
pub(crate) async fn confirm_rotate(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(raw): Path<String>,
) -> Result<Response, DashboardError> {
    user.require(Permission::ManageWebhooks)?;
    let e = endpoint(&state, &user, &raw).await?;
    confirm_page(&user, &e, true)
}

/// `POST /dashboard/webhooks/{id}/rotate`: the answer is the endpoint's page with the new secret, shown once.
pub(crate) async fn rotate(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(raw): Path<String>,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageWebhooks)?;
    let e = endpoint(&state, &user, &raw).await?;
    charge_change(&state, &user).await?;
    let secret = WebhookSecret::generate();
    let rotated = state
        .db
        .rotate_webhook_secret(
            &user.account.account_id,
            &e.id,
            secret.expose(),
            &user.actor(),
        )
        .await?;
    endpoint_page(
        &state,
        &user,
        &rotated,
        Shown {
            secret: Some(secret.expose().to_owned()),
            notice: Some(ROTATED),
            ..Shown::default()
        },
    )
    .await
}

/// `GET /dashboard/webhooks/{id}/delete`: the confirmation.
pub(crate) async fn confirm_delete(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(raw): Path<String>,
) -> Result<Response, DashboardError> {
    user.require(Permission::ManageWebhooks)?;
    let e = endpoint(&state, &user, &raw).await?;
    confirm_page(&user, &e, false)
}

/// `POST /dashboard/webhooks/{id}/delete`.
pub(crate) async fn delete(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(raw): Path<String>,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageWebhooks)?;
    let e = endpoint(&state, &user, &raw).await?;
    charge_change(&state, &user).await?;
    state
        .db
        .delete_webhook(&user.account.account_id, &e.id, &user.actor())
        .await?;
    Ok(see_other("/dashboard/webhooks?done=deleted"))
}

/// An event id as the store makes them: `msg_` and 32 lowercase hex digits.
fn is_event_id(raw: &str) -> bool {
    raw.strip_prefix("msg_")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// `POST /dashboard/webhooks/{id}/deliveries/{event_id}/redeliver`: the event is due again now, with a fresh
/// retry schedule. A disabled endpoint is refused on its page (409: enable it first).
pub(crate) async fn redeliver(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path((raw, event_id)): Path<(String, String)>,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageWebhooks)?;
    let e = endpoint(&state, &user, &raw).await?;
    if !is_event_id(&event_id) {
        return Err(DashboardError::NotFound);
    }
    charge_change(&state, &user).await?;
    match state
        .db
        .redeliver_webhook_event(&user.account.account_id, &e.id, &event_id)
        .await
    {
        Ok(()) => {
            // The delivery loop hears the origin's commit signal.
            state.wake.notify_one();
            Ok(see_other(&format!(
                "/dashboard/webhooks/{}?done=redelivered",
                e.id
            )))
        }
        Err(StoreError::WebhookDisabled) => {
            endpoint_page(
                &state,
                &user,
                &e,
                Shown {
                    error: Some(
                        "This endpoint is disabled: enable it before redelivering an event. Nothing was sent."
                            .to_owned(),
                    ),
                    status: StatusCode::CONFLICT,
                    ..Shown::default()
                },
            )
            .await
        }
        Err(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_boxes_are_collected() {
        let f = EndpointForm::parse(
            b"csrf=t&url=https%3A%2F%2Fx.example%2Fh&events=link.created&events=link.clicked&description=CRM",
        );
        assert_eq!(f.csrf, "t");
        assert_eq!(f.url, "https://x.example/h");
        assert_eq!(f.events, ["link.created", "link.clicked"]);
        assert_eq!(f.description, "CRM");
        let again = f.again("", "x".to_owned());
        let checked: Vec<_> = again
            .events
            .iter()
            .filter(|c| c.checked)
            .map(|c| c.name)
            .collect();
        assert_eq!(checked, ["link.created", "link.clicked"]);
        assert_eq!(again.events.len(), EventType::SUBSCRIBABLE.len());
    }

    #[test]
    fn messages_read_as_sentences() {
        assert_eq!(
            url_message(UrlError::Scheme),
            "The endpoint URL must use https."
        );
        assert_eq!(
            sentence("description: at most 500 characters"),
            "Description: at most 500 characters."
        );
        assert_eq!(check_events(&[]).unwrap_err(), "Choose at least one event.");
        assert!(is_event_id("msg_0123456789abcdef0123456789abcdef"));
        assert!(!is_event_id("msg_0123"));
    }

    #[test]
    fn automatic_disabling_says_since_when_and_why() {
        let d = disabled_detail(
            "failing continuously since 2026-11-23T14:05:09.123456Z; last error: HTTP 500",
        );
        assert!(d.starts_with("Disabled automatically"), "{d}");
        assert!(
            d.contains("2026-11-23 14:05 UTC") && d.contains("Last error: HTTP 500"),
            "{d}"
        );
        assert_eq!(
            disabled_detail("disabled by the account"),
            "Disabled by the account."
        );
    }
}
