//! `POST /__shortlink/sync`: the origin's authenticated writer into the worker's KV namespace.
//!
//! ```text
//! Authorization: Bearer <SYNC_SECRET>
//! {"put":[{"key":"link:go.example.com:abc","value":{"v":1,…}}],"delete":["group:…"]}
//! → 200 {"ok":true,"put":1,"deleted":1} | 400 {"ok":false,"error":"…"} | 401 {"ok":false,"error":"unauthorized"}
//! ```
//!
//! Values are stored as the JSON text the origin sent (its publisher sends compact JSON). Puts and deletes are idempotent, so the origin's publisher can
//! retry a batch whose answer it did not get. The route also evicts the keys from this isolate's cache (other
//! isolates see the change when their entries expire). Without a configured secret the route does not exist (404).

use serde::Deserialize;
use subtle::ConstantTimeEq;

/// Largest accepted body, in bytes.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Most operations (puts plus deletes) in one batch.
pub const MAX_OPS: usize = 1000;
/// Longest KV key Workers KV accepts, in bytes.
pub const MAX_KEY_BYTES: usize = 512;

/// A validated batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Keys and the JSON text to store.
    pub puts: Vec<(String, String)>,
    /// Keys to delete.
    pub deletes: Vec<String>,
}

impl Batch {
    /// Every key the batch touches.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.puts
            .iter()
            .map(|(k, _)| k.as_str())
            .chain(self.deletes.iter().map(String::as_str))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBatch {
    #[serde(default)]
    put: Vec<RawPut>,
    #[serde(default)]
    delete: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPut {
    key: String,
    /// The value's text as sent, checked as JSON but not parsed into a tree: a `serde_json::Value` would bring its
    /// parser, map type and serializer into the wasm for this route alone (BENCHMARKS.md, "Cold start").
    value: Box<serde_json::value::RawValue>,
}

/// Parses and checks a request body: at most [`MAX_BODY_BYTES`] and [`MAX_OPS`], keys of the KV contract
/// (`link:`, `group:`, `domain:`, `salt:`, `blocklist`) within [`MAX_KEY_BYTES`], JSON object values, no key both put
/// and deleted. The error is a short machine-readable message for the 400 body.
pub fn parse_batch(body: &[u8]) -> Result<Batch, String> {
    if body.len() > MAX_BODY_BYTES {
        return Err("body_too_large".into());
    }
    // serde's derived structs also accept a JSON array; the contract is an object.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err("invalid_json: expected an object".into());
    }
    let raw: RawBatch = serde_json::from_slice(body).map_err(|e| format!("invalid_json: {e}"))?;
    if raw.put.len() + raw.delete.len() > MAX_OPS {
        return Err("too_many_operations".into());
    }
    let mut puts = Vec::with_capacity(raw.put.len());
    for put in raw.put {
        check_key(&put.key)?;
        // A raw value holds no whitespace around it: an object's text starts with its brace.
        if !put.value.get().starts_with('{') {
            return Err(format!("value_not_an_object: {}", put.key));
        }
        puts.push((put.key, String::from(put.value.get())));
    }
    for key in &raw.delete {
        check_key(key)?;
        if puts.iter().any(|(k, _)| k == key) {
            return Err(format!("key_put_and_deleted: {key}"));
        }
    }
    Ok(Batch {
        puts,
        deletes: raw.delete,
    })
}

fn check_key(key: &str) -> Result<(), String> {
    let known = key == kv_model::BLOCKLIST_KEY
        || ["link:", "group:", "domain:", "salt:"]
            .iter()
            .any(|p| key.len() > p.len() && key.starts_with(p));
    if !known || key.len() > MAX_KEY_BYTES || key.chars().any(char::is_control) {
        // Keys are echoed only when short and printable, so the error body stays small and clean.
        let shown = if key.len() <= 64 && !key.chars().any(char::is_control) {
            key
        } else {
            "…"
        };
        return Err(format!("invalid_key: {shown}"));
    }
    Ok(())
}

/// The result of checking the `Authorization` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// No secret configured: the route is disabled (404).
    Disabled,
    /// Missing or wrong credentials (401).
    Denied,
    /// The bearer token equals the secret.
    Allowed,
}

/// Checks `Authorization: Bearer <secret>` against the configured secret, comparing in constant time.
pub fn authorize(header: Option<&str>, secret: Option<&str>) -> Auth {
    let Some(secret) = secret.filter(|s| !s.is_empty()) else {
        return Auth::Disabled;
    };
    let token = header.and_then(|h| {
        let (scheme, token) = h.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
    });
    match token {
        Some(token) if bool::from(token.as_bytes().ct_eq(secret.as_bytes())) => Auth::Allowed,
        _ => Auth::Denied,
    }
}

/// The `200` body: `{"deleted":m,"ok":true,"put":n}`.
pub fn ok_body(batch: &Batch) -> String {
    format!(
        "{{\"deleted\":{},\"ok\":true,\"put\":{}}}",
        batch.deletes.len(),
        batch.puts.len()
    )
}

/// An error body: `{"error":"…","ok":false}`.
pub fn error_body(error: &str) -> String {
    // serde_json's string serializer escapes the text; it cannot fail on a `str`.
    let error = serde_json::to_string(error).unwrap_or_default();
    format!("{{\"error\":{error},\"ok\":false}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_batch() {
        let body = br#"{"put":[{"key":"link:go.example:abc","value":{"v":1,"x":[1, 2]}},
                               {"key":"blocklist","value":{"v":1,"domains":[]}}],
                        "delete":["group:g1","domain:go.example","salt:20784"]}"#;
        let batch = parse_batch(body).unwrap();
        assert_eq!(
            batch.puts,
            vec![
                (
                    "link:go.example:abc".to_string(),
                    r#"{"v":1,"x":[1, 2]}"#.to_string()
                ),
                (
                    "blocklist".to_string(),
                    r#"{"v":1,"domains":[]}"#.to_string()
                ),
            ]
        );
        assert_eq!(
            batch.deletes,
            vec!["group:g1", "domain:go.example", "salt:20784"]
        );
        assert_eq!(batch.keys().count(), 5);
        assert_eq!(ok_body(&batch), r#"{"deleted":3,"ok":true,"put":2}"#);
        assert_eq!(
            parse_batch(b"{}").unwrap(),
            Batch {
                puts: vec![],
                deletes: vec![]
            }
        );
    }

    #[test]
    fn invalid_batches() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "invalid_json"),
            (b"[]", "invalid_json"),
            (br#"{"put":[],"other":1}"#, "invalid_json"),
            (br#"{"put":[{"key":"link:a:b"}]}"#, "invalid_json"),
            (
                br#"{"put":[{"key":"link:a:b","value":"{}"}]}"#,
                "value_not_an_object",
            ),
            (br#"{"put":[{"key":"secret","value":{}}]}"#, "invalid_key"),
            (br#"{"delete":["link:"]}"#, "invalid_key"),
            (br#"{"delete":["link:a\nb"]}"#, "invalid_key"),
            (
                br#"{"put":[{"key":"group:g","value":{}}],"delete":["group:g"]}"#,
                "key_put_and_deleted",
            ),
        ];
        for (body, error) in cases {
            let got = parse_batch(body).unwrap_err();
            assert!(
                got.starts_with(error),
                "{}: {got}",
                String::from_utf8_lossy(body)
            );
        }
        let long_key = format!(r#"{{"delete":["link:{}"]}}"#, "a".repeat(MAX_KEY_BYTES));
        assert!(
            parse_batch(long_key.as_bytes())
                .unwrap_err()
                .starts_with("invalid_key")
        );
        let many = format!(
            r#"{{"delete":[{}]}}"#,
            vec!["\"group:g\""; MAX_OPS + 1].join(",")
        );
        assert_eq!(
            parse_batch(many.as_bytes()).unwrap_err(),
            "too_many_operations"
        );
        let exactly = format!(
            r#"{{"delete":[{}]}}"#,
            vec!["\"group:g\""; MAX_OPS].join(",")
        );
        assert!(parse_batch(exactly.as_bytes()).is_ok());
        assert_eq!(
            parse_batch(&vec![b' '; MAX_BODY_BYTES + 1]).unwrap_err(),
            "body_too_large"
        );
    }

    #[test]
    fn authorization() {
        assert_eq!(authorize(Some("Bearer s3cret"), None), Auth::Disabled);
        assert_eq!(authorize(Some("Bearer "), Some("")), Auth::Disabled);
        assert_eq!(
            authorize(Some("Bearer s3cret"), Some("s3cret")),
            Auth::Allowed
        );
        assert_eq!(
            authorize(Some("bearer  s3cret "), Some("s3cret")),
            Auth::Allowed
        );
        for header in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer s3cre"),
            Some("Bearer s3cret2"),
            Some("Token s3cret"),
            Some("s3cret"),
        ] {
            assert_eq!(
                authorize(header, Some("s3cret")),
                Auth::Denied,
                "{header:?}"
            );
        }
    }
}
