//! What every dashboard response and every state-changing request goes through: the browser-side protections
//! (CSP, no framing, no sniffing, no referrer beyond our own pages, no caching of account data) and the Origin
//! check that refuses a form posted from another site. Forms of a signed-in session also carry a CSRF token
//! ([`crate::session::SignedIn::check_csrf`]); the Origin check is what protects the sign-in and invitation forms.

use crate::DashboardState;
use crate::error::DashboardError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// `default-src 'self'` (the floor) plus: no framing, no `<base>` rewrites, forms post only to us.
const CSP: &str = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Refuses cross-site posts, then sets the security headers on whatever the handler answered.
pub(crate) async fn guard(
    State(state): State<DashboardState>,
    req: Request,
    next: Next,
) -> Response {
    let is_asset = req.uri().path().starts_with("/dashboard/assets/");
    let declared_len = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut response = if !matches!(*req.method(), Method::GET | Method::HEAD)
        && !same_origin(req.headers(), state.public_origin.as_deref())
    {
        DashboardError::CrossSite.into_response()
    } else if declared_len.is_some_and(|n| {
        let limit = if req.uri().path() == crate::IMPORT_PATH {
            crate::MAX_IMPORT_FORM_BYTES
        } else {
            crate::MAX_FORM_BYTES
        };
        n > limit as u64
    }) {
        // Refused with our page before the body is read; a chunked body without a length meets the body limit.
        DashboardError::TooLarge.into_response()
    } else {
        next.run(req).await
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Invitation URLs carry their token: no other site may see our URLs in a Referer.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !is_asset {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    // Served over https (the public URL says so): the browser never tries plain http again for a year, so a
    // network attacker cannot strip TLS off the next visit and read the session cookie's first request.
    if state.secure_cookies {
        h.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    response
}

/// A post is ours when the browser says so: its `Origin` is the page's own (scheme aside: behind a TLS proxy
/// the origin sees http) or the configured public origin, and `Sec-Fetch-Site` (when sent) is not another
/// site's. Browsers send `Origin` on every cross-site post; a request with neither header comes from a program,
/// not from a victim's browser, and still needs a session's CSRF token for anything but signing in.
pub(crate) fn same_origin(headers: &HeaderMap, public_origin: Option<&str>) -> bool {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = value("sec-fetch-site") {
        if !matches!(site, "same-origin" | "none") {
            return false;
        }
    }
    let Some(origin) = value("origin") else {
        return true;
    };
    if public_origin.is_some_and(|p| p.trim_end_matches('/').eq_ignore_ascii_case(origin)) {
        return true;
    }
    let authority = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    match (authority, value("host")) {
        (Some(a), Some(host)) => a.eq_ignore_ascii_case(host),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn origin_rules() {
        let ours = [
            ("host", "dash.example.com"),
            ("origin", "https://dash.example.com"),
        ];
        assert!(same_origin(&headers(&ours), None));
        // Behind a TLS proxy the scheme differs from what the origin sees; the host is what counts.
        assert!(same_origin(
            &headers(&[
                ("host", "127.0.0.1:8080"),
                ("origin", "http://127.0.0.1:8080")
            ]),
            None
        ));
        assert!(!same_origin(
            &headers(&[
                ("host", "dash.example.com"),
                ("origin", "https://evil.example")
            ]),
            None
        ));
        assert!(!same_origin(
            &headers(&[("host", "dash.example.com"), ("origin", "null")]),
            None
        ));
        assert!(!same_origin(
            &headers(&[
                ("host", "dash.example.com"),
                ("origin", "https://dash.example.com.evil.example")
            ]),
            None
        ));
        // The configured public origin, reached through a proxy that rewrites Host.
        assert!(same_origin(
            &headers(&[
                ("host", "10.0.0.5:8080"),
                ("origin", "https://dash.example.com")
            ]),
            Some("https://dash.example.com/")
        ));
        assert!(!same_origin(
            &headers(&[("host", "a.example"), ("sec-fetch-site", "cross-site")]),
            None
        ));
        assert!(!same_origin(
            &headers(&[("host", "a.example"), ("sec-fetch-site", "same-site")]),
            None
        ));
        // Neither header: not a browser.
        assert!(same_origin(&headers(&[("host", "a.example")]), None));
    }
}
