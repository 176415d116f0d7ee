//! The synchronous fast path (wasm32 only): a visitor request whose whole answer the isolate already holds — a
//! live persistent link or a dynamic link, with its group and the blocklist fresh in the isolate cache, a group
//! with no rules that look at the visitor, ending at the destination — is answered before the fetch handler
//! returns, as a `Response` rather than a `Promise`. It reads only the method, the URL and the Host header (one
//! call out of wasm, `visit_line`), and builds the redirect with one call on a first visit and a handful
//! otherwise. Anything else (a miss, an entry near expiry, a rule, a fallback, analytics, another route) returns
//! `None` and takes the full path in `super`, which gives the same answer: the decision is the same plain code
//! either way ([`crate::decision`], [`crate::reply`]). With the redirect it gives the instant until which the same
//! request gets the same answer, for the entry module's answers (`edge-worker/js/entry.js`).

use std::cell::{Cell, RefCell};

use wasm_bindgen::JsValue;
use worker::worker_sys::web_sys;

use kv_model::BLOCKLIST_KEY;

use super::records;
use crate::bounded::BoundedMap;
use crate::config;
use crate::decision::{self, Decision, Group, LinkGroup, Outcome};
use crate::named_hosts;
use crate::reply;
use crate::room;
use crate::route::{self, Route};
use crate::smart;
use crate::visitor::Visitor;

/// The redirect for `req` when the isolate holds everything it needs, and until when (UNIX ms) it stays the
/// answer to the same request ([`decision::answer_until`]); else `None`, with the KV keys of the route's records the
/// isolate does not hold fresh added to `wanted` (for the first-visit path, [`super::first`]).
///
/// `pass`: which call this is ([`Pass`]). After the first-visit path has read a persistent link, a link whose
/// group the isolate has never read is decided from the copy of the group's settings its record carries, and one
/// the origin vouched for ([`kv_model::LinkRecord::vouched`]) without the blocklist when the isolate has never read
/// it, as the full path does on a first visit ([`super::persistent`]); that answer is not kept, and the records it
/// went without are read after the response ([`take_read_after`]). A dynamic link's token may go to WebCrypto
/// first ([`hand_on`]), and its opening is decided from at once and kept after the response ([`super::settle`]).
pub(super) fn answer(
    req: &web_sys::Request,
    now_ms: u64,
    pass: Pass<'_>,
    wanted: &mut Vec<String>,
) -> Option<(web_sys::Response, u64)> {
    let first = !matches!(pass, Pass::Any);
    // A request answered otherwise never reports the previous answer's facts.
    ANSWER_VARY.with(|v| v.set(0));
    READ_AFTER.with(|r| r.take());
    let line = visit_line(req);
    let (method, url, host_header) = route::split_visit_line(&line)?;
    // A redirect is the same for both: no body.
    if !matches!(method, "GET" | "HEAD") {
        return None;
    }
    let (authority, path, query) = route::split_url(url);
    let host = host_header
        .and_then(route::normalize_request_host)
        .or_else(|| route::normalize_request_host(authority))?;
    // The answer, until when it holds, whether to keep it, and the records to read after the response.
    let (decision, until, keep, read_after) = match route::route(method, path, query) {
        Route::Persistent { code } => persistent(req, &host, &code, query, now_ms, first, wanted)?,
        Route::Dynamic { group_id, token } => {
            dynamic(&host, &group_id, token, now_ms, pass, wanted)?
        }
        _ => return None,
    };
    match decision.outcome {
        Outcome::Destination(url) if !decision.analytics => {
            // A new isolate's first visit has no init kept and keeps none: its redirect is built without the map,
            // whose lookup (hashing, probing) it would otherwise compile.
            let response = if first {
                first_redirect(&url, decision.status)?
            } else {
                redirect(url, decision.status, keep)?
            };
            // Told to the entry module only with the redirect: a request that goes on to the full path has its
            // records read there.
            READ_AFTER.with(|r| r.set(read_after));
            Some((response, until))
        }
        _ => None,
    }
}

/// What a decision from the isolate's records gives: the decision, until when it holds (UNIX ms), whether its
/// redirect is worth keeping, and the records to read after the response.
type Decided = (Decision, u64, bool, ReadAfter);

/// [`answer`]'s persistent link. Each route is a function of its own, out of line: V8 compiles a wasm function
/// whole on its first call, so a new isolate's first visit to a persistent link does not compile the dynamic
/// link's part, nor the other way round (BENCHMARKS.md, "Cold start").
#[inline(never)]
fn persistent(
    req: &web_sys::Request,
    host: &str,
    code: &str,
    query: Option<&str>,
    now_ms: u64,
    first: bool,
    wanted: &mut Vec<String>,
) -> Option<Decided> {
    let now = i64::try_from(now_ms).ok()?;
    let link_key = kv_model::link_key(host, code);
    let Some((link, link_until)) = records::fresh_link(&link_key, now_ms) else {
        // The link alone: its record carries what a first visit needs of its group and of the blocklist.
        room::push(wanted, link_key, 1);
        return None;
    };
    // A cached absence falls back, which needs the domain record: the full path.
    let link = link?;
    // A link with a password or a preview card takes the full path (a cookie or a crawler changes the
    // answer); rules and a redirect status do not: their answer is keyed by the facts the rules read.
    if !link.is_active || link.expired(now) || !smart::fast_path_ok(&link) {
        return None;
    }
    let mut read_after = ReadAfter::default();
    let group_record;
    let group_key = kv_model::group_key(&link.group_id);
    let (settings, group_until) = match records::fresh_group(&group_key, now_ms) {
        Some((group, until)) => {
            group_record = group;
            (&group_record.settings, until)
        }
        // A first visit decides from the link's copy, never kept (an answer until 0).
        None if first => {
            if !records::untouched(&group_key, now_ms) {
                return None;
            }
            read_after.group = Some(group_key);
            (link.group_settings.as_ref()?, 0)
        }
        None => return None,
    };
    if decision::needs_visitor(Some(settings)) {
        return None;
    }
    let blocklist_record;
    let (blocklist, blocklist_until) = match records::fresh_blocklist(now_ms) {
        Some((list, until)) => {
            blocklist_record = list;
            (Some(blocklist_record.as_ref()), until)
        }
        // A first visit to a link the origin vouched for, on an isolate that never read the blocklist: decided
        // without it (the full path would be too), never kept.
        None if first && link.vouched && records::blocklist_never_read(now_ms) => {
            read_after.blocklist = true;
            (None, 0)
        }
        None => {
            room::push(wanted, BLOCKLIST_KEY.to_owned(), 1);
            return None;
        }
    };
    let vary = smart::vary(&link);
    // A plain link's visitor is borrowed: one built and dropped would compile its drop for nothing.
    let read_visitor;
    let visitor = if vary == 0 {
        &NO_VISITOR
    } else {
        read_visitor = visitor(req, vary);
        &read_visitor
    };
    // The rules may read the query whether or not the link forwards it.
    let query = if link.forward_query || !link.rules.is_empty() {
        query
    } else {
        None
    };
    let decision = decision::decide_persistent(
        Some(&link),
        LinkGroup::Rules(settings),
        blocklist,
        visitor,
        query,
        now,
    );
    let records_until = link_until.min(group_until).min(blocklist_until);
    // The answer lasts until the records' reload, the link's expiry or the next edge of a rule's window.
    let changes_at = match (link.expires_at, smart::next_change(&link, now)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let until = decision::answer_until(records_until, changes_at);
    ANSWER_VARY.with(|v| v.set(vary));
    // Kept, unless this is a new isolate's first visit ([`answer`] keeps none then: the next visit keeps it).
    Some((decision, until, true, read_after))
}

/// [`answer`]'s dynamic link ([`persistent`] says why apart).
#[inline(never)]
fn dynamic(
    host: &str,
    group_id: &str,
    token: Option<String>,
    now_ms: u64,
    pass: Pass<'_>,
    wanted: &mut Vec<String>,
) -> Option<Decided> {
    let now = i64::try_from(now_ms).ok()?;
    // The group and the blocklist do not depend on each other: a first visit reads both in one round. The domain's
    // record is read only when neither names the host ([`named_hosts`]). Each key is built once, for its lookup
    // and for the reads.
    let group_key = kv_model::group_key(group_id);
    let (Some((group, group_until)), Some((blocklist, blocklist_until))) = (
        records::fresh_group(&group_key, now_ms),
        records::fresh_blocklist(now_ms),
    ) else {
        // Pushed one by one into the room given (`extend` would compile a `reserve` of its own for this).
        room::give(wanted, 2);
        wanted.push(group_key);
        wanted.push(BLOCKLIST_KEY.to_owned());
        return None;
    };
    // Before the domain: a group whose rules look at the visitor takes the full path, which reads the domain itself.
    if decision::needs_visitor(Some(&group.settings)) {
        return None;
    }
    let domain_key = kv_model::domain_key(host);
    let held = records::fresh_domain(&domain_key, now_ms);
    let held_until = held.as_ref().map_or(u64::MAX, |(_, until)| *until);
    let Some(domain) = named_hosts::served_domain(
        held.as_ref().map(|(record, _)| record.as_deref()),
        &group,
        &blocklist,
        host,
    ) else {
        room::push(wanted, domain_key, 1);
        return None;
    };
    // The memo's entry for a token seen before: its expiry (in seconds) is the payload's, known before
    // deciding. One lookup serves both the keeping and the answer's bound.
    let seen_expiry = token.as_deref().and_then(|t| group.opened_expiry(t));
    let opened = match (seen_expiry, token.as_deref()) {
        (None, Some(token)) => match pass {
            Pass::Any => None,
            Pass::First { .. } => {
                if hand_on(&group, token) {
                    return None;
                }
                None
            }
            // WebCrypto's plaintext, when it is this token under this very record's key: the record may have been
            // replaced while WebCrypto worked, and then Rust opens the token under the new one.
            Pass::Opened { sealed, plaintext } => {
                plaintext.and_then(|plaintext| group.opened_payload(token, sealed, plaintext))
            }
        },
        _ => None,
    };
    let visitor = &NO_VISITOR;
    let decision = match (&opened, token.as_deref()) {
        (Some(payload), Some(token)) => decision::decide_dynamic_opened(
            domain,
            Some(&group),
            token,
            payload,
            Some(blocklist.as_ref()),
            visitor,
            now / 1000,
        ),
        _ => decision::decide_dynamic(
            domain,
            Some(&group),
            token.as_deref(),
            Some(blocklist.as_ref()),
            visitor,
            now / 1000,
        ),
    };
    // WebCrypto's opening goes into the group's memo after the response ([`super::settle`]).
    if let (Some(payload), Some(token)) = (opened, token) {
        super::settle::keep_opened(group, token, payload);
    }
    let records_until = held_until.min(group_until).min(blocklist_until);
    let until = seen_expiry.map_or(0, |at| {
        decision::answer_until(records_until, at.map(|s| s.saturating_mul(1000)))
    });
    Some((decision, until, seen_expiry.is_some(), ReadAfter::default()))
}

/// Which call of the fast path this is.
#[derive(Clone, Copy)]
pub(super) enum Pass<'a> {
    /// `fetch`: any request.
    Any,
    /// `first_fetch` without `sealed`: a visit through the first-visit path (a new isolate's first, or any whose
    /// records the isolate held nothing of), the records it lacked just read. A dynamic link's token the group's
    /// record in the isolate has not opened is handed to the entry module to open with WebCrypto
    /// ([`take_open_request`]). With `replan` (the entry module's first call, when every read came back), the
    /// records the visit turned out to need besides (a dynamic link's domain that neither its group's record nor the
    /// blocklist's names, [`crate::named_hosts`]; the blocklist of a link without the origin's word) are read in one
    /// more round ([`super::first::plan`]) rather than by the full path; the entry module's next call is without
    /// it, and a read that failed goes to the full path, which reads it again and logs the failure.
    First { replan: bool },
    /// `first_fetch` again, for that visit, with what was handed on (`sealed`) and WebCrypto's plaintext of it as
    /// text (`None`: it did not open it, or the plaintext is not UTF-8). Never hands a token on again.
    Opened {
        sealed: &'a [u8],
        plaintext: Option<&'a str>,
    },
}

thread_local! {
    /// What [`Pass::First`] hands on, from [`answer`] to its caller in the same call: the key, the IV, the
    /// ciphertext and its tag.
    static OPEN_REQUEST: Cell<Option<Vec<u8>>> = const { Cell::new(None) };
}

/// The bytes of the token [`answer`] just handed on, for the entry module to open with WebCrypto; `None` if it did
/// not hand one on.
pub(super) fn take_open_request() -> Option<Vec<u8>> {
    OPEN_REQUEST.with(Cell::take)
}

/// A visit through the first-visit path (a new isolate's first visit above all) opens a dynamic link's token with
/// WebCrypto, in the entry module, rather than with Rust's AES-GCM: the key schedule, the cipher and GHASH (about
/// 15 KB of wasm) would otherwise be compiled before that visit's answer (BENCHMARKS.md, issue 28), where
/// WebCrypto's is native code already there. Other visits' tokens are Rust's to open, which is faster than a round
/// through WebCrypto's Promises once compiled.
/// `Pass::First` hands a well-formed `token` on (true: the caller answers with [`take_open_request`]'s bytes; a
/// malformed one is left to [`decision::Group::evaluate`], which refuses it before any decryption); `Pass::Opened`
/// then decides from what WebCrypto opened ([`Group::opened_payload`]).
fn hand_on(group: &Group, token: &str) -> bool {
    let Some(sealed) = group.sealed_for(token) else {
        return false;
    };
    OPEN_REQUEST.with(|r| r.set(Some(sealed)));
    true
}

/// The visitor of a decision that looks at none of its facts ([`Visitor::NONE`]), lent rather than built: a
/// `Visitor` built on a first visit is dropped there too, and its drop is a function that visit would compile.
static NO_VISITOR: Visitor = Visitor::NONE;

/// The visitor facts `vary` names (`smart::VARY_*`), read from the request: only those, each a call out of wasm.
/// The group needs none (the fast path's condition), so bot signals are not read.
fn visitor(req: &web_sys::Request, vary: u32) -> Visitor {
    let header = |bit: u32, name: &str| {
        (vary & bit != 0)
            .then(|| req.headers().get(name).ok().flatten())
            .flatten()
    };
    let cf_country = (vary & smart::VARY_COUNTRY != 0)
        .then(|| {
            js_sys::Reflect::get(req, &JsValue::from_str("cf"))
                .ok()
                .filter(JsValue::is_object)
                .and_then(|cf| js_sys::Reflect::get(&cf, &JsValue::from_str("country")).ok())
                .and_then(|c| c.as_string())
        })
        .flatten();
    Visitor::new(
        cf_country.as_deref(),
        header(smart::VARY_COUNTRY, "CF-IPCountry").as_deref(),
        header(smart::VARY_USER_AGENT, "User-Agent").as_deref(),
        None,
        false,
    )
    .with_accept_language(header(smart::VARY_LANGUAGE, "Accept-Language").as_deref())
}

/// The records a first visit's redirect was decided without, to be read after the response: its group's (the KV
/// key), when it was decided from the link's copy of the group's settings, and the blocklist, when on the origin's
/// word. Two fields rather than a `Vec` of keys: every `fetch` clears what the last answer left, and a `Vec`'s drop
/// is a loop over its strings and its growth two functions more, all compiled by a new isolate's first visit.
#[derive(Default)]
pub(super) struct ReadAfter {
    group: Option<String>,
    blocklist: bool,
}

thread_local! {
    /// What the first visit the fast path last answered was decided without ([`take_read_after`]).
    static READ_AFTER: Cell<ReadAfter> = const {
        Cell::new(ReadAfter {
            group: None,
            blocklist: false,
        })
    };
}

/// What the entry module reads after the response [`answer`] just gave; `None` when nothing (a dynamic link's first
/// visit, always).
pub(super) fn take_read_after() -> Option<ReadAfter> {
    let read_after = READ_AFTER.with(Cell::take);
    (read_after.group.is_some() || read_after.blocklist).then_some(read_after)
}

impl ReadAfter {
    /// The KV keys to read: the group's, then the blocklist's.
    pub(super) fn keys(self) -> Vec<String> {
        let mut keys = Vec::with_capacity(2);
        if let Some(group) = self.group {
            keys.push(group);
        }
        if self.blocklist {
            keys.push(BLOCKLIST_KEY.to_owned());
        }
        keys
    }
}

thread_local! {
    /// [`answer_vary`] for the request the fast path last answered.
    static ANSWER_VARY: Cell<u32> = const { Cell::new(0) };
}

/// Which visitor facts (`smart::VARY_*` bits: 1 the User-Agent, 2 the country, 4 `Accept-Language`) the response
/// [`super::fetch`] just returned depends on, besides the request's URL and `Host`: the entry module keeps such an
/// answer under those facts too (`edge-worker/js/entry.js`). 0 for a plain link's answer.
#[wasm_bindgen::prelude::wasm_bindgen]
#[allow(unreachable_pub)] // a wasm export, like `fetch`
pub fn answer_vary() -> u32 {
    ANSWER_VARY.with(Cell::get)
}

/// What a kept `init` costs besides its header texts: the JS objects (`ResponseInit`, `Headers`, their wasm-bindgen
/// handles). An estimate, on the high side.
const INIT_OVERHEAD_BYTES: usize = 512;

thread_local! {
    /// Per destination, the status and headers of its redirect as a JS `ResponseInit` (with its `Headers`), so that
    /// answering again is one call out of wasm, `new Response(null, init)`, instead of seven that each copy a
    /// string (new `Headers`, three `set`, the init, its status and headers). workerd copies the init's headers
    /// into the new response, so one kept object serves every response built from it. Within
    /// [`config::KEPT_INITS_BUDGET_BYTES`], the oldest going first: a cache of JS objects, each worth a few header
    /// calls, not a record of anything.
    static KEPT_INITS: RefCell<BoundedMap> =
        RefCell::new(BoundedMap::new(config::KEPT_INITS_BUDGET_BYTES));
}

/// The redirect to `location` with `status`, built from the kept `init` for it, or from a new one that is then kept
/// if `keep`. A 302 is kept under its location alone (most are), any other status under `<status> <location>`: a
/// location never starts with a digit and a space.
fn redirect(location: String, status: u16, keep: bool) -> Option<web_sys::Response> {
    let key = if status == 302 {
        location
    } else {
        format!("{status} {location}")
    };
    KEPT_INITS.with(|kept| {
        let mut kept = kept.borrow_mut();
        if let Some(init) = kept.get::<web_sys::ResponseInit>(key.as_str()) {
            return web_sys::Response::new_with_opt_str_and_init(None, init).ok();
        }
        let location = if status == 302 { &key[..] } else { &key[4..] };
        let (response, init, header_bytes) = new_redirect(location, status)?;
        if keep {
            // The key is charged by the map; the init holds a copy of every header (the location among them).
            kept.insert(&key, init, header_bytes + INIT_OVERHEAD_BYTES);
        }
        Some(response)
    })
}

/// A redirect built anew: the response, its `init`, and the bytes of its headers' names and values. Its headers
/// are [`reply::redirect`]'s, set from [`reply::redirect_headers`]' borrowed values rather than from a [`reply::Reply`]'s
/// copies: a new isolate's first redirect then compiles neither the reply nor its copies (BENCHMARKS.md, issue 28).
fn new_redirect(
    location: &str,
    status: u16,
) -> Option<(web_sys::Response, web_sys::ResponseInit, usize)> {
    let headers = web_sys::Headers::new().ok()?;
    let mut header_bytes = 0;
    for (name, value) in reply::redirect_headers(location) {
        headers.set(name, value).ok()?;
        header_bytes += name.len() + value.len();
    }
    let init = web_sys::ResponseInit::new();
    init.set_status(status);
    init.set_headers(&headers);
    let response = web_sys::Response::new_with_opt_str_and_init(None, &init).ok()?;
    Some((response, init, header_bytes))
}

// Each in parentheses: V8 compiles it with the script, when the isolate starts, not on the first visit that calls it
// (scripts/eager-first-visit.mjs says why).
#[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
export const visit_line = (function visit_line(req) {
  const host = req.headers.get("host");
  return req.method + "\n" + req.url + "\n" + (host === null ? "" : "h" + host);
});
export const redirect_response = (function redirect_response(status, n0, v0, n1, v1, n2, v2) {
  return new Response(null, { status, headers: [[n0, v0], [n1, v1], [n2, v2]] });
});
"#)]
extern "C" {
    /// The request's method, URL and `Host` header in one call out of wasm: `<method>\n<url>\n<h + host, or nothing
    /// when there is no Host header>` ([`route::split_visit_line`] reads it). Four calls through web-sys (the method,
    /// the URL, the headers, the Host) were four imports whose JavaScript and wasm glue a new isolate's first
    /// request compiled, and four crossings on every pass of the fast path (a first visit to a dynamic link makes
    /// three: `fetch`, then `first_fetch` twice, or four with a second round of reads); BENCHMARKS.md, issue 28.
    fn visit_line(req: &web_sys::Request) -> String;

    /// `new Response(null, { status, headers })` with the three headers of [`reply::redirect_headers`], in one call
    /// out of wasm: the redirect of a first-visit pass ([`first_redirect`]). It throws on a status `Response`
    /// refuses or a header value `Headers` refuses (not a byte string, or holding NUL, CR or LF); the fast path then
    /// answers nothing and the full path does.
    #[wasm_bindgen(catch)]
    fn redirect_response(
        status: u16,
        n0: &str,
        v0: &str,
        n1: &str,
        v1: &str,
        n2: &str,
        v2: &str,
    ) -> Result<web_sys::Response, JsValue>;
}

/// The redirect of a first-visit pass (`Pass::First` or `Pass::Opened`; a new isolate's first visit above all):
/// [`new_redirect`]'s response (the same headers, [`reply::redirect_headers`]) in one call out of wasm
/// ([`redirect_response`]), where `new_redirect` makes eight calls through six imports (a `Headers`, three `set`,
/// an init, its status and headers, the response), each import's glue compiled on its first call. No init to
/// keep: such a visit keeps none.
fn first_redirect(location: &str, status: u16) -> Option<web_sys::Response> {
    let [(n0, v0), (n1, v1), (n2, v2)] = reply::redirect_headers(location);
    redirect_response(status, n0, v0, n1, v1, n2, v2).ok()
}
