//! The OpenAPI 3.1 document of the public API, generated from the handlers' `#[utoipa::path]`
//! attributes and the schemas below, served at `GET /api/v1/openapi.json`.
//!
//! Every request body and response type derives its schema where it is defined, beside its handler (the
//! error body and codes in `error.rs`), so the document cannot drift from what is served; this file only
//! lists the paths. The schemathesis run (`scripts/schemathesis.sh`) checks every response against it.

use super::error::{ErrorBody, ErrorCode};
use super::state::AppState;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::OnceLock;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::{Modify, OpenApi};

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
        super::link_export::export_links,
        super::imports::queue_import,
        super::imports::import_status,
        super::link_edits::get_link,
        super::link_edits::patch_link,
        super::link_edits::delete_link,
        super::qr::qr,
        super::bulk::bulk_create,
        super::groups::list_groups,
        super::groups::create_group,
        super::groups::get_group,
        super::groups::update_group,
        super::groups::delete_group,
        super::groups::rotate_key,
        super::dynamic::validate,
        super::stats::stats,
        super::stats::group_stats,
        super::stats::account_stats,
        super::click_export::link_clicks,
        super::click_export::group_clicks,
        super::click_export::account_clicks,
        super::audit::audit_log,
        super::tags::list_tags,
        super::tags::rename_tag,
        super::tags::delete_tag,
        super::webhooks::list_webhooks,
        super::webhooks::create_webhook,
        super::webhooks::get_webhook,
        super::webhooks::update_webhook,
        super::webhooks::delete_webhook,
        super::webhooks::rotate_secret,
        super::webhooks::test_webhook,
        super::webhooks::list_deliveries,
        super::webhooks::redeliver,
        super::health::healthz,
        openapi_json,
    ),
    components(schemas(ErrorBody, ErrorCode)),
    modifiers(&TokenScheme),
    tags(
        (name = "links", description = "Persistent short links of the key's account"),
        (name = "groups", description = "Link groups of the key's account"),
        (name = "tags", description = "Tags of the key's account's links"),
        (name = "dynamic", description = "Client-built dynamic links"),
        (name = "stats", description = "Click statistics of the key's whole account"),
        (name = "activity", description = "The activity log (audit trail) of the key's account"),
        (name = "webhooks", description = "Webhook endpoints of the key's account: signed events of its links, \
            groups and clicks (Standard Webhooks)"),
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
