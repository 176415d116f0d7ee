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
use shortlink_store::{ClickStats, PlaceCount, StatsScope, ValueCount};
use std::collections::BTreeMap;
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

/// Clicks, unique visitors, and bots the edge did not count, on one day.
#[derive(Serialize, ToSchema)]
pub(crate) struct DayCount {
    /// UTC date, `YYYY-MM-DD`.
    #[schema(format = Date)]
    date: String,
    /// Clicks that day.
    clicks: i64,
    /// Visitors that day, each counted once per link (a link's own; a group's or an account's, the sum of its
    /// links'). Clicks whose visitor could not be told apart (no address, or reported after the day's salt
    /// was deleted) are not in it.
    unique_visitors: i64,
    /// Requests recognised as bots or link previews that day: not clicks, not in `clicks`.
    bots: i64,
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

/// Clicks with one browser.
#[derive(Serialize, ToSchema)]
pub(crate) struct BrowserCount {
    /// `chrome`, `safari`, `firefox`, `edge`, `samsung`, `opera` or `other`, from the User-Agent.
    browser: String,
    /// Clicks with it.
    clicks: i64,
}

/// Clicks from one operating system.
#[derive(Serialize, ToSchema)]
pub(crate) struct OsCount {
    /// `ios`, `android`, `windows`, `macos`, `linux`, `chromeos` or `other`, from the User-Agent.
    os: String,
    /// Clicks from it.
    clicks: i64,
}

/// Clicks from one region of one country.
#[derive(Serialize, ToSchema)]
pub(crate) struct RegionCount {
    /// ISO 3166-1 alpha-2, or null when the country was unknown.
    country: Option<String>,
    /// The region's name as Cloudflare gives it (`cf.region`), or null when unknown.
    region: Option<String>,
    /// Clicks from it.
    clicks: i64,
}

/// Clicks from one city of one country.
#[derive(Serialize, ToSchema)]
pub(crate) struct CityCount {
    /// ISO 3166-1 alpha-2, or null when the country was unknown.
    country: Option<String>,
    /// The city's name as Cloudflare gives it (`cf.city`), or null when unknown.
    city: Option<String>,
    /// Clicks from it.
    clicks: i64,
}

/// Clicks with one value of a UTM parameter.
#[derive(Serialize, ToSchema)]
pub(crate) struct UtmCount {
    /// The parameter's value in the visited URL (decoded), or null for clicks whose URL had none.
    value: Option<String>,
    /// Clicks with it.
    clicks: i64,
}

/// Clicks by the visited URL's UTM parameters: each list most clicks first, then by value (none first); at
/// most 100 each.
#[derive(Serialize, ToSchema)]
pub(crate) struct UtmLists {
    /// `utm_source`.
    utm_source: Vec<UtmCount>,
    /// `utm_medium`.
    utm_medium: Vec<UtmCount>,
    /// `utm_campaign`.
    utm_campaign: Vec<UtmCount>,
}

/// The fields every statistics answer has.
struct Body {
    from: String,
    to: String,
    total: i64,
    unique_visitors: i64,
    bots: i64,
    by_day: Vec<DayCount>,
    by_country: Vec<CountryCount>,
    by_device: Vec<DeviceCount>,
    by_referrer: Vec<ReferrerCount>,
    by_browser: Vec<BrowserCount>,
    by_os: Vec<OsCount>,
    by_region: Vec<RegionCount>,
    by_city: Vec<CityCount>,
    by_utm: UtmLists,
}

/// The days with clicks or bots, oldest first.
fn days(s: &ClickStats) -> Vec<DayCount> {
    let mut days: BTreeMap<_, (i64, i64, i64)> = BTreeMap::new();
    for d in &s.by_day {
        days.entry(d.day).or_default().0 = d.clicks;
    }
    for d in &s.bots_by_day {
        days.entry(d.day).or_default().1 = d.clicks;
    }
    for d in &s.uniques_by_day {
        days.entry(d.day).or_default().2 = d.clicks;
    }
    days.into_iter()
        .map(|(day, (clicks, bots, unique_visitors))| DayCount {
            date: day.to_iso_date(),
            clicks,
            unique_visitors,
            bots,
        })
        .collect()
}

impl Body {
    fn new(q: &StatsQuery, s: ClickStats) -> Self {
        let pairs = |list: Vec<ValueCount>| list.into_iter().map(|v| (v.value, v.clicks));
        let utm = |list: Vec<ValueCount>| {
            pairs(list)
                .map(|(value, clicks)| UtmCount { value, clicks })
                .collect()
        };
        let places =
            |list: Vec<PlaceCount>| list.into_iter().map(|p| (p.country, p.name, p.clicks));
        Self {
            from: q.from.to_iso_date(),
            to: q.to.to_iso_date(),
            total: s.total,
            unique_visitors: s.unique_visitors,
            bots: s.bots,
            by_day: days(&s),
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
            by_browser: pairs(s.by_browser)
                .map(|(browser, clicks)| BrowserCount {
                    browser: browser.unwrap_or_default(),
                    clicks,
                })
                .collect(),
            by_os: pairs(s.by_os)
                .map(|(os, clicks)| OsCount {
                    os: os.unwrap_or_default(),
                    clicks,
                })
                .collect(),
            by_region: places(s.by_region)
                .map(|(country, region, clicks)| RegionCount {
                    country,
                    region,
                    clicks,
                })
                .collect(),
            by_city: places(s.by_city)
                .map(|(country, city, clicks)| CityCount {
                    country,
                    city,
                    clicks,
                })
                .collect(),
            by_utm: UtmLists {
                utm_source: utm(s.by_utm.source),
                utm_medium: utm(s.by_utm.medium),
                utm_campaign: utm(s.by_utm.campaign),
            },
        }
    }

    /// `dimension,value,clicks`, then `total`, `unique_visitors` and `bots`, each day's clicks (`day`, days with
    /// clicks), unique visitors (`unique_day`, days with some) and bots (`bots_day`, days with bots), then country, device, referrer host, browser, OS, region, city and the UTM
    /// parameters, in the JSON's order; an unknown or missing value is empty. A region or city is
    /// `<country>/<name>` (the country is two characters or empty, so the first `/` separates them).
    fn csv(&self) -> String {
        let mut out = String::from("dimension,value,clicks\r\n");
        csv::record(&mut out, &["total", ""], self.total);
        csv::record(&mut out, &["unique_visitors", ""], self.unique_visitors);
        csv::record(&mut out, &["bots", ""], self.bots);
        for d in self.by_day.iter().filter(|d| d.clicks > 0) {
            csv::record(&mut out, &["day", &d.date], d.clicks);
        }
        for d in self.by_day.iter().filter(|d| d.unique_visitors > 0) {
            csv::record(&mut out, &["unique_day", &d.date], d.unique_visitors);
        }
        for d in self.by_day.iter().filter(|d| d.bots > 0) {
            csv::record(&mut out, &["bots_day", &d.date], d.bots);
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
        for b in &self.by_browser {
            csv::record(&mut out, &["browser", &b.browser], b.clicks);
        }
        for o in &self.by_os {
            csv::record(&mut out, &["os", &o.os], o.clicks);
        }
        let place = |country: &Option<String>, name: &Option<String>| {
            format!(
                "{}/{}",
                country.as_deref().unwrap_or_default(),
                name.as_deref().unwrap_or_default()
            )
        };
        for r in &self.by_region {
            csv::record(
                &mut out,
                &["region", &place(&r.country, &r.region)],
                r.clicks,
            );
        }
        for c in &self.by_city {
            csv::record(&mut out, &["city", &place(&c.country, &c.city)], c.clicks);
        }
        for (dimension, list) in [
            ("utm_source", &self.by_utm.utm_source),
            ("utm_medium", &self.by_utm.utm_medium),
            ("utm_campaign", &self.by_utm.utm_campaign),
        ] {
            for u in list {
                let value = u.value.as_deref().unwrap_or_default();
                csv::record(&mut out, &[dimension, value], u.clicks);
            }
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
            /// Unique visitors in the range: the sum of each day's (`by_day[].unique_visitors`). A visitor is
            /// counted once per link per UTC day, so one who comes back another day counts again.
            unique_visitors: i64,
            /// Requests in the range that the edge recognised as bots or link previews and did not count: in
            /// no other figure, `total` included.
            bots: i64,
            /// Days with clicks or bots (days with neither are not listed), oldest first.
            by_day: Vec<DayCount>,
            /// Countries, most clicks first, then by code (unknown first); at most 100.
            by_country: Vec<CountryCount>,
            /// Devices, most clicks first, then by name.
            by_device: Vec<DeviceCount>,
            /// Referrer hosts, most clicks first, then by host (none first); at most 100.
            by_referrer: Vec<ReferrerCount>,
            /// Browsers, most clicks first, then by name.
            by_browser: Vec<BrowserCount>,
            /// Operating systems, most clicks first, then by name.
            by_os: Vec<OsCount>,
            /// Regions, most clicks first, then by country and name (unknown first); at most 100.
            by_region: Vec<RegionCount>,
            /// Cities, most clicks first, then by country and name (unknown first); at most 100.
            by_city: Vec<CityCount>,
            /// The visited URLs' `utm_source`, `utm_medium` and `utm_campaign`.
            by_utm: UtmLists,
        }

        impl $name {
            fn new($($id: String,)? b: Body) -> Self {
                Self {
                    $($id,)?
                    from: b.from,
                    to: b.to,
                    total: b.total,
                    unique_visitors: b.unique_visitors,
                    bots: b.bots,
                    by_day: b.by_day,
                    by_country: b.by_country,
                    by_device: b.by_device,
                    by_referrer: b.by_referrer,
                    by_browser: b.by_browser,
                    by_os: b.by_os,
                    by_region: b.by_region,
                    by_city: b.by_city,
                    by_utm: b.by_utm,
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
