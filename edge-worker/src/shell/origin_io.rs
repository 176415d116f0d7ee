//! The origin's internal API as the shell calls it (wasm32 only): the KV-miss lookup of a link and the click
//! reports (the isolate's own, and the queue consumer's). What the answers mean is [`crate::origin`]'s (host-tested); this file does the HTTP calls, with a
//! timeout of their own, and logs every call that got no usable answer ([`crate::log`]).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use futures_util::future::{Either, select};
use wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::worker_sys::web_sys;
use worker::{AbortController, Delay, Headers};

use super::emit;
use crate::analytics::{self, ClickBuffer, ClickEvent};
use crate::log;
use crate::origin::{self, Delivery, Failure, Lookup, Origin};

thread_local! {
    /// Click events not yet reported to the origin (see [`analytics`]).
    static CLICKS: RefCell<ClickBuffer> = RefCell::new(ClickBuffer::new());
}

/// Buffers a click event; the caller then makes sure a flush is under way ([`flush_clicks`]).
pub(super) fn buffer_click(event: ClickEvent) {
    CLICKS.with(|b| b.borrow_mut().push(event));
}

/// Asks the origin for a link KV does not have (and its group). A lookup without a usable answer is logged (a wrong
/// `ORIGIN_SECRET` shows up here as status 401).
pub(super) async fn link_from_origin(origin: &Origin, host: &str, code: &str) -> Lookup {
    let answer = origin_call(
        "GET",
        &origin.link_url(host, code),
        origin,
        None,
        origin::LOOKUP_TIMEOUT_MS,
    )
    .await;
    let lookup = origin::lookup_answer(
        answer
            .as_ref()
            .map(|(s, b)| (*s, b.as_str()))
            .map_err(|f| *f),
    );
    if let Lookup::Failed(failure) = lookup {
        emit(log::origin_lookup_failed(host, code, failure));
    }
    lookup
}

/// Reports the isolate's buffered click events until none are left, unless another request's flush is already
/// doing so. A report the origin could not take is kept, with its `batch_id`, for the next flush.
pub(super) async fn flush_clicks(origin: Rc<Origin>) {
    let now = || js_sys::Date::now() as u64;
    let mut batch = CLICKS.with(|b| b.borrow_mut().start_flush(now(), random_uuid));
    while let Some(report) = batch {
        let answer = post_clicks(&origin, analytics::batch_body(&report)).await;
        match origin::clicks_answer(answer) {
            Delivery::Delivered => {
                batch = CLICKS.with(|b| b.borrow_mut().next_batch(now(), random_uuid));
            }
            Delivery::Rejected(failure) => {
                emit(log::origin_clicks_failed(
                    failure,
                    report.events.len(),
                    false,
                ));
                batch = CLICKS.with(|b| b.borrow_mut().next_batch(now(), random_uuid));
            }
            Delivery::Retry(failure) => {
                emit(log::origin_clicks_failed(
                    failure,
                    report.events.len(),
                    true,
                ));
                CLICKS.with(|b| b.borrow_mut().failed(report));
                return;
            }
        }
    }
}

/// A random UUID from the runtime's `crypto.randomUUID()` (a CSPRNG; no Rust randomness code in the wasm), or
/// `None` if the runtime lacked it (Workers has had it since 2021): the report then goes without a `batch_id`, as
/// before there were ids, rather than with one the origin would refuse.
fn random_uuid() -> Option<String> {
    let crypto = js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("crypto")).ok()?;
    let f = js_sys::Reflect::get(&crypto, &JsValue::from_str("randomUUID")).ok()?;
    let f: &js_sys::Function = f.dyn_ref()?;
    f.call0(&crypto).ok()?.as_string()
}

/// Posts a click report (the body of a [`kv_model::ClickBatch`]): the origin's status, or why there was none.
pub(super) async fn post_clicks(origin: &Origin, body: String) -> Result<u16, Failure> {
    origin_call(
        "POST",
        &origin.clicks_url(),
        origin,
        Some(body),
        origin::CLICKS_TIMEOUT_MS,
    )
    .await
    .map(|(status, _)| status)
}

/// One call to the origin's internal API: status and body, or why there was none ([`Failure::Request`],
/// [`Failure::Transport`], or [`Failure::Timeout`] after `timeout_ms`, when the request is aborted). Never an
/// error page: callers fall back (or keep the clicks) and log the failure.
///
/// Written against `web_sys` rather than workers-rs's `Request`/`RequestInit`/`Fetch`/`Response`: their
/// conversions bring in code this call never runs (the `cf` request properties' serialization through
/// serde-wasm-bindgen, the response body's stream adapters), about 20 KB of wasm that every isolate compiles.
/// The request is the one workers-rs built: `new Request(url, {method, headers, body, redirect: "follow"})`
/// (a URL the runtime refuses is [`Failure::Request`]), then `fetch(request, {signal})`; the body is read as
/// bytes and must be UTF-8, as workers-rs's `text()` required ([`Failure::Transport`] otherwise).
pub(super) async fn origin_call(
    method: &str,
    url: &str,
    origin: &Origin,
    body: Option<String>,
    timeout_ms: u64,
) -> Result<(u16, String), Failure> {
    let headers = Headers::new();
    headers
        .set("Authorization", &origin.authorization())
        .map_err(|_| Failure::Request)?;
    let init = web_sys::RequestInit::new();
    if let Some(body) = body {
        headers
            .set("Content-Type", "application/json")
            .map_err(|_| Failure::Request)?;
        init.set_body(&JsValue::from_str(&body));
    }
    init.set_method(method);
    init.set_headers(headers.as_ref());
    init.set_redirect(web_sys::RequestRedirect::Follow);
    let request =
        web_sys::Request::new_with_str_and_init(url, &init).map_err(|_| Failure::Request)?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let call = Box::pin(async {
        let with_signal = web_sys::RequestInit::new();
        with_signal.set_signal(Some(&signal));
        let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
        let response: web_sys::Response =
            JsFuture::from(global.fetch_with_request_and_init(&request, &with_signal))
                .await
                .and_then(JsValue::dyn_into)
                .map_err(|_| Failure::Transport)?;
        let status = response.status();
        let bytes = match response.array_buffer() {
            Ok(promise) => JsFuture::from(promise).await,
            Err(e) => Err(e),
        }
        .map_err(|_| Failure::Transport)?;
        let text = String::from_utf8(js_sys::Uint8Array::new(&bytes).to_vec())
            .map_err(|_| Failure::Transport)?;
        Ok((status, text))
    });
    let timer = Box::pin(Delay::from(Duration::from_millis(timeout_ms)));
    match select(call, timer).await {
        Either::Left((answer, _)) => answer,
        Either::Right(_) => {
            controller.abort();
            Err(Failure::Timeout)
        }
    }
}
