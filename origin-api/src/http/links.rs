//! `/api/v1/external/links`: create (4.1), list (4.2), enabled domains (4.3).

use super::error::{ApiError, AuthErrors, ErrorBody, ServerErrors, rate_limit_headers};
use super::extract::{Caller, JsonBody};
use super::smart_fields::{RuleSchema, SmartFieldsBody, hash_password};
use super::state::AppState;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shortlink_store::domain::{LinkPassword, ListQuery, LongUrl, Micros, ShortCode, Tag, Title};
use shortlink_store::{Actor, AuthContext, CreateLink, Creator, DomainRow};
use utoipa::ToSchema;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/external/links/create-link", post(create_link))
        .route("/api/v1/external/links", get(list_links))
        .route(
            "/api/v1/external/links/enabled-domains",
            get(enabled_domains),
        )
}

/// create-link request body (spec 4.1). `null` is the same as an absent field.
#[derive(Debug, Deserialize, ToSchema)]
pub(crate) struct CreateLinkBody {
    /// Destination: `https://` (checked literally), at most 2048 characters, no whitespace
    /// or control characters, a valid host, not on the blocked domain list.
    #[schema(
        max_length = 2048,
        pattern = "^https://",
        example = "https://www.rust-lang.org/"
    )]
    long_url: String,
    /// Custom alias, stored lowercase; generated (7 of `[a-z0-9]`) when absent.
    #[serde(default)]
    #[schema(
        min_length = 3,
        max_length = 50,
        pattern = "^[A-Za-z0-9_-]{3,50}$",
        example = "rust"
    )]
    short_code: Option<String>,
    /// One of the account's groups; absent, unknown or another account's: the default group.
    #[serde(default)]
    #[schema(format = Uuid)]
    group_id: Option<String>,
    /// An enabled platform domain or one of the account's active custom domains; otherwise
    /// the oldest enabled platform domain.
    #[serde(default)]
    #[schema(format = Uuid)]
    domain_id: Option<String>,
    /// When the link stops redirecting (visitors then go to the domain's fallback): RFC 3339 in UTC, in the
    /// future. Absent or `null`: never.
    #[serde(default)]
    #[schema(format = DateTime, example = "2030-01-31T12:00:00Z")]
    expires_at: Option<String>,
    /// Append the visitor's query string to the destination (the destination's own parameters win on a
    /// clash). Absent or `null`: true.
    #[serde(default)]
    forward_query: Option<bool>,
    /// A title, at most 200 characters once trimmed, no control characters; empty: none.
    #[serde(default)]
    #[schema(example = "Spring sale")]
    title: Option<String>,
    /// Tags: at most 10 once duplicates (compared case-insensitively) are merged, each 1 to 50 characters of
    /// letters, digits, space, `_`, `-`, `.` and `:` once trimmed. A tag the account already has keeps its
    /// spelling.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>, example = json!(["spring", "mail"]))]
    tags: Option<Vec<String>>,
    /// At most 20 rules, in order: the first whose every condition holds for the visitor decides the
    /// destination, else `long_url` (after `ios_url` and `android_url`, which come first).
    #[serde(default)]
    #[schema(value_type = Option<Vec<RuleSchema>>, max_items = 20)]
    rules: Option<Value>,
    /// Where iOS visitors go (App Store or universal link); create-link's URL rules.
    #[serde(default)]
    #[schema(max_length = 2048, pattern = "^https://")]
    ios_url: Option<String>,
    /// Where Android visitors go (Play or app link); create-link's URL rules.
    #[serde(default)]
    #[schema(max_length = 2048, pattern = "^https://")]
    android_url: Option<String>,
    /// Write-only: visitors must enter it first. Stored only as a slow salted hash; links show
    /// `password_protected`.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 128, write_only)]
    password: Option<String>,
    /// Where visitors go once the link has expired (`expires_at` passed or `max_clicks` reached); else the
    /// domain's fallback. Create-link's URL rules.
    #[serde(default)]
    #[schema(max_length = 2048, pattern = "^https://")]
    expired_url: Option<String>,
    /// After this many counted clicks the link behaves as expired. Needs analytics on in the link's group.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1_000_000_000)]
    max_clicks: Option<i64>,
    /// 301, 302 (the default), 307 or 308.
    #[serde(default)]
    #[schema(value_type = Option<u16>, example = 301)]
    redirect_status: Option<i64>,
    /// Preview card title for link-preview crawlers, at most 200 characters once trimmed; empty: none.
    #[serde(default)]
    #[schema(max_length = 200)]
    og_title: Option<String>,
    /// Preview card description, at most 500 characters once trimmed; empty: none.
    #[serde(default)]
    #[schema(max_length = 500)]
    og_description: Option<String>,
    /// Preview card image; create-link's URL rules.
    #[serde(default)]
    #[schema(max_length = 2048, pattern = "^https://")]
    og_image: Option<String>,
}

impl CreateLinkBody {
    /// The validated creation for `caller`, its password hashed (under the origin's hashing bound).
    pub(crate) async fn prepare(
        self,
        state: &AppState,
        caller: &AuthContext,
    ) -> Result<CreateLink, ApiError> {
        let (mut req, password) = self.into_request(caller)?;
        req.options.password = hash_password(state, password).await?;
        Ok(req)
    }

    /// The validated creation for `caller`, and its password still to hash.
    fn into_request(
        self,
        caller: &AuthContext,
    ) -> Result<(CreateLink, Option<LinkPassword>), ApiError> {
        let long_url = LongUrl::parse(&self.long_url).map_err(|e| ApiError::Validation(e.0))?;
        let short_code = self
            .short_code
            .as_deref()
            .map(ShortCode::parse)
            .transpose()
            .map_err(|e| ApiError::Validation(e.to_string()))?;
        let (options, password) = SmartFieldsBody {
            rules: self.rules,
            ios_url: self.ios_url,
            android_url: self.android_url,
            password: self.password,
            expired_url: self.expired_url,
            max_clicks: self.max_clicks,
            redirect_status: self.redirect_status,
            og_title: self.og_title,
            og_description: self.og_description,
            og_image: self.og_image,
        }
        .parse()?;
        let req = CreateLink {
            creator: Creator::ApiKey(caller.key_id.clone()),
            account_id: caller.account_id.clone(),
            long_url,
            short_code,
            group_id: parse_uuid("group_id", self.group_id)?,
            domain_id: parse_uuid("domain_id", self.domain_id)?,
            expires_at: self.expires_at.as_deref().map(parse_expiry).transpose()?,
            forward_query: self.forward_query.unwrap_or(true),
            actor: Actor::ApiKey,
            title: self
                .title
                .as_deref()
                .map(Title::parse)
                .transpose()
                .map_err(|e| ApiError::Validation(e.0))?
                .flatten(),
            tags: Tag::parse_list("tags", self.tags.as_deref().unwrap_or_default())
                .map_err(|e| ApiError::Validation(e.0))?,
            options,
        };
        Ok((req, password))
    }
}

/// A created link (spec 2, "Link (as created)").
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CreatedLink {
    /// Link id.
    #[schema(format = Uuid)]
    id: String,
    /// The stored (lowercase) alias.
    short_code: String,
    /// `https://<domain>/<short_code>`.
    short_url: String,
    /// The group the link went to.
    #[schema(format = Uuid)]
    group_id: String,
    /// The hostname the link resolves on.
    domain: String,
    /// The domain's id.
    #[schema(format = Uuid)]
    domain_id: String,
}

impl From<shortlink_store::CreatedLink> for CreatedLink {
    fn from(l: shortlink_store::CreatedLink) -> Self {
        Self {
            id: l.id,
            short_code: l.short_code,
            short_url: l.short_url,
            group_id: l.group_id,
            domain: l.domain,
            domain_id: l.domain_id,
        }
    }
}

/// A listed link (spec 2, "Link (as listed)"), for the OpenAPI document. Never built: answers serialise the store's
/// [`shortlink_store::ListedLink`], the one JSON shape of a link, which webhooks send too (`data` of link events).
/// The schemathesis run checks every answer against this schema.
#[derive(Debug, Serialize, ToSchema)]
#[allow(dead_code)]
pub(crate) struct ListedLink {
    /// Link id.
    #[schema(format = Uuid)]
    id: String,
    /// Alias.
    short_code: String,
    /// Destination.
    long_url: String,
    /// Hostname the link is served on.
    domain: String,
    /// Owning group.
    #[schema(format = Uuid)]
    group_id: String,
    /// true: the link redirects; false: it is paused.
    is_active: bool,
    /// UTC, six fractional digits and `Z`, e.g. `2026-11-22T04:48:11.614362Z`.
    #[schema(format = DateTime, example = "2026-11-22T04:48:11.614362Z")]
    created_at: String,
    /// When the link stops redirecting, formatted as `created_at`; `null`: never.
    #[schema(format = DateTime, example = "2030-01-31T12:00:00.000000Z")]
    expires_at: Option<String>,
    /// Whether the visitor's query string is appended to the destination.
    forward_query: bool,
    /// Its title; `null`: none.
    title: Option<String>,
    /// Its tags as the account spells them, sorted case-insensitively (`[]`: none).
    tags: Vec<String>,
    /// Its rules as given (`device` and `os` as lists, `country` uppercase, `language` lowercase, `after` and
    /// `before` formatted as `created_at`); `[]`: none.
    #[schema(value_type = Vec<RuleSchema>)]
    rules: Vec<Value>,
    /// Where iOS visitors go; `null`: none.
    ios_url: Option<String>,
    /// Where Android visitors go; `null`: none.
    android_url: Option<String>,
    /// Whether a password protects the link (the password itself is never returned).
    password_protected: bool,
    /// Where visitors go once the link has expired; `null`: the domain's fallback.
    expired_url: Option<String>,
    /// The click limit; `null`: none.
    max_clicks: Option<i64>,
    /// 301, 302, 307 or 308.
    #[schema(example = 302)]
    redirect_status: u16,
    /// Preview card title; `null`: none.
    og_title: Option<String>,
    /// Preview card description; `null`: none.
    og_description: Option<String>,
    /// Preview card image; `null`: none.
    og_image: Option<String>,
}

/// A domain usable as `domain_id` (spec 2, "Domain").
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Domain {
    /// Domain id.
    #[schema(format = Uuid)]
    id: String,
    /// Hostname.
    domain: String,
}

/// The enabled domains, by hostname.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DomainList {
    /// Platform domains and the account's active custom domains.
    results: Vec<Domain>,
}

/// Paging parameters of list links, for the OpenAPI document. The handler parses the raw query itself
/// ([`ListQuery`]: one error code per parameter, a repeated parameter refused), so this is never built.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct PageParams {
    /// Page size, plain decimal digits.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<u32>,
    /// Links to skip, plain decimal digits.
    #[param(minimum = 0, maximum = 1_000_000_000, default = 0)]
    offset: Option<u64>,
}

/// The filters and sort of list links (and of the export), for the OpenAPI document; never built, as
/// [`PageParams`].
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct FilterParams {
    /// Filter by destination URL (see `match`); the prefix is literal.
    #[param(max_length = 2048)]
    long_url: Option<String>,
    /// `exact` (the default) or `startswith`; applies to `long_url`.
    #[param(rename = "match", inline)]
    r#match: Option<MatchParam>,
    /// A case-insensitive substring of the short code, the destination or the title (literal: `%` and `_` are
    /// ordinary characters); no control characters.
    #[param(min_length = 2, max_length = 200)]
    q: Option<String>,
    /// Links carrying this tag (compared case-insensitively); repeatable, every one must match (at most 10
    /// different). An unknown tag matches nothing.
    #[param(style = Form, explode, inline, value_type = Option<Vec<String>>, max_items = 10)]
    tag: Option<Vec<String>>,
    /// Links of this group; another account's or an unknown group matches nothing.
    #[param(format = Uuid)]
    group_id: Option<String>,
    /// Links served on this hostname.
    #[param(max_length = 253, example = "go.example.com")]
    domain: Option<String>,
    /// `true`: redirecting links only; `false`: paused ones only.
    #[param(inline)]
    is_active: Option<BoolParam>,
    /// `created_at` (the default: newest first), `-created_at` (oldest first), `short_code` or `clicks` (most
    /// clicks of all time first); ties newest first.
    #[param(inline)]
    sort: Option<SortParam>,
}

/// `is_active` of list links (documentation of [`FilterParams`]; never built).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub(crate) enum BoolParam {
    /// Redirecting links.
    True,
    /// Paused links.
    False,
}

/// `sort` of list links (documentation of [`FilterParams`]; never built).
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) enum SortParam {
    /// Newest first.
    #[schema(rename = "created_at")]
    CreatedAt,
    /// Oldest first.
    #[schema(rename = "-created_at")]
    OldestFirst,
    /// By short code.
    #[schema(rename = "short_code")]
    ShortCode,
    /// Most clicks first.
    #[schema(rename = "clicks")]
    Clicks,
}

/// How `long_url` filters (documentation of [`FilterParams`]; never built).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub(crate) enum MatchParam {
    /// The whole URL.
    Exact,
    /// A prefix.
    Startswith,
}

/// An expiry given by a client: RFC 3339 in UTC, in the future.
pub(crate) fn parse_expiry(raw: &str) -> Result<Micros, ApiError> {
    let at = Micros::parse_rfc3339_utc("expires_at", raw).map_err(|e| ApiError::Validation(e.0))?;
    if at <= Micros::now() {
        return Err(ApiError::Validation(
            "expires_at must be in the future".to_owned(),
        ));
    }
    Ok(at)
}

/// A UUID field: refused when it is not one (a typed field of the spec), normalised so that
/// upper- and lowercase spellings find the same row.
pub(crate) fn parse_uuid(field: &str, value: Option<String>) -> Result<Option<String>, ApiError> {
    value
        .map(|v| {
            uuid::Uuid::try_parse(&v)
                .map(|u| u.hyphenated().to_string())
                .map_err(|_| ApiError::Validation(format!("{field} must be a UUID")))
        })
        .transpose()
}

/// Creates a persistent short link (spec 4.1). At most 100 successful creations per
/// rolling hour per API key.
#[utoipa::path(
    post,
    path = "/api/v1/external/links/create-link",
    tag = "links",
    operation_id = "create_link",
    request_body(content = CreateLinkBody, content_type = "application/json"),
    security(("Token" = [])),
    responses(
        (status = 201, description = "The link", body = CreatedLink,
            headers(
                ("X-RateLimit-Limit" = i64, description = "Creations allowed per rolling hour (100)"),
                ("X-RateLimit-Remaining" = i64, description = "Creations left now"),
                ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted creation leaves the window"),
            )),
        (status = 400, description = "`validation_error` (a field, naming it: e.g. `rules[2].if.os[0]`, a URL on the \
            blocklist, `max_clicks` in a group without analytics), `invalid_json`, `short_code_exists` or \
            `platform_domain_unavailable`", body = ErrorBody),
        AuthErrors,
        (status = 413, description = "`payload_too_large`: body over 16 KiB", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not declared as JSON", body = ErrorBody),
        (status = 429, description = "`rate_limited`: 100 creations in the last hour with this key",
            body = ErrorBody,
            headers(
                ("X-RateLimit-Limit" = i64, description = "Creations allowed per rolling hour (100)"),
                ("X-RateLimit-Remaining" = i64, description = "0"),
                ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted creation leaves the window"),
                ("Retry-After" = i64, description = "Seconds until one more creation is allowed"),
            )),
        ServerErrors,
    ),
)]
pub(crate) async fn create_link(
    State(state): State<AppState>,
    Caller(caller): Caller,
    JsonBody(body): JsonBody<CreateLinkBody>,
) -> Result<Response, ApiError> {
    let req = body.prepare(&state, &caller).await?;
    let (link, limit) = state.db.create_link(&req).await?;
    // The link is committed with its outbox row; tell the publisher now rather than at its next poll.
    state.publisher.wake.notify_one();
    let mut response = (StatusCode::CREATED, Json(CreatedLink::from(link))).into_response();
    rate_limit_headers(&limit, response.headers_mut());
    Ok(response)
}

/// One page of the account's links, newest first.
#[derive(Serialize, ToSchema)]
pub(crate) struct LinkList {
    /// Offset applied.
    offset: u64,
    /// Limit applied.
    limit: u32,
    /// Links matching the filter, ignoring pagination.
    total: i64,
    /// The page.
    #[schema(value_type = Vec<ListedLink>)]
    results: Vec<shortlink_store::ListedLink>,
}

/// The account's links, newest first (`created_at`, then `id`) unless `sort` says otherwise, with the optional
/// destination filter (spec 4.2) and our filters, all combinable: `total` counts every match. Unknown parameters
/// are ignored; a known one given twice is refused with its `invalid_*` code, except `tag`, which is repeatable.
#[utoipa::path(
    get,
    path = "/api/v1/external/links",
    tag = "links",
    operation_id = "list_links",
    params(PageParams, FilterParams),
    security(("Token" = [])),
    responses(
        (status = 200, description = "One page of links", body = LinkList),
        (status = 400, description = "`invalid_limit`, `invalid_offset`, `invalid_match`, `invalid_long_url`, \
            `invalid_q`, `invalid_tag`, `invalid_group_id`, `invalid_domain`, `invalid_is_active` or `invalid_sort`",
            body = ErrorBody),
        AuthErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn list_links(
    State(state): State<AppState>,
    Caller(caller): Caller,
    RawQuery(query): RawQuery,
) -> Result<Json<LinkList>, ApiError> {
    let q = ListQuery::parse(query.as_deref())?;
    let page = state.db.search_links(&caller.account_id, &q).await?;
    Ok(Json(LinkList {
        offset: q.offset,
        limit: q.limit,
        total: page.total,
        results: page.results,
    }))
}

/// The domains usable as `domain_id`: the platform domains and the account's active custom
/// domains, by hostname (spec 4.3).
#[utoipa::path(
    get,
    path = "/api/v1/external/links/enabled-domains",
    tag = "links",
    operation_id = "enabled_domains",
    security(("Token" = [])),
    responses(
        (status = 200, description = "The enabled domains", body = DomainList),
        AuthErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn enabled_domains(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> Result<Json<DomainList>, ApiError> {
    let domains = state.db.enabled_domains(&caller.account_id).await?;
    Ok(Json(DomainList {
        results: domains
            .into_iter()
            .map(|DomainRow { id, domain }| Domain { id, domain })
            .collect(),
    }))
}
