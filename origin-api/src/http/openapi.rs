//! The OpenAPI 3.1 document of the public API, generated from the handlers' `#[utoipa::path]`
//! attributes and the schemas below, served at `GET /api/v1/openapi.json`.
//!
//! Request bodies and the handlers' own response types derive their schemas where they are
//! defined; the response types that live in the storage layer are mirrored here (same field
//! names and types), so `db` stays free of documentation concerns. The schemathesis run
//! (`scripts/schemathesis.sh`) checks every response against this document.

use super::AppState;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::OnceLock;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

/// Where the document is served.
pub(crate) const PATH: &str = "/api/v1/openapi.json";

/// The route of the document.
pub(crate) fn router() -> axum::Router<AppState> {
    axum::Router::new().route(PATH, get(openapi_json))
}

/// The document as built from the code.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Shortlink API",
        description = "Short links: management endpoints (`Authorization: Token <API key>`), the public \
                       dynamic-link validation endpoint and the origin's health check. Every error response \
                       has the body `{\"detail\": string, \"error_code\": string}`.",
        license(name = "MIT", identifier = "MIT"),
    ),
    paths(
        super::links::create_link,
        super::links::list_links,
        super::links::enabled_domains,
        super::groups::list_groups,
        super::dynamic::validate,
        super::stats::stats,
        super::healthz,
        openapi_json,
    ),
    components(schemas(ErrorBody, ErrorCode)),
    modifiers(&TokenScheme),
    tags(
        (name = "links", description = "Persistent short links of the key's account"),
        (name = "groups", description = "Link groups of the key's account"),
        (name = "dynamic", description = "Client-built dynamic links"),
        (name = "operations", description = "Health and the API description"),
    ),
)]
pub struct ApiDoc;

/// The `Token` security scheme the management endpoints name.
struct TokenScheme;

impl Modify for TokenScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "Token",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "Authorization",
                "Token <API key>",
            ))),
        );
    }
}

/// The document, serialized once.
pub fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        ApiDoc::openapi()
            .to_json()
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    })
}

/// The OpenAPI 3.1 document of this API.
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "operations",
    operation_id = "openapi",
    responses(
        (status = 200, description = "This document", content_type = "application/json", body = Object),
    ),
)]
async fn openapi_json() -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        document(),
    )
        .into_response()
}

// ---------------------------------------------------------------------------------------
// Schemas

/// Every error response: a message for people and a stable code for programs.
#[derive(ToSchema)]
#[schema(as = Error)]
#[allow(dead_code)]
pub(crate) struct ErrorBody {
    /// What went wrong, for people.
    detail: String,
    /// What went wrong, for programs.
    error_code: ErrorCode,
}

/// The failures of every endpoint that needs an API key (spec 5).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum AuthErrors {
    /// `not_authenticated`: missing, malformed, unknown or revoked key, or another scheme
    #[response(status = 401, headers(("WWW-Authenticate" = String, description = "`Token`")))]
    Unauthenticated(ErrorBody),
    /// `permission_denied`: the account has no API access
    #[response(status = 403)]
    Forbidden(ErrorBody),
}

/// The failures any endpoint may have.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum ServerErrors {
    /// `internal_error`: a bug
    #[response(status = 500)]
    Internal(ErrorBody),
    /// `service_unavailable`: database unreachable or request over 10 s
    #[response(status = 503, headers(("Retry-After" = i64, description = "1")))]
    Unavailable(ErrorBody),
}

/// The stable error codes (see the README's error table).
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)]
pub(crate) enum ErrorCode {
    /// 400: a field fails validation, or a JSON value has the wrong type.
    ValidationError,
    /// 400: the body is not JSON.
    InvalidJson,
    /// 400: the short code is taken on the target domain.
    ShortCodeExists,
    /// 400: no platform domain is enabled.
    PlatformDomainUnavailable,
    /// 400: list links, bad `limit`.
    InvalidLimit,
    /// 400: list links, bad `offset`.
    InvalidOffset,
    /// 400: list links, bad `match`.
    InvalidMatch,
    /// 400: list links, bad `long_url`.
    InvalidLongUrl,
    /// 401: missing, malformed, unknown, replaced or revoked key, or another scheme.
    NotAuthenticated,
    /// 403: the account has no API access.
    PermissionDenied,
    /// 404: unknown path or resource.
    NotFound,
    /// 405: known path, wrong method.
    MethodNotAllowed,
    /// 413: body over the limit.
    PayloadTooLarge,
    /// 415: the body is not declared as JSON.
    UnsupportedMediaType,
    /// 429: rate limit exceeded.
    RateLimited,
    /// 503: database unreachable or request over 10 s.
    ServiceUnavailable,
    /// 500: a bug; the cause is logged, never returned.
    InternalError,
}

/// A created link (spec 2, "Link (as created)"); mirrors `db::CreatedLink`.
#[derive(ToSchema)]
#[allow(dead_code)]
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

/// A listed link (spec 2, "Link (as listed)"); mirrors `db::ListedLink`.
#[derive(ToSchema)]
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
}

/// A domain usable as `domain_id`; mirrors `db::DomainRow`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct Domain {
    /// Domain id.
    #[schema(format = Uuid)]
    id: String,
    /// Hostname.
    domain: String,
}

/// The enabled domains, by hostname.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct DomainList {
    /// Platform domains and the account's active custom domains.
    results: Vec<Domain>,
}

/// Clicks on one day; mirrors `db::DayCount`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct DayCount {
    /// UTC date, `YYYY-MM-DD`.
    #[schema(format = Date)]
    date: String,
    /// Clicks that day.
    clicks: i64,
}

/// Clicks from one country; mirrors `db::CountryCount`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct CountryCount {
    /// ISO 3166-1 alpha-2, or null when the country was unknown.
    country: Option<String>,
    /// Clicks from it.
    clicks: i64,
}

/// The clicks of one link; mirrors `db::LinkStats`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct LinkStats {
    /// The link.
    #[schema(format = Uuid)]
    link_id: String,
    /// All clicks.
    total: i64,
    /// By UTC day, oldest first.
    by_day: Vec<DayCount>,
    /// By country, most clicks first.
    by_country: Vec<CountryCount>,
}

/// The publisher's lag and counters.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct PublisherHealth {
    /// Outbox rows not yet at the edge.
    pending: i64,
    /// Milliseconds since the oldest pending row was written (0 when none).
    oldest_age_ms: i64,
    /// Keys published since start.
    published: u64,
    /// Failed rounds since start.
    failures: u64,
    /// UNIX milliseconds of the last successful round (0: none yet).
    last_success_ms: i64,
}

/// The origin is up and its database answers.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct Health {
    /// Always `ok`.
    #[schema(pattern = "^ok$")]
    status: String,
    /// The publisher.
    publisher: PublisherHealth,
}

/// The database does not answer.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct Unhealthy {
    /// Always `unavailable`.
    #[schema(pattern = "^unavailable$")]
    status: String,
}

/// Query parameters of list links. The handler parses the raw query itself (one error code
/// per parameter, a repeated parameter refused); this struct only describes them.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct ListParams {
    /// Page size, plain decimal digits.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<u32>,
    /// Links to skip, plain decimal digits.
    #[param(minimum = 0, maximum = 1_000_000_000, default = 0)]
    offset: Option<u64>,
    /// Filter by destination URL (see `match`); the prefix is literal.
    #[param(max_length = 2048)]
    long_url: Option<String>,
    /// `exact` (the default) or `startswith`; applies to `long_url`.
    #[param(rename = "match", inline)]
    r#match: Option<MatchMode>,
}

/// How `long_url` filters.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub(crate) enum MatchMode {
    /// The whole URL.
    Exact,
    /// A prefix.
    Startswith,
}
