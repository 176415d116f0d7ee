//! Click statistics (our extension): `GET /api/v1/external/links/{id}/stats`, `…/groups/{id}/stats` and
//! `…/stats` (the whole account), over a range of UTC days, as JSON or CSV. Read from the day counters only.
//! Another account's link or group, an unknown id and a malformed id all answer 404.

use super::error::{ApiError, AuthErrors, ErrorBody, ServerErrors};
use super::extract::{Caller, ResourceId};
use super::state::AppState;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;
use shortlink_store::csv;
use shortlink_store::domain::{Day, StatsFormat, StatsQuery};
use shortlink_store::{ClickStats, StatsScope, ValueCount};
use utoipa::ToSchema;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/external/links/{id}/stats", get(stats))
        .route("/api/v1/external/groups/{id}/stats", get(group_stats))
        .route("/api/v1/external/stats", get(account_stats))
}

/// The query of every statistics endpoint, for the OpenAPI document; the handlers read the raw query with
/// [`StatsQuery::parse`], so each bad value is a `validation_error` naming its parameter.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct StatsParams {
    /// First UTC day counted, `YYYY-MM-DD` (default: 29 days before `to`). At most 3,660 days before `to`.
    #[param(format = Date)]
    from: Option<String>,
    /// Last UTC day counted, inclusive, `YYYY-MM-DD` (default: today).
    #[param(format = Date)]
    to: Option<String>,
    /// `json` (the default) or `csv` (`dimension,value,clicks` records).
    #[param(pattern = "^(json|csv)$")]
    format: Option<String>,
}

/// Clicks on one day.
#[derive(Serialize, ToSchema)]
pub(crate) struct DayCount {
    /// UTC date, `YYYY-MM-DD`.
    #[schema(format = Date)]
    date: String,
    /// Clicks that day.
    clicks: i64,
}

/// Clicks from one country.
#[derive(Serialize, ToSchema)]
pub(crate) struct CountryCount {
    /// ISO 3166-1 alpha-2, or null when the country was unknown.
    country: Option<String>,
    /// Clicks from it.
    clicks: i64,
}

/// Clicks from one kind of device.
#[derive(Serialize, ToSchema)]
pub(crate) struct DeviceCount {
    /// `mobile`, `tablet`, `desktop` or `other`, from the User-Agent.
    device: String,
    /// Clicks from it.
    clicks: i64,
}

/// Clicks referred by one host.
#[derive(Serialize, ToSchema)]
pub(crate) struct ReferrerCount {
    /// Host of the `Referer`, or null for clicks without one.
    referer_host: Option<String>,
    /// Clicks it referred.
    clicks: i64,
}

/// The fields every statistics answer has.
struct Body {
    from: String,
    to: String,
    total: i64,
    by_day: Vec<DayCount>,
    by_country: Vec<CountryCount>,
    by_device: Vec<DeviceCount>,
    by_referrer: Vec<ReferrerCount>,
}

impl Body {
    fn new(q: &StatsQuery, s: ClickStats) -> Self {
        let pairs = |list: Vec<ValueCount>| list.into_iter().map(|v| (v.value, v.clicks));
        Self {
            from: q.from.to_iso_date(),
            to: q.to.to_iso_date(),
            total: s.total,
            by_day: s
                .by_day
                .into_iter()
                .map(|d| DayCount {
                    date: d.day.to_iso_date(),
                    clicks: d.clicks,
                })
                .collect(),
            by_country: pairs(s.by_country)
                .map(|(country, clicks)| CountryCount { country, clicks })
                .collect(),
            by_device: pairs(s.by_device)
                .map(|(device, clicks)| DeviceCount {
                    device: device.unwrap_or_default(),
                    clicks,
                })
                .collect(),
            by_referrer: pairs(s.by_referrer)
                .map(|(referer_host, clicks)| ReferrerCount {
                    referer_host,
                    clicks,
                })
                .collect(),
        }
    }

    /// `dimension,value,clicks`, then `total`, each day, country, device and referrer host, in the JSON's order;
    /// an unknown country and a missing referrer have an empty value.
    fn csv(&self) -> String {
        let mut out = String::from("dimension,value,clicks\r\n");
        csv::record(&mut out, &["total", ""], self.total);
        for d in &self.by_day {
            csv::record(&mut out, &["day", &d.date], d.clicks);
        }
        for c in &self.by_country {
            let value = c.country.as_deref().unwrap_or_default();
            csv::record(&mut out, &["country", value], c.clicks);
        }
        for d in &self.by_device {
            csv::record(&mut out, &["device", &d.device], d.clicks);
        }
        for r in &self.by_referrer {
            let value = r.referer_host.as_deref().unwrap_or_default();
            csv::record(&mut out, &["referrer", value], r.clicks);
        }
        out
    }
}

/// The JSON answer of one endpoint: its id field (if any), then the common fields. One definition, so the three
/// answers cannot drift apart.
macro_rules! stats_answer {
    ($(#[$meta:meta])* $name:ident $(, $id:ident = $id_doc:literal)?) => {
        $(#[$meta])*
        #[derive(Serialize, ToSchema)]
        pub(crate) struct $name {
            $(
                #[doc = $id_doc]
                #[schema(format = Uuid)]
                $id: String,
            )?
            /// First UTC day counted, `YYYY-MM-DD`.
            #[schema(format = Date)]
            from: String,
            /// Last UTC day counted (inclusive), `YYYY-MM-DD`.
            #[schema(format = Date)]
            to: String,
            /// All clicks in the range.
            total: i64,
            /// Days with clicks (days without are not listed), oldest first.
            by_day: Vec<DayCount>,
            /// Countries, most clicks first, then by code (unknown first); at most 100.
            by_country: Vec<CountryCount>,
            /// Devices, most clicks first, then by name.
            by_device: Vec<DeviceCount>,
            /// Referrer hosts, most clicks first, then by host (none first); at most 100.
            by_referrer: Vec<ReferrerCount>,
        }

        impl $name {
            fn new($($id: String,)? b: Body) -> Self {
                Self {
                    $($id,)?
                    from: b.from,
                    to: b.to,
                    total: b.total,
                    by_day: b.by_day,
                    by_country: b.by_country,
                    by_device: b.by_device,
                    by_referrer: b.by_referrer,
                }
            }
        }
    };
}

stats_answer!(
    /// The clicks of one link.
    LinkStats, link_id = "The link."
);
stats_answer!(
    /// The clicks attributed to one group when they happened: its links' and its dynamic links'.
    GroupStats, group_id = "The group."
);
stats_answer!(
    /// The clicks of every link and dynamic link of the account.
    AccountStats
);

/// Reads the query, then the statistics (None: not the caller's link or group), and answers in the asked
/// format, the JSON built by `json`.
async fn answer<T: Serialize>(
    state: &AppState,
    account_id: &str,
    scope: StatsScope<'_>,
    query: Option<&str>,
    json: impl FnOnce(Body) -> T,
) -> Result<Response, ApiError> {
    let q = StatsQuery::parse(query, Day::today()).map_err(|e| ApiError::Validation(e.0))?;
    // An export is read and written whole: under the render bound (as PNG QR codes), held until it is built, so a
    // burst of exports cannot take every core and connection from the other requests. JSON answers are the
    // API's everyday reads and stay unbounded.
    let _permit = match q.format {
        StatsFormat::Csv => Some(state.limits.renders.enter().await?),
        StatsFormat::Json => None,
    };
    let stats = state
        .db
        .click_stats(account_id, scope, q.from, q.to)
        .await?
        .ok_or(ApiError::NotFound)?;
    let body = Body::new(&q, stats);
    Ok(match q.format {
        StatsFormat::Json => axum::Json(json(body)).into_response(),
        StatsFormat::Csv => (
            [(header::CONTENT_TYPE, "text/csv; charset=utf-8")],
            body.csv(),
        )
            .into_response(),
    })
}

/// The clicks the edge recorded for one of the account's links (our extension), read from the day counters.
/// Another account's link, an unknown id and a malformed id all answer 404.
#[utoipa::path(
    get,
    path = "/api/v1/external/links/{id}/stats",
    tag = "links",
    operation_id = "link_stats",
    params(("id" = String, Path, format = Uuid, description = "The link's id"), StatsParams),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The link's clicks in the range",
            content((LinkStats = "application/json"), (String = "text/csv"))),
        (status = 400, description = "`validation_error`: `from`, `to` or `format` malformed or given twice, \
            `from` after `to`, or more than 3,660 days", body = ErrorBody),
        AuthErrors,
        (status = 404, description = "`not_found`: not one of the account's links", body = ErrorBody),
        ServerErrors,
    ),
)]
pub(crate) async fn stats(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let link_id = id.clone();
    answer(
        &state,
        &caller.account_id,
        StatsScope::Link(&id),
        query.as_deref(),
        |b| LinkStats::new(link_id, b),
    )
    .await
}

/// The clicks attributed to one of the account's groups when they happened (our extension): its links' and its
/// dynamic links'. Another account's group, an unknown id and a malformed id all answer 404.
#[utoipa::path(
    get,
    path = "/api/v1/external/groups/{id}/stats",
    tag = "groups",
    operation_id = "group_stats",
    params(("id" = String, Path, format = Uuid, description = "Group id"), StatsParams),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The group's clicks in the range",
            content((GroupStats = "application/json"), (String = "text/csv"))),
        (status = 400, description = "`validation_error`: `from`, `to` or `format` malformed or given twice, \
            `from` after `to`, or more than 3,660 days", body = ErrorBody),
        AuthErrors,
        (status = 404, description = "`not_found`: not one of the account's groups", body = ErrorBody),
        ServerErrors,
    ),
)]
pub(crate) async fn group_stats(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let group_id = id.clone();
    answer(
        &state,
        &caller.account_id,
        StatsScope::Group(&id),
        query.as_deref(),
        |b| GroupStats::new(group_id, b),
    )
    .await
}

/// The clicks of every link and dynamic link of the account (our extension).
#[utoipa::path(
    get,
    path = "/api/v1/external/stats",
    tag = "stats",
    operation_id = "account_stats",
    params(StatsParams),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The account's clicks in the range",
            content((AccountStats = "application/json"), (String = "text/csv"))),
        (status = 400, description = "`validation_error`: `from`, `to` or `format` malformed or given twice, \
            `from` after `to`, or more than 3,660 days", body = ErrorBody),
        AuthErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn account_stats(
    State(state): State<AppState>,
    Caller(caller): Caller,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    answer(
        &state,
        &caller.account_id,
        StatsScope::Account,
        query.as_deref(),
        AccountStats::new,
    )
    .await
}
