//! The origin's internal API as the shell calls it (wasm32 only): the KV-miss lookup of a link and the click
//! reports. What the answers mean is [`crate::origin`]'s (host-tested); this file does the HTTP calls, with a
//! timeout of their own.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use futures_util::future::{Either, select};
use kv_model::ResolvedLink;
use wasm_bindgen::JsValue;
use worker::{AbortController, Delay, Fetch, Headers, Method, Request, RequestInit};

use crate::analytics::{self, ClickBuffer, ClickEvent};
use crate::origin::{self, Delivery, Lookup, Origin};

thread_local! {
    /// Click events not yet reported to the origin (see [`analytics`]).
    static CLICKS: RefCell<ClickBuffer> = RefCell::new(ClickBuffer::new());
}

/// Buffers a click event; the caller then makes sure a flush is under way ([`flush_clicks`]).
pub(super) fn buffer_click(event: ClickEvent) {
    CLICKS.with(|b| b.borrow_mut().push(event));
}

/// Asks the origin for a link KV does not have (and its group).
pub(super) async fn link_from_origin(
    origin: &Origin,
    host: &str,
    code: &str,
) -> Option<ResolvedLink> {
    let answer = origin_call(
        Method::Get,
        &origin.link_url(host, code),
        origin,
        None,
        origin::LOOKUP_TIMEOUT_MS,
    )
    .await;
    match origin::lookup_answer(answer.as_ref().map(|(s, b)| (*s, b.as_str()))) {
        Lookup::Found(resolved) => Some(resolved),
        _ => None,
    }
}

/// Reports the isolate's buffered click events until none are left, unless another request's flush is already
/// doing so. A batch the origin could not take stays buffered for the next flush.
pub(super) async fn flush_clicks(origin: Rc<Origin>) {
    let now = || js_sys::Date::now() as u64;
    let mut batch = CLICKS.with(|b| b.borrow_mut().start_flush(now()));
    while let Some(events) = batch {
        let answer = origin_call(
            Method::Post,
            &origin.clicks_url(),
            &origin,
            Some(analytics::batch_body(&events)),
            origin::CLICKS_TIMEOUT_MS,
        )
        .await;
        match origin::clicks_answer(answer.map(|(status, _)| status)) {
            Delivery::Delivered | Delivery::Rejected => {
                batch = CLICKS.with(|b| b.borrow_mut().next_batch(now()));
            }
            Delivery::Retry => {
                CLICKS.with(|b| b.borrow_mut().failed(events));
                return;
            }
        }
    }
}

/// One call to the origin's internal API: status and body, or `None` on a transport error or after `timeout_ms`
/// (the request is then aborted). Never an error: callers treat `None` as "the origin did not answer".
async fn origin_call(
    method: Method,
    url: &str,
    origin: &Origin,
    body: Option<String>,
    timeout_ms: u64,
) -> Option<(u16, String)> {
    let headers = Headers::new();
    headers.set("Authorization", &origin.authorization()).ok()?;
    let mut init = RequestInit::new();
    if let Some(body) = body {
        headers.set("Content-Type", "application/json").ok()?;
        init.with_body(Some(JsValue::from_str(&body)));
    }
    init.with_method(method).with_headers(headers);
    let request = Request::new_with_init(url, &init).ok()?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let call = Box::pin(async {
        let mut response = Fetch::Request(request)
            .send_with_signal(&signal)
            .await
            .ok()?;
        let status = response.status_code();
        let text = response.text().await.ok()?;
        Some((status, text))
    });
    let timer = Box::pin(Delay::from(Duration::from_millis(timeout_ms)));
    match select(call, timer).await {
        Either::Left((answer, _)) => answer,
        Either::Right(_) => {
            controller.abort();
            None
        }
    }
}
