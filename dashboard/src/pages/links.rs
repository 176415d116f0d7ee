//! Links: the home page (list, filter, pages, create), a link's page (QR code, clicks; its edit form is
//! [`super::link_edit`]), pause, resume and delete. Creation goes through the store's `create_link` like the API's, with the dashboard as the creator.

use super::link_edit::Typed;
use super::link_filters::{Filters, any_of};
use super::{Done, charge_change, nav, see_other, show_time, uuid};
use crate::DashboardState;
use crate::chart;
use crate::error::DashboardError;
use crate::forms::{CsrfOnly, LinkForm, ListParams};
use crate::session::SignedIn;
use crate::smart_view::SmartView;
use crate::views::{
    Abilities, Choice, ConfirmPage, CreateForm, LinkItem, LinkPage, LinksPage, TagChip, render,
};
use axum::Form;
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use link_qr::{Format, QrRequest};
use shortlink_store::domain::{LongUrl, Micros, Permission, ShortCode};
use shortlink_store::{CreateLink, Creator, LinkPatch, ListedLink, StatsScope, StoreError};

/// Links per page (the number).
const PAGE_SIZE: u32 = 20;
/// Active, Paused or Expired: what a visitor gets now.
fn status(link: &ListedLink) -> &'static str {
    let expired = link
        .expires_at
        .as_deref()
        .and_then(|t| Micros::parse_rfc3339_utc("expires_at", t).ok())
        .is_some_and(|t| t <= Micros::now());
    if !link.is_active {
        "Paused"
    } else if expired {
        "Expired"
    } else {
        "Active"
    }
}

/// A field's message with the form's label for the API's field name.
pub(super) fn readable_field(field: &str, label: &str, message: &str) -> String {
    let m = message.replacen(field, label, 1);
    if m.ends_with('.') { m } else { format!("{m}.") }
}

/// The store's destination messages speak of the API's field; the form says "destination URL".
pub(super) fn readable(message: &str) -> String {
    let m = message.replacen("long_url", "The destination URL", 1);
    let m = m.replacen("short_code", "The short code", 1);
    if m.ends_with('.') { m } else { format!("{m}.") }
}

/// `GET /dashboard/`: the account's links, newest first.
pub(crate) async fn index(
    State(state): State<DashboardState>,
    user: SignedIn,
    Query(params): Query<ListParams>,
) -> Result<Response, DashboardError> {
    let notice = Done {
        done: params.done.clone(),
    }
    .notice();
    let page = links_page(&state, &user, &params, CreateForm::default(), None, notice).await?;
    Ok(render(&page).into_response())
}

async fn links_page(
    state: &DashboardState,
    user: &SignedIn,
    params: &ListParams,
    form: CreateForm,
    selected: Option<(&str, &str)>,
    notice: Option<&'static str>,
) -> Result<LinksPage, DashboardError> {
    let account = &user.account.account_id;
    let filters = Filters::from_params(params);
    let page: u64 = params
        .page
        .as_deref()
        .and_then(|p| p.parse().ok())
        .filter(|p| *p >= 1 && *p <= 1_000_000)
        .unwrap_or(1);
    let offset = (page - 1) * u64::from(PAGE_SIZE);
    // Values the API's rules refuse are the form's error; the list is then empty rather than unfiltered, so
    // nobody mistakes it for the matches.
    let (listed, filter_error) = match filters.query(PAGE_SIZE, offset) {
        Ok(query) => (state.db.search_links(account, &query).await?, None),
        Err(e) => (
            shortlink_store::LinkPage {
                total: 0,
                results: Vec::new(),
            },
            Some(readable_filter(&e.detail)),
        ),
    };
    let shown = u64::try_from(listed.results.len()).unwrap_or(0);
    let total = u64::try_from(listed.total).unwrap_or(0);
    let links = listed
        .results
        .iter()
        .map(|l| LinkItem {
            id: l.id.clone(),
            short_url: l.short_url(),
            long_url: l.long_url.clone(),
            title: l.title.clone(),
            tags: l
                .tags
                .iter()
                .map(|t| TagChip {
                    href: Filters {
                        tag: t.clone(),
                        ..Filters::default()
                    }
                    .href(1),
                    name: t.clone(),
                })
                .collect(),
            status: status(l),
            is_active: l.is_active,
            created: show_time(&l.created_at),
        })
        .collect();
    let (group_sel, domain_sel) = selected.unwrap_or((&user.account.default_group_id, ""));
    let mut group_rows = state.db.list_groups(account).await?;
    group_rows.sort_by_key(|(_, name)| name.to_lowercase());
    let groups: Vec<Choice> = group_rows
        .iter()
        .map(|(id, name)| Choice {
            selected: id == group_sel,
            value: id.clone(),
            label: name.clone(),
        })
        .collect();
    let domain_rows = state.db.enabled_domains(account).await?;
    let domains = domain_rows
        .iter()
        .map(|d| Choice {
            selected: d.id == domain_sel,
            value: d.id.clone(),
            label: d.domain.clone(),
        })
        .collect();
    let tags = state.db.list_tags(account).await?;
    Ok(LinksPage {
        nav: nav(user, "links"),
        may: Abilities::of(user.account.role),
        title: "Links",
        csrf: user.csrf.clone(),
        links,
        total: listed.total,
        today_clicks: state.db.account_clicks_today(account).await?,
        first: if shown == 0 { 0 } else { offset + 1 },
        last: offset + shown,
        prev: (page > 1).then(|| filters.href(page - 1)),
        next: (offset + shown < total).then(|| filters.href(page + 1)),
        filtered: filters.narrows() || filter_error.is_some(),
        tag_choices: any_of(
            &filters.tag,
            tags.into_iter().map(|t| (t.name.clone(), t.name)),
        ),
        group_choices: any_of(&filters.group, group_rows),
        domain_choices: any_of(
            &filters.domain,
            domain_rows
                .into_iter()
                .map(|d| (d.domain.clone(), d.domain)),
        ),
        status_choices: filters.status_choices(),
        sort_choices: filters.sort_choices(),
        export_href: format!("/dashboard/links/export?{}", filters.export_query()),
        filters: filters.form(),
        filter_error,
        groups,
        domains,
        form,
        notice,
    })
}

/// A refused filter's message as the form says it (the API's names are the form's labels here).
fn readable_filter(detail: &str) -> String {
    let m = detail
        .replacen("q must", "Search must", 1)
        .replacen(
            "is_active must be true or false",
            "Status must be Any, Active or Paused",
            1,
        )
        .replacen("long_url must", "Destination must", 1);
    if m.ends_with('.') { m } else { format!("{m}.") }
}

/// `POST /dashboard/links`: the API's rules and hourly limit, with each refusal next to its field.
pub(crate) async fn create(
    State(state): State<DashboardState>,
    user: SignedIn,
    Form(form): Form<LinkForm>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::EditLinks)?;
    let mut shown = CreateForm {
        long_url: form.long_url.chars().take(4096).collect(),
        short_code: form.short_code.chars().take(100).collect(),
        ..CreateForm::default()
    };
    let long_url = LongUrl::parse(form.long_url.trim()).map_err(|e| readable(&e.0));
    let short_code = match form.short_code.trim() {
        "" => Ok(None),
        code => ShortCode::parse(code)
            .map(Some)
            .map_err(|e| readable(&e.to_string())),
    };
    let (long_url, short_code) = match (long_url, short_code) {
        (Ok(u), Ok(c)) => (u, c),
        (u, c) => {
            shown.long_url_error = u.err();
            shown.short_code_error = c.err();
            return refused(&state, &user, &form, shown).await;
        }
    };
    let request = CreateLink {
        creator: Creator::Dashboard,
        account_id: user.account.account_id.clone(),
        long_url,
        short_code,
        group_id: uuid(&form.group_id),
        domain_id: uuid(&form.domain_id),
        expires_at: None,
        forward_query: true,
        actor: user.actor(),
        title: None,
        tags: Vec::new(),
        options: Default::default(),
    };
    match state.db.create_link(&request).await {
        Ok(_) => {
            state.wake.notify_one();
            Ok(see_other("/dashboard/?done=created"))
        }
        Err(e) => {
            match e {
                StoreError::ShortCodeExists => {
                    shown.short_code_error =
                        Some("This short code is taken on this domain.".to_owned());
                }
                StoreError::BlockedDestination => {
                    shown.long_url_error =
                        Some("Links to this destination's domain are not allowed.".to_owned());
                }
                StoreError::RateLimited(limit) => {
                    let minutes = (limit.retry_after + 59) / 60;
                    shown.error = Some(format!(
                        "You created {} links in the last hour, the limit. The next one is possible in {minutes} minute{}.",
                        limit.limit,
                        if minutes == 1 { "" } else { "s" }
                    ));
                }
                StoreError::PlatformDomainUnavailable => {
                    shown.error =
                        Some("No domain is available for new links right now.".to_owned());
                }
                StoreError::Invalid(message) => shown.error = Some(readable(&message)),
                other => return Err(other.into()),
            }
            refused(&state, &user, &form, shown).await
        }
    }
}

/// The links page again, with the create form as typed and its errors.
async fn refused(
    state: &DashboardState,
    user: &SignedIn,
    form: &LinkForm,
    shown: CreateForm,
) -> Result<Response, DashboardError> {
    let selected = Some((form.group_id.as_str(), form.domain_id.as_str()));
    let page = links_page(state, user, &ListParams::default(), shown, selected, None).await?;
    Ok((StatusCode::UNPROCESSABLE_ENTITY, render(&page)).into_response())
}

/// One of the account's links; another account's, or a malformed id, is not found.
pub(super) async fn own_link(
    state: &DashboardState,
    user: &SignedIn,
    raw: &str,
) -> Result<ListedLink, DashboardError> {
    let id = uuid(raw).ok_or(DashboardError::NotFound)?;
    Ok(state.db.get_link(&user.account.account_id, &id).await?)
}

pub(super) async fn link_page(
    state: &DashboardState,
    user: &SignedIn,
    link: ListedLink,
    typed: Option<Typed>,
    error: Option<String>,
    notice: Option<&'static str>,
    range: Option<&str>,
) -> Result<LinkPage, DashboardError> {
    let page = format!("/dashboard/links/{}", link.id);
    let stats = super::analytics::section(
        state,
        user,
        StatsScope::Link(&link.id),
        range,
        &page,
        &format!("{page}/clicks.csv"),
    )
    .await?;
    let live = state
        .db
        .link_last_hour(&user.account.account_id, &link.id, Micros::now())
        .await?;
    let Typed {
        long_url,
        title,
        tags,
        expires_at,
        forward_query,
        smart,
        unsaved,
    } = typed.unwrap_or_else(|| Typed::of_link(&link));
    let smart = SmartView::new(
        smart,
        link.smart.password_protected,
        error.as_deref(),
        unsaved,
    );
    Ok(LinkPage {
        nav: nav(user, "links"),
        may: Abilities::of(user.account.role),
        title: link.short_url(),
        csrf: user.csrf.clone(),
        short_url: link.short_url(),
        status: status(&link),
        is_active: link.is_active,
        id: link.id,
        long_url,
        link_title: title,
        tags,
        expires_at,
        forward_query,
        smart,
        error,
        notice,
        live_chart: chart::clicks_per_minute(&live),
        live_text: super::live::live_text(live.total),
        stats,
    })
}

/// `GET /dashboard/links/{id}`.
pub(crate) async fn show(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
    Query(done): Query<Done>,
    RawQuery(range): RawQuery,
) -> Result<Response, DashboardError> {
    let link = own_link(&state, &user, &id).await?;
    let page = link_page(
        &state,
        &user,
        link,
        None,
        None,
        done.notice(),
        range.as_deref(),
    )
    .await?;
    Ok(render(&page).into_response())
}

async fn set_active(
    state: &DashboardState,
    user: &SignedIn,
    id: &str,
    form: &CsrfOnly,
    active: bool,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::EditLinks)?;
    let link = own_link(state, user, id).await?;
    let patch = LinkPatch {
        is_active: Some(active),
        ..LinkPatch::default()
    };
    charge_change(state, user).await?;
    state
        .db
        .update_link(&user.account.account_id, &link.id, &patch, &user.actor())
        .await?;
    state.wake.notify_one();
    let done = if active { "resumed" } else { "paused" };
    Ok(if form.back == "list" {
        see_other(&format!("/dashboard/?done={done}"))
    } else {
        see_other(&format!("/dashboard/links/{}?done={done}", link.id))
    })
}

/// `POST /dashboard/links/{id}/pause`: visitors go to the domain's fallback.
pub(crate) async fn pause(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    set_active(&state, &user, &id, &form, false).await
}

/// `POST /dashboard/links/{id}/resume`.
pub(crate) async fn resume(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    set_active(&state, &user, &id, &form, true).await
}

/// `GET /dashboard/links/{id}/delete`: the confirmation.
pub(crate) async fn confirm_delete(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, DashboardError> {
    user.require(Permission::EditLinks)?;
    let link = own_link(&state, &user, &id).await?;
    Ok(render(&ConfirmPage {
        nav: nav(&user, "links"),
        title: format!("Delete {}?", link.short_url()),
        message: "The link stops redirecting at once, its short code becomes free for a new link, and its click history is deleted.".to_owned(),
        csrf: user.csrf.clone(),
        action: format!("/dashboard/links/{}/delete", link.id),
        button: "Delete link",
        cancel: format!("/dashboard/links/{}", link.id),
        // Undone by creating the link again: no password needed.
        password: false,
        error: None,
    })
    .into_response())
}

/// `POST /dashboard/links/{id}/delete`.
pub(crate) async fn delete(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::EditLinks)?;
    let link = own_link(&state, &user, &id).await?;
    charge_change(&state, &user).await?;
    state
        .db
        .delete_link(&user.account.account_id, &link.id, &user.actor())
        .await?;
    state.wake.notify_one();
    Ok(see_other("/dashboard/?done=deleted"))
}

async fn qr(
    state: &DashboardState,
    user: &SignedIn,
    id: &str,
    format: Format,
) -> Result<Response, DashboardError> {
    let link = own_link(state, user, id).await?;
    let short_url = link.short_url();
    let request = QrRequest {
        format,
        ..QrRequest::default()
    };
    let rendered = tokio::task::spawn_blocking(move || link_qr::render(&short_url, request))
        .await
        .map_err(|e| StoreError::Internal(e.to_string()))?
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    let extension = if format == Format::Png { "png" } else { "svg" };
    let disposition = format!("inline; filename=\"qr-{}.{extension}\"", link.short_code);
    Ok((
        [
            (header::CONTENT_TYPE, rendered.content_type.to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        rendered.body,
    )
        .into_response())
}

/// `GET /dashboard/links/{id}/qr.svg`.
pub(crate) async fn qr_svg(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, DashboardError> {
    qr(&state, &user, &id, Format::Svg).await
}

/// `GET /dashboard/links/{id}/qr.png`.
pub(crate) async fn qr_png(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, DashboardError> {
    qr(&state, &user, &id, Format::Png).await
}
