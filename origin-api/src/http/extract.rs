//! Extractors that fail with [`ApiError`], so authentication and bad bodies get our shape.

use super::error::ApiError;
use super::state::AppState;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{header, request::Parts};
use serde::de::DeserializeOwned;
use shortlink_store::AuthContext;
use shortlink_store::domain::{ApiKey, KeyFormatError};

/// The authenticated caller of a management endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub(crate) AuthContext);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or(ApiError::Unauthenticated("missing Authorization header"))?
            .to_str()
            .map_err(|_| ApiError::Unauthenticated("malformed Authorization header"))?;
        let key = ApiKey::from_authorization(header).map_err(|e| match e {
            KeyFormatError::WrongScheme => {
                ApiError::Unauthenticated("the Authorization header must be: Token <API key>")
            }
            KeyFormatError::Malformed => ApiError::Unauthenticated("invalid API key"),
        })?;
        let ctx = state
            .db
            .authenticate(&key)
            .await?
            .ok_or(ApiError::Unauthenticated("invalid API key"))?;
        if ctx.disabled {
            return Err(ApiError::AccountDisabled);
        }
        if !ctx.api_access {
            return Err(ApiError::Forbidden);
        }
        Ok(Self(ctx))
    }
}

/// Largest body a management request may have. create-link needs ~2.3 KB at most.
pub(crate) const MAX_BODY_BYTES: usize = 16 * 1024;

/// A JSON body of at most `LIMIT` bytes; every failure maps to the error shape.
#[derive(Debug)]
pub(crate) struct JsonBody<T, const LIMIT: usize = MAX_BODY_BYTES>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync, const LIMIT: usize> FromRequest<S>
    for JsonBody<T, LIMIT>
{
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, ApiError> {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|mime| {
                let mime = mime.trim().to_ascii_lowercase();
                mime == "application/json"
                    || (mime.starts_with("application/") && mime.ends_with("+json"))
            })
            .unwrap_or(false);
        if !is_json {
            return Err(ApiError::UnsupportedMediaType);
        }
        let bytes = axum::body::to_bytes(req.into_body(), LIMIT)
            .await
            .map_err(|_| ApiError::PayloadTooLarge)?;
        // Every body we take is an object; serde would also read a struct from an array, by position.
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if first.is_some_and(|b| *b == b'[')
            && serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok()
        {
            return Err(ApiError::Validation(
                "the body must be a JSON object".to_owned(),
            ));
        }
        // serde_path_to_error, so a wrong type names its field ("links[3].long_url: invalid type ...").
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            body_error(e.into_inner(), (path != ".").then_some(path))
        })?;
        de.end().map_err(|e| body_error(e, None))?;
        Ok(JsonBody(value))
    }
}

/// A body serde refused: well-formed JSON of the wrong shape fails validation (naming the field when there is
/// one); anything else is not JSON.
fn body_error(e: serde_json::Error, path: Option<String>) -> ApiError {
    use serde_json::error::Category;
    match (e.classify(), path) {
        (Category::Data, Some(path)) => ApiError::Validation(format!("{path}: {e}")),
        (Category::Data, None) => ApiError::Validation(e.to_string()),
        (Category::Syntax | Category::Eof | Category::Io, _) => {
            ApiError::InvalidJson(format!("the body is not valid JSON: {e}"))
        }
    }
}

/// The `{id}` of a resource path: a UUID, normalised to lowercase hyphenated form. Anything else is not the id of
/// anything, so it is a 404 like an unknown id (never a 5xx, never the framework's own rejection).
#[derive(Debug, Clone)]
pub(crate) struct ResourceId(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for ResourceId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|_| ApiError::NotFound)?;
        uuid::Uuid::try_parse(&raw)
            .map(|u| Self(u.hyphenated().to_string()))
            .map_err(|_| ApiError::NotFound)
    }
}
