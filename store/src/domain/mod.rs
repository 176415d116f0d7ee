//! Validated values at the boundary: once one of these exists, it is valid.
//! Parse, don't validate — handlers and the store only ever see these types.

mod api_key;
mod click_batch_id;
mod day;
mod host;
mod list_query;
mod long_url;
mod password;
mod role;
mod settings;
mod short_code;
mod smart_link;
mod stats_query;
mod tag;
mod timestamp;

pub(crate) use api_key::hex;
pub use api_key::{ApiKey, ApiKeyHash, KeyFormatError};
pub use click_batch_id::ClickBatchId;
pub(crate) use day::DAY_MICROS;
pub use day::{Day, MAX_DAY, MIN_DAY};
pub use host::Hostname;
pub(crate) use host::parent_domains;
pub use list_query::{
    ExportFormat, LinkSort, ListParam, ListQuery, ListQueryError, MAX_Q_CHARS, MIN_Q_CHARS,
    MatchMode, PageQuery, prefix_upper_bound,
};
pub use long_url::LongUrl;
pub use password::{MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS, Password, SecretToken};
pub use role::{Permission, Role};
pub use settings::GroupSettings;
pub use short_code::{ShortCode, generate as generate_short_code};
pub use smart_link::{
    LinkPassword, LinkPasswordHash, LinkRules, MAX_LINK_PASSWORD_CHARS, MAX_LINK_RULES,
    MAX_MAX_CLICKS, MAX_OG_DESCRIPTION_CHARS, MAX_OG_TITLE_CHARS, MIN_LINK_PASSWORD_CHARS,
    MaxClicks, PreviewText, RedirectStatus, rules_to_api,
};
pub use stats_query::{
    ClickExportFormat, ClickExportQuery, DEFAULT_RANGE_DAYS, MAX_RANGE_DAYS, StatsFormat,
    StatsQuery,
};
pub use tag::{MAX_TAG_CHARS, MAX_TAGS, MAX_TITLE_CHARS, Tag, Title, sort_tag_names};
pub use timestamp::Micros;

/// Why a value was refused; the message is safe to show to the API client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ValidationError(pub String);

impl ValidationError {
    pub(crate) fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}
