//! Password-protected links, the I/O (wasm32 only): WebCrypto's PBKDF2 and HMAC, the origin's throttle, the form's
//! body. What each answer means, and the cookie's format, are [`crate::password`]'s (host-tested).
//!
//! WebCrypto through [`super::webcrypto`]. Every failure of it (a missing API, a refused key) counts as "not verified":
//! the visitor sees the form again, never the destination.

use std::cell::RefCell;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use link_rules::PasswordHash;
use subtle::ConstantTimeEq;
use wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::JsFuture;

use super::webcrypto::{bytes, call, object, usages};
use super::{Visit, emit, origin_io};
use crate::log;
use crate::origin::Origin;
use crate::password::{self, Attempt, MAC_BYTES};
use crate::password_form::Notice;
use crate::reply::Page;

thread_local! {
    /// The cookies' HMAC key, imported once per isolate (the secret cannot change without a new deployment).
    static COOKIE_KEY: RefCell<Option<JsValue>> = const { RefCell::new(None) };
}

/// Whether `given` is the password `stored` hashes: PBKDF2-HMAC-SHA256 with the hash's salt and iterations (at most
/// `link_rules::MAX_ITERATIONS`: a planted record cannot make the worker derive for long), compared in constant time.
async fn password_matches(given: &str, stored: &str) -> bool {
    let Some(parts) = PasswordHash::parse(stored) else {
        return false;
    };
    let (Ok(salt), Ok(expected)) = (
        STANDARD.decode(parts.salt_b64),
        STANDARD.decode(parts.hash_b64),
    ) else {
        return false;
    };
    let Some(key) = call(
        "importKey",
        &[
            "raw".into(),
            bytes(given.as_bytes()),
            "PBKDF2".into(),
            false.into(),
            usages(&["deriveBits"]),
        ],
    )
    .await
    else {
        return false;
    };
    let params = object(&[
        ("name", "PBKDF2".into()),
        ("hash", "SHA-256".into()),
        ("salt", bytes(&salt)),
        ("iterations", parts.iterations.into()),
    ]);
    let bits = (expected.len() * 8) as u32;
    let Some(derived) = call("deriveBits", &[params, key, bits.into()]).await else {
        return false;
    };
    let derived = js_sys::Uint8Array::new(&derived).to_vec();
    bool::from(derived.ct_eq(&expected))
}

/// The HMAC-SHA256 of `message` under the key made from the origin secret, or `None` when WebCrypto failed.
async fn mac(origin: &Origin, message: &str) -> Option<[u8; MAC_BYTES]> {
    let cached = COOKIE_KEY.with(|k| k.borrow().clone());
    let key = match cached {
        Some(key) => key,
        None => {
            let algorithm = object(&[("name", "HMAC".into()), ("hash", "SHA-256".into())]);
            let key = call(
                "importKey",
                &[
                    "raw".into(),
                    bytes(origin.secret().as_bytes()),
                    algorithm,
                    false.into(),
                    usages(&["sign"]),
                ],
            )
            .await?;
            COOKIE_KEY.with(|k| *k.borrow_mut() = Some(key.clone()));
            key
        }
    };
    let signature = call("sign", &["HMAC".into(), key, bytes(message.as_bytes())]).await?;
    js_sys::Uint8Array::new(&signature).to_vec().try_into().ok()
}

/// Whether the request carries a valid cookie for the link `host`/`code` protected by `stored` (its hash). Without
/// an origin there is no key, hence no valid cookie.
pub(super) async fn holds_cookie(ctx: &Visit<'_>, host: &str, code: &str, stored: &str) -> bool {
    let Some(origin) = ctx.config.origin.as_deref() else {
        return false;
    };
    let Some(header) = ctx.req.headers().get("Cookie").ok().flatten() else {
        return false;
    };
    let now_s = ctx.now_ms / 1000;
    for cookie in password::presented(&header, now_s) {
        let message = password::cookie_message(host, code, cookie.expires_s, stored);
        if let Some(expected) = mac(origin, &message).await
            && bool::from(expected.ct_eq(&cookie.mac))
        {
            return true;
        }
    }
    false
}

/// Reads the posted form's body: at most [`password::MAX_FORM_BYTES`], as declared by `Content-Length` (a body that
/// declares more, or nothing, is not read).
async fn form_body(ctx: &Visit<'_>) -> Option<String> {
    let length = ctx.req.headers().get("Content-Length").ok().flatten();
    if !password::readable_length(length.as_deref()) {
        return None;
    }
    let promise = ctx.req.inner().text().ok()?;
    JsFuture::from(promise).await.ok()?.as_string()
}

/// `POST /<code>` of a protected link whose form the visitor may see (the group let them through): the password
/// checked under the origin's throttle. A right one sets the cookie for the link's lowercase path and sends the
/// visitor there (where a `GET` shows the form too).
pub(super) async fn unlock(ctx: &Visit<'_>, host: &str, code: &str, stored: &str) -> Page {
    let path = format!("/{code}");
    let path = path.as_str();
    // A body that cannot hold a password of this link is wrong without costing an attempt or a derivation.
    let Some(given) = form_body(ctx)
        .await
        .and_then(|b| password::form_password(&b))
    else {
        return Page::PasswordForm(Notice::Wrong);
    };
    let Some(origin) = ctx.config.origin.clone() else {
        return Page::PasswordForm(Notice::Unavailable);
    };
    // A hash this worker cannot read (a newer format, a damaged record) opens nothing, and costs no attempt.
    if PasswordHash::parse(stored).is_none() {
        emit(log::password_hash_unusable(host, code));
        return Page::PasswordForm(Notice::Unavailable);
    }
    let header = |name: &str| ctx.req.headers().get(name).ok().flatten();
    // Cloudflare's pseudo-IPv4 setting puts a made-up IPv4 address in CF-Connecting-IP and the real IPv6 one in
    // CF-Connecting-IPv6: the real one, so the origin counts the visitor by its /64.
    let address = password::throttle_address(
        header("CF-Connecting-IPv6")
            .or_else(|| header("CF-Connecting-IP"))
            .as_deref(),
    );
    // A visitor the origin said must wait is told so here until then, without another write at the origin.
    if let Some(secs) = password::waiting(host, code, &address, ctx.now_ms) {
        return Page::PasswordForm(Notice::Wait(secs));
    }
    let reserve = origin_io::origin_call(
        "POST",
        &origin.password_attempts_url(),
        &origin,
        Some(password::attempt_body(host, code, &address, None)),
        crate::origin::LOOKUP_TIMEOUT_MS,
    )
    .await;
    let at = match password::attempt_answer(
        reserve
            .as_ref()
            .map(|(s, b)| (*s, b.as_str()))
            .map_err(|f| *f),
    ) {
        Attempt::Go(at) => at,
        Attempt::Throttled(secs) => {
            password::must_wait(host, code, &address, ctx.now_ms, secs);
            return Page::PasswordForm(Notice::Wait(secs));
        }
        Attempt::Unavailable(failure) => {
            if let Some(failure) = failure {
                emit(log::origin_password_attempt_failed(host, code, failure));
            }
            return Page::PasswordForm(Notice::Unavailable);
        }
    };
    if !password_matches(&given, stored).await {
        return Page::PasswordForm(Notice::Wrong);
    }
    // Right: the attempt is given back after the response (if that fails, the visitor has one attempt fewer).
    let body = password::attempt_body(host, code, &address, Some(at));
    let give_back = origin.clone();
    ctx.ctx.wait_until(async move {
        let _ = origin_io::origin_call(
            "POST",
            &give_back.give_back_url(),
            &give_back,
            Some(body),
            crate::origin::CLICKS_TIMEOUT_MS,
        )
        .await;
    });
    let expires_s = ctx.now_ms / 1000 + password::COOKIE_MAX_AGE_SECONDS;
    let Some(mac) = mac(
        &origin,
        &password::cookie_message(host, code, expires_s, stored),
    )
    .await
    else {
        return Page::PasswordForm(Notice::Unavailable);
    };
    Page::SeeOther {
        location: password::after_unlock(path, ctx.query().as_deref()),
        set_cookie: Some(password::set_cookie(path, expires_s, &mac)),
    }
}
