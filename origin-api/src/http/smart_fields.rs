//! The smart-link fields of create-link, bulk-create and `PATCH links/{id}` (issue 25): their JSON, their checks
//! (the store's newtypes; every refusal a `400 validation_error` naming the field) and the password's hashing.

use super::error::ApiError;
use super::state::AppState;
use serde_json::Value;
use shortlink_store::domain::{
    LinkPassword, LinkPasswordHash, LinkRules, LongUrl, MAX_OG_DESCRIPTION_CHARS,
    MAX_OG_TITLE_CHARS, MaxClicks, PreviewText, RedirectStatus, ValidationError,
};
use shortlink_store::{LinkOptions, LinkOptionsPatch};
use utoipa::ToSchema;

fn invalid(e: ValidationError) -> ApiError {
    ApiError::Validation(e.0)
}

/// The smart-link fields of a create-link body, as [`super::links::CreateLinkBody`] read them; `None`: absent
/// or `null` (not set).
#[derive(Debug, Default)]
pub(crate) struct SmartFieldsBody {
    pub(crate) rules: Option<Value>,
    pub(crate) ios_url: Option<String>,
    pub(crate) android_url: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) expired_url: Option<String>,
    pub(crate) max_clicks: Option<i64>,
    pub(crate) redirect_status: Option<i64>,
    pub(crate) og_title: Option<String>,
    pub(crate) og_description: Option<String>,
    pub(crate) og_image: Option<String>,
}

/// One rule (documentation of the `rules` field; the handler reads the JSON itself, to name the place of an
/// error, e.g. `rules[2].if.os[0]`).
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct RuleSchema {
    /// The conditions, at least one; all must hold.
    #[serde(rename = "if")]
    when: ConditionsSchema,
    /// The destination; create-link's URL rules.
    #[schema(max_length = 2048, pattern = "^https://")]
    to: String,
}

/// A rule's conditions (documentation; never built). Lists are "one of"; unknown fields are refused.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct ConditionsSchema {
    /// ISO 3166-1 alpha-2 codes (two letters, any case; shown uppercase), 1 to 50.
    #[schema(max_items = 50, example = json!(["DE", "AT"]))]
    country: Option<Vec<String>>,
    /// `mobile`, `tablet` or `desktop`: one, or a list (shown as a list).
    #[schema(value_type = Option<Vec<String>>, example = json!(["mobile"]))]
    device: Option<Vec<String>>,
    /// `ios`, `android`, `windows`, `macos`, `linux` or `other`: one, or a list (shown as a list).
    #[schema(value_type = Option<Vec<String>>, example = json!(["ios"]))]
    os: Option<Vec<String>>,
    /// Primary language tags (2 or 3 letters; shown lowercase), 1 to 50, matched against the visitor's first
    /// `Accept-Language` preference.
    #[schema(max_items = 50, example = json!(["de"]))]
    language: Option<Vec<String>>,
    /// 1 to 10 query parameters the visitor's URL must carry, name → value or `"*"` (any value); names and
    /// values 1 to 100 characters.
    #[schema(value_type = Option<Object>, example = json!({"utm_source": "mail", "ref": "*"}))]
    query: Option<Value>,
    /// From this instant (RFC 3339 in UTC; kept to the millisecond, rounded up; shown as `created_at` is).
    #[schema(format = DateTime)]
    after: Option<String>,
    /// Until this instant, exclusive (as `after`; later than `after` when both are given).
    #[schema(format = DateTime)]
    before: Option<String>,
}

/// An optional URL by create-link's rules, `field` named in the error.
fn url(field: &str, raw: Option<&str>) -> Result<Option<LongUrl>, ApiError> {
    raw.map(|u| LongUrl::parse_field(field, u))
        .transpose()
        .map_err(invalid)
}

fn og_title(raw: Option<&str>) -> Result<Option<PreviewText>, ApiError> {
    raw.map(|t| PreviewText::parse("og_title", t, MAX_OG_TITLE_CHARS))
        .transpose()
        .map(Option::flatten)
        .map_err(invalid)
}

fn og_description(raw: Option<&str>) -> Result<Option<PreviewText>, ApiError> {
    raw.map(|t| PreviewText::parse("og_description", t, MAX_OG_DESCRIPTION_CHARS))
        .transpose()
        .map(Option::flatten)
        .map_err(invalid)
}

fn max_clicks(raw: Option<i64>) -> Result<Option<MaxClicks>, ApiError> {
    raw.map(MaxClicks::parse).transpose().map_err(invalid)
}

fn password(raw: Option<&str>) -> Result<Option<LinkPassword>, ApiError> {
    raw.map(LinkPassword::parse).transpose().map_err(invalid)
}

impl SmartFieldsBody {
    /// The validated fields, and the password still to hash ([`hash_password`]).
    pub(crate) fn parse(self) -> Result<(LinkOptions, Option<LinkPassword>), ApiError> {
        let options = LinkOptions {
            rules: LinkRules::parse(self.rules.as_ref().unwrap_or(&Value::Null))
                .map_err(invalid)?,
            ios_url: url("ios_url", self.ios_url.as_deref())?,
            android_url: url("android_url", self.android_url.as_deref())?,
            password: None,
            expired_url: url("expired_url", self.expired_url.as_deref())?,
            max_clicks: max_clicks(self.max_clicks)?,
            redirect_status: self
                .redirect_status
                .map(RedirectStatus::parse)
                .transpose()
                .map_err(invalid)?
                .unwrap_or_default(),
            og_title: og_title(self.og_title.as_deref())?,
            og_description: og_description(self.og_description.as_deref())?,
            og_image: url("og_image", self.og_image.as_deref())?,
        };
        Ok((options, password(self.password.as_deref())?))
    }
}

/// The smart-link fields of a PATCH body, as [`super::link_edits::LinkPatchBody`] read them: `None` absent,
/// `Some(None)` an explicit `null` (clears the field; `redirect_status` back to 302, `rules` to none).
#[derive(Debug, Default)]
pub(crate) struct SmartPatch {
    pub(crate) rules: Option<Option<Value>>,
    pub(crate) ios_url: Option<Option<String>>,
    pub(crate) android_url: Option<Option<String>>,
    pub(crate) password: Option<Option<String>>,
    pub(crate) expired_url: Option<Option<String>>,
    pub(crate) max_clicks: Option<Option<i64>>,
    pub(crate) redirect_status: Option<Option<i64>>,
    pub(crate) og_title: Option<Option<String>>,
    pub(crate) og_description: Option<Option<String>>,
    pub(crate) og_image: Option<Option<String>>,
}

impl SmartPatch {
    /// The validated changes, and the new password still to hash (`Some(None)`: remove it).
    pub(crate) fn parse(
        self,
    ) -> Result<(LinkOptionsPatch, Option<Option<LinkPassword>>), ApiError> {
        let set_url = |field: &str, v: Option<Option<String>>| {
            v.map(|u| url(field, u.as_deref())).transpose()
        };
        let patch = LinkOptionsPatch {
            rules: self
                .rules
                .map(|r| LinkRules::parse(r.as_ref().unwrap_or(&Value::Null)))
                .transpose()
                .map_err(invalid)?,
            ios_url: set_url("ios_url", self.ios_url)?,
            android_url: set_url("android_url", self.android_url)?,
            password: None,
            expired_url: set_url("expired_url", self.expired_url)?,
            max_clicks: self.max_clicks.map(max_clicks).transpose()?,
            redirect_status: self
                .redirect_status
                .map(|s| s.map(RedirectStatus::parse).transpose())
                .transpose()
                .map_err(invalid)?
                .map(Option::unwrap_or_default),
            og_title: self.og_title.map(|t| og_title(t.as_deref())).transpose()?,
            og_description: self
                .og_description
                .map(|t| og_description(t.as_deref()))
                .transpose()?,
            og_image: set_url("og_image", self.og_image)?,
        };
        let password = self.password.map(|p| password(p.as_deref())).transpose()?;
        Ok((patch, password))
    }
}

/// The hash of a new password, computed under the origin's password-hashing bound off the async runtime (a
/// `503` when no turn comes in time).
pub(crate) async fn hash_password(
    state: &AppState,
    password: Option<LinkPassword>,
) -> Result<Option<LinkPasswordHash>, ApiError> {
    match password {
        Some(p) => Ok(Some(state.db.hash_link_password(&p).await?)),
        None => Ok(None),
    }
}
