//! The Workers entry point (wasm32 only): reads the request, asks [`records`] for the KV records the route
//! needs, calls the plain decision code, and copies the resulting [`Reply`] into a `Response`. Nothing here decides
//! where a visitor goes; the isolate's records, the origin calls and the sync route are the other files here. Each of
//! them writes a [`crate::log`] line through [`emit`] for every failure it absorbs. The click queue's consumer (the
//! `queue` entry point) is in `click_queue`.

mod click_queue;
mod fast;
mod first;
mod kv;
mod origin_io;
mod password_io;
mod records;
mod settle;
mod sync_route;
mod unique_io;
mod webcrypto;

pub(crate) use webcrypto::random_u64;

use std::cell::{Cell, OnceCell};
use std::rc::Rc;

use futures_util::future::{join, join3};
use kv_model::GroupSettings;
use wasm_bindgen::JsValue;
use worker::{Context, Env, Headers, Method, Request, Response};

use crate::analytics;
use crate::config;
use crate::decision::{self, Decision, LinkGroup, Outcome};
use crate::log::{Level, Line};
use crate::origin::Origin;
use crate::reply::{Page, Reply, reply};
use crate::route::{self, Route};
use crate::smart;
use crate::visitor::Visitor;
use fast::Pass;
use records::{GroupRead, Records};

/// Writes a log line to the Workers console: one `console.error`/`console.warn` call with the JSON text, which
/// Workers Logs stores as a structured event and `wrangler tail` shows.
fn emit(line: Line) {
    match line.level {
        Level::Warn => worker::console_warn!("{}", line.text),
        Level::Error => worker::console_error!("{}", line.text),
    }
}

/// Settings read from the environment once per isolate: `[vars]` cannot change without a new deployment, which
/// starts new isolates, and every read is a call out of wasm.
struct IsolateConfig {
    default_fallback: Option<String>,
    /// The origin for KV-miss lookups and click reports; `None` when `ORIGIN_URL` or `ORIGIN_SECRET` is unset.
    origin: Option<Rc<Origin>>,
}

thread_local! {
    static CONFIG: OnceCell<Rc<IsolateConfig>> = const { OnceCell::new() };
    /// Whether the isolate cache's TTL was read from the environment ([`read_cache_ttl`]).
    static TTL_READ: Cell<bool> = const { Cell::new(false) };
}

/// Sets the isolate cache's TTL from `env` on the isolate's first request, before the cache is used. The rest of
/// the configuration waits for a request that needs it ([`isolate_config`]): a new isolate's first visit that the
/// fast path answers reads one variable instead of four, and compiles none of the origin's configuration
/// (`Origin::from_vars`, the `OnceCell`; about 1.5 KB of wasm; BENCHMARKS.md, issue 28).
fn read_cache_ttl(env: &Env) {
    if !TTL_READ.replace(true) {
        let ttl_ms =
            config::cache_ttl_seconds(env_text(env, config::CACHE_TTL_VAR).as_deref()) * 1000;
        records::set_cache_ttl_ms(ttl_ms);
    }
}

/// The isolate's configuration, read from `env` on the first request that needs more than the cache's TTL.
fn isolate_config(env: &Env) -> Rc<IsolateConfig> {
    CONFIG.with(|c| {
        c.get_or_init(|| {
            read_cache_ttl(env);
            Rc::new(IsolateConfig {
                default_fallback: env_text(env, config::DEFAULT_FALLBACK_VAR),
                origin: Origin::from_vars(
                    env_text(env, config::ORIGIN_URL_VAR).as_deref(),
                    env_text(env, config::ORIGIN_SECRET).as_deref(),
                )
                .map(Rc::new),
            })
        })
        .clone()
    })
}

/// A variable's or a secret's text (both are plain strings on `env`); `None` when unset or not a string. Read with
/// one import of our own ([`env_string`]) rather than with `Env::var`/`Env::secret`, which format an error message
/// for every unset name and copy the value out through `Display` (core's formatting machinery), or with
/// `Reflect::get` and `as_string`, whose glue is four more functions (the name's `JsValue`, the lookup, the string's
/// copy, the handle's release): code a new isolate's first request compiles to read the cache's TTL
/// (BENCHMARKS.md, issue 28).
fn env_text(env: &Env, name: &str) -> Option<String> {
    env_string(env.as_ref(), name)
}

// In parentheses: V8 compiles it with the script, when the isolate starts (scripts/eager-first-visit.mjs says why).
#[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
export const env_string = (function env_string(env, name) {
  try {
    const value = env[name];
    return typeof value === "string" ? value : undefined;
  } catch {
    return undefined;
  }
});
"#)]
extern "C" {
    /// `env[name]` when it is a string (a `[vars]` entry or a secret), else `None`.
    fn env_string(env: &JsValue, name: &str) -> Option<String>;
}

/// The Workers fetch entry point, exported by hand rather than with `#[event(fetch)]`: a request the isolate can
/// answer from what it holds ([`fast`]) gets its `Response` at once, with no `Promise`, no future and no
/// `worker::Request` (whose conversion reads the method, URL, headers and `cf` up front); a request whose records
/// the isolate holds nothing of gets the plan of their reads ([`first`]: a string, which the entry module reads and
/// comes back with to [`first::first_fetch`]); every other request takes [`handle`] as a `Promise`, as the macro
/// would have made it.
#[wasm_bindgen::prelude::wasm_bindgen]
#[allow(unreachable_pub)] // a wasm export: reached by the runtime, not by Rust paths
pub fn fetch(
    req: worker::worker_sys::web_sys::Request,
    env: Env,
    ctx: worker::worker_sys::Context,
) -> JsValue {
    settle::before_fetch();
    answer(req, env, ctx, Pass::Any)
}

/// [`fetch`], and the first visit's calls ([`first::first_fetch`]: once, again after one more plan, again after a
/// token opened) after the entry module read the plan's records: one more plan at most ([`fast::Pass::First`]), or
/// a dynamic link's token to open with WebCrypto, a `Uint8Array`.
fn answer(
    req: worker::worker_sys::web_sys::Request,
    env: Env,
    ctx: worker::worker_sys::Context,
    pass: Pass<'_>,
) -> JsValue {
    // js_sys's static Date.now(): one call out of wasm, no Date object.
    let now_ms = js_sys::Date::now() as u64;
    // The cache's TTL, before the cache is used.
    read_cache_ttl(&env);
    let mut wanted = Vec::new();
    let answer = fast::answer(&req, now_ms, pass, &mut wanted);
    ANSWER_UNTIL.with(|u| u.set(answer.as_ref().map_or(0, |(_, until)| *until)));
    if let Some((response, _)) = answer {
        return response.into();
    }
    if let Pass::First { .. } = pass
        && let Some(sealed) = fast::take_open_request()
    {
        return js_sys::Uint8Array::from(sealed.as_slice()).into();
    }
    // One call for both passes that may plan: each call site would be a copy of the plan's code, inlined.
    if matches!(pass, Pass::Any | Pass::First { replan: true })
        && let Some(plan) = first::plan(&mut wanted, now_ms)
    {
        return plan;
    }
    // A first visit the fast path did not answer (a fallback, analytics): the records it read are held, not cached
    // yet ([`records::hold_read`]), and go into the cache now (the full path looks in the cache, and would wait for
    // the reads' own marks), with WebCrypto's opening into the memo, so that the full path does not open the token
    // again with Rust's AES-GCM (its key schedule, the cipher and GHASH compiled for it); the full path compiles far
    // more than these writes anyway.
    if !matches!(pass, Pass::Any) {
        settle::first_settle();
    }
    full_path(req, env, ctx, now_ms)
}

/// [`handle`] as a `Promise`. Out of line: a first visit the fast path answers never compiles the future's setup.
/// LLVM keeps it so; binaryen would inline it into its single caller but for the build's `--no-inline` of it
/// (scripts/build-edge-worker.sh).
#[inline(never)]
fn full_path(
    req: worker::worker_sys::web_sys::Request,
    env: Env,
    ctx: worker::worker_sys::Context,
    now_ms: u64,
) -> JsValue {
    worker::wasm_bindgen_futures::future_to_promise(async move {
        let ctx = Context::new(ctx);
        // `handle` never fails in practice (binding errors become fallbacks); if it did, a bare 500, as the
        // macro answers.
        let response = match handle(Request::from(req), env, ctx, now_ms).await {
            Ok(response) => response,
            Err(_) => Response::error("Internal Server Error", 500)?,
        };
        Ok(JsValue::from(worker::worker_sys::web_sys::Response::from(
            response,
        )))
    })
    .into()
}

/// Whether the isolate's configuration names an origin.
fn has_origin(env: &Env) -> bool {
    isolate_config(env).origin.is_some()
}

thread_local! {
    /// [`answer_until`] for the request [`fetch`] last answered.
    static ANSWER_UNTIL: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Until when (UNIX ms) the response [`fetch`] just returned stays the answer to the same request (method `GET`
/// or `HEAD`, URL and `Host` header); 0 when it may not be given again without asking. The entry module
/// (`edge-worker/js/entry.js`) calls this right after a `fetch` that returned a `Response` rather than a Promise.
#[wasm_bindgen::prelude::wasm_bindgen]
#[allow(unreachable_pub)] // a wasm export, like `fetch`
pub fn answer_until() -> f64 {
    // Milliseconds since the epoch fit a JS number exactly until the year 287,396.
    ANSWER_UNTIL.with(|u| u.get()) as f64
}

/// Registers the function called after every change to the isolate's records: the entry module's, which then
/// forgets the answers it keeps. Called once per module instance (again after a reset).
#[wasm_bindgen::prelude::wasm_bindgen]
#[allow(unreachable_pub)] // a wasm export, like `fetch`
pub fn on_records_change(listener: js_sys::Function) {
    records::set_on_change(listener);
}

/// The full fetch handler. Every visitor request ends in a redirect, an interstitial, a 404 when no fallback
/// is configured at all, or a 405; errors from bindings are absorbed into fallbacks, never turned into a 5xx.
async fn handle(mut req: Request, env: Env, ctx: Context, now_ms: u64) -> worker::Result<Response> {
    let config = isolate_config(&env);
    let method = req.method();
    let head = method == Method::Head;
    // worker::Request already holds the path; the full URL (another call out of wasm) is only needed for a
    // dynamic link's query or a request without a Host header (and a forwarding link's query, `Visit::query`).
    let path = req.path();
    // The Host header names the domain (what `wrangler dev` and Miniflare pass through, too); the URL's host is
    // the same thing on Cloudflare and serves when the header is missing.
    let host_header = req
        .headers()
        .get("Host")
        .ok()
        .flatten()
        .and_then(|h| route::normalize_request_host(&h));
    let raw_url = if path.starts_with("/e/") || host_header.is_none() {
        req.inner().url()
    } else {
        String::new()
    };
    let (authority, _, query) = route::split_url(&raw_url);
    let host = host_header.or_else(|| route::normalize_request_host(authority));
    let reply = match route::route(method.as_ref(), &path, query) {
        Route::Sync => boxed(sync_route::sync_route(&mut req, &env)).await,
        Route::MethodNotAllowed => reply(&Page::MethodNotAllowed, head),
        route => {
            let visit_ctx = Visit {
                req: &req,
                env: &env,
                ctx: &ctx,
                config: &config,
                records: Records::new(&env, &ctx, config.origin.clone(), now_ms),
                host,
                path: &path,
                head,
                now_ms,
            };
            let page = boxed(visit(&visit_ctx, route)).await;
            reply(&page, head)
        }
    };
    into_response(reply)
}

/// The facts of one visitor request. What costs calls out of wasm (visitor facts, the KV binding) is read only
/// when a decision needs it.
struct Visit<'a> {
    req: &'a Request,
    /// For the click queue's binding, read only when a click counts.
    env: &'a Env,
    /// For work that must not delay the response (click reports).
    ctx: &'a Context,
    config: &'a IsolateConfig,
    /// The KV records (and the origin's answers) this request reads.
    records: Records<'a>,
    host: Option<String>,
    /// The request's path as received (a protected link's cookie is scoped to it).
    path: &'a str,
    head: bool,
    now_ms: u64,
}

impl Visit<'_> {
    /// The visitor facts the group's rules and the link's (`link_rules`: its `Accept-Language` too) look at, or the
    /// default when none look.
    fn visitor(&self, settings: Option<&GroupSettings>, link_rules: bool) -> Visitor {
        if !decision::needs_visitor(settings) && !link_rules {
            return Visitor::default();
        }
        let header = |name: &str| self.req.headers().get(name).ok().flatten();
        let language = if link_rules {
            header("Accept-Language")
        } else {
            None
        };
        let cf = js_sys::Reflect::get(self.req.inner(), &JsValue::from_str("cf")).ok();
        let cf_get = |obj: Option<&JsValue>, name: &str| {
            obj.filter(|o| o.is_object())
                .and_then(|o| js_sys::Reflect::get(o, &JsValue::from_str(name)).ok())
        };
        let bot = cf_get(cf.as_ref(), "botManagement");
        let cf_text = |name: &str| cf_get(cf.as_ref(), name).and_then(|v| v.as_string());
        let cf_country = cf_text("country");
        let visitor = Visitor::new(
            cf_country.as_deref(),
            header("CF-IPCountry").as_deref(),
            header("User-Agent").as_deref(),
            cf_get(bot.as_ref(), "score").and_then(|v| v.as_f64()),
            cf_get(bot.as_ref(), "verifiedBot").and_then(|v| v.as_bool()) == Some(true),
        )
        .with_accept_language(language.as_deref());
        if !settings.is_some_and(|s| s.analytics.enabled) {
            return visitor;
        }
        // Region and city, for click reports: Cloudflare's `cf` facts. The `CF-Region` / `CF-IPCity` headers are
        // read only where there is no `cf` country, i.e. in local runs and tests: behind Cloudflare a visitor could
        // send them (they are only set by a managed transform), and a missing `cf.city` must stay unknown.
        if cf_country.is_some() {
            visitor.with_place(cf_text("region").as_deref(), cf_text("city").as_deref())
        } else {
            visitor.with_place(
                header("CF-Region").as_deref(),
                header("CF-IPCity").as_deref(),
            )
        }
    }

    /// The group of a live persistent link: KV's record (or its last good copy), else the origin's copy (a group
    /// as new as the link). Only a group KV does not have goes to the origin: one whose read failed is
    /// [`GroupRead::Unavailable`], and the visitor falls back rather than skip its rules.
    async fn link_group(&self, host: &str, code: &str, group_id: &str) -> GroupRead {
        match self.records.group(group_id).await {
            GroupRead::Absent => self.records.group_from_origin(host, code, group_id).await,
            read => read,
        }
    }

    /// The request's raw query (without `?`), for a link that forwards it and for a click's UTM parameters. Read
    /// only then: the full URL is a call out of wasm that the worker crate's `path()` does not need.
    fn query(&self) -> Option<String> {
        let url = self.req.inner().url();
        route::split_url(&url).2.map(str::to_owned)
    }

    /// Reports a click, or a bot that did not count ([`analytics::report`]), after the response (in
    /// `wait_until`): to the click queue when the deployment has one ([`click_queue`]), else into the isolate's
    /// buffer with a flush under way. Neither: nothing to do. A click first gets its visitor hash
    /// ([`unique_io`]) when the request carries the visitor's address.
    fn record_click(
        &self,
        report: analytics::Report,
        host: &str,
        short_code: Option<&str>,
        group_id: &str,
        visitor: &Visitor,
    ) {
        let queue = click_queue::producer(self.env);
        let origin = self.config.origin.clone();
        if queue.is_none() && origin.is_none() {
            return;
        }
        let (event, hashing) = match report {
            analytics::Report::Bot => (
                analytics::bot_event(host, short_code, group_id, self.now_ms),
                None,
            ),
            analytics::Report::Click => {
                let referer = self.req.headers().get("Referer").ok().flatten();
                let event = analytics::click_event(
                    host,
                    short_code,
                    group_id,
                    self.now_ms,
                    visitor,
                    referer.as_deref(),
                    self.query().as_deref(),
                );
                (event, self.visitor_to_hash(host, short_code, visitor))
            }
        };
        let (kv, now_ms) = (self.records.kv_binding(), self.now_ms);
        self.ctx.wait_until(async move {
            let mut event = event;
            if let Some((link, address, user_agent)) = hashing {
                event.visitor =
                    unique_io::visitor_hash(kv, now_ms, &link, &address, &user_agent).await;
            }
            match (queue, origin) {
                (Some(queue), origin) => click_queue::send(queue, event, origin).await,
                (None, Some(origin)) => {
                    origin_io::buffer_click(event);
                    origin_io::flush_clicks(origin).await;
                }
                (None, None) => {}
            }
        });
    }

    /// What a click's visitor hash is made of: the link (its KV key; a dynamic link's host and path), the address
    /// (`CF-Connecting-IPv6`, which Cloudflare's pseudo-IPv4 setting moves the real one to, else
    /// `CF-Connecting-IP`; local runs and tests send it) and the User-Agent. `None` without an address: the
    /// click then counts, but not as a unique visitor.
    fn visitor_to_hash(
        &self,
        host: &str,
        short_code: Option<&str>,
        visitor: &Visitor,
    ) -> Option<(String, String, String)> {
        let header = |name: &str| self.req.headers().get(name).ok().flatten();
        let address = header("CF-Connecting-IPv6")
            .or_else(|| header("CF-Connecting-IP"))
            .filter(|a| !a.trim().is_empty())?;
        let link = match short_code {
            Some(code) => kv_model::link_key(host, code),
            None => [host, self.path].concat(),
        };
        Some((link, address.trim().to_owned(), visitor.user_agent.clone()))
    }

    /// The domain's fallback (its record's URL, else the configured default), neither on the blocklist.
    async fn fallback(&self) -> Page {
        let domain = async {
            match &self.host {
                Some(host) => self.records.domain(host).await,
                None => None,
            }
        };
        // Read together: one round of KV reads on a cold isolate. The blocklist is cached like any record.
        let (domain, blocklist) = join(domain, self.records.blocklist()).await;
        match decision::domain_fallback(
            domain.as_deref(),
            self.config.default_fallback.as_deref(),
            blocklist.as_deref(),
        ) {
            Some(url) => Page::Fallback(url),
            None => Page::NoFallback,
        }
    }
}

/// A future of its own, behind a pointer: the compiler then keeps its code in a function of its own instead of
/// inlining it into the caller's. On a new isolate V8 compiles each wasm function the first time it runs, whole;
/// one function holding every route would make the first request compile the code of all of them.
type Boxed<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + 'a>>;

fn boxed<'a, T>(future: impl std::future::Future<Output = T> + 'a) -> Boxed<'a, T> {
    Box::pin(future)
}

/// What a visitor route decided, with what the click report needs.
struct Visited {
    decision: Decision,
    visitor: Visitor,
    code: Option<String>,
    group_id: String,
}

/// Visitor routes: persistent links, dynamic links and everything else that falls back.
async fn visit(ctx: &Visit<'_>, route: Route) -> Page {
    let Some(host) = ctx.host.as_deref() else {
        return boxed(ctx.fallback()).await;
    };
    let visited = match route {
        Route::Persistent { code } => boxed(persistent(ctx, host, code, false)).await,
        Route::Unlock { code } => return boxed(unlock(ctx, host, code)).await,
        Route::Dynamic { group_id, token } => boxed(dynamic(ctx, host, group_id, token)).await,
        _ => return boxed(ctx.fallback()).await,
    };
    if let Some(report) = analytics::report(&visited.decision, ctx.head, &visited.visitor) {
        ctx.record_click(
            report,
            host,
            visited.code.as_deref(),
            &visited.group_id,
            &visited.visitor,
        );
    }
    match visited.decision.outcome {
        Outcome::Destination(url) => Page::Destination(url, visited.decision.status),
        // A protected link's form is shown at its lowercase path only, the one its cookie is scoped to (browsers
        // match cookie paths case-sensitively): a visitor who typed `/Abc` would otherwise unlock `/abc` and be
        // asked again.
        Outcome::Locked => match visited.code.as_deref() {
            Some(code) if ctx.path.strip_prefix('/') != Some(code) => Page::SeeOther {
                location: crate::password::after_unlock(
                    &format!("/{code}"),
                    ctx.query().as_deref(),
                ),
                set_cookie: None,
            },
            _ => Page::PasswordForm(crate::password_form::Notice::None),
        },
        outcome => boxed(page_for(ctx, outcome)).await,
    }
}

/// A persistent link. On a new isolate its first visit costs one round of KV reads, of one key: the link, whose
/// record carries a copy of its group's settings and the origin's word that none of its destinations is on the
/// blocklist ([`kv_model::LinkRecord::vouched`]); the group's own record and the blocklist are read after the
/// response, for the next visits. A link published before records carried the copy reads its group after the
/// link, and one without the word the blocklist, as they always did. Once the isolate has had the blocklist, it
/// is read with the link (one round when both are due).
///
/// A link with a password checks the visitor's cookie for it, unless `unlocking` (the form is being posted: the
/// password decides, not a cookie).
async fn persistent(ctx: &Visit<'_>, host: &str, code: String, unlocking: bool) -> Visited {
    let records = &ctx.records;
    let (link, blocklist) = if records::blocklist_never_read(ctx.now_ms) {
        let link = records.link(host, &code).await;
        if link.as_deref().is_some_and(|l| l.vouched) {
            records.load_blocklist_after_response();
            (link, None)
        } else {
            (link, records.blocklist().await)
        }
    } else {
        join(records.link(host, &code), records.blocklist()).await
    };
    let now_ms = i64::try_from(ctx.now_ms).unwrap_or(i64::MAX);
    // The group and the query matter only to a link that can still redirect: a paused or expired one falls back
    // without them.
    let live = link
        .as_deref()
        .filter(|l| l.is_active && !l.expired(now_ms));
    let group_read;
    let group = match live {
        Some(l) => match &l.group_settings {
            Some(copy) if !records.group_cached(&l.group_id) => {
                records.load_group_after_response(&l.group_id);
                LinkGroup::Rules(copy)
            }
            _ => {
                group_read = ctx.link_group(host, &code, &l.group_id).await;
                match &group_read {
                    GroupRead::Found(group) => LinkGroup::Rules(&group.settings),
                    GroupRead::Absent => LinkGroup::Absent,
                    GroupRead::Unavailable => LinkGroup::Unavailable,
                }
            }
        },
        None => LinkGroup::Absent,
    };
    // The query is appended when the link forwards it, and read by its rules when they may look at it.
    let query = live
        .filter(|l| l.forward_query || smart::needs_visitor(l))
        .and_then(|_| ctx.query());
    let settings = match group {
        LinkGroup::Rules(settings) => Some(settings),
        LinkGroup::Absent | LinkGroup::Unavailable => None,
    };
    let mut visitor = ctx.visitor(settings, live.is_some_and(smart::needs_visitor));
    if let Some(stored) = live.and_then(|l| l.password_hash.as_deref())
        && !unlocking
    {
        visitor.unlocked = password_io::holds_cookie(ctx, host, &code, stored).await;
    }
    let decision = decision::decide_persistent(
        link.as_deref(),
        group,
        blocklist.as_deref(),
        &visitor,
        query.as_deref(),
        now_ms,
    );
    let group_id = link.map(|l| l.group_id.clone()).unwrap_or_default();
    Visited {
        decision,
        visitor,
        code: Some(code),
        group_id,
    }
}

/// `POST /<code>`: a protected link's form, posted. The link is decided as for a `GET` without a cookie: a visitor
/// the group lets through is at the form ([`Outcome::Locked`]), and only then is the password checked. A link
/// without a password takes no `POST` (`405`); any other outcome (blocked, expired, paused) sends the browser back
/// to the link with a `GET` (`303`), which answers as it always does.
async fn unlock(ctx: &Visit<'_>, host: &str, code: String) -> Page {
    let visited = persistent(ctx, host, code, true).await;
    let link = ctx
        .records
        .link(host, visited.code.as_deref().unwrap_or_default())
        .await;
    let Some(stored) = link.as_deref().and_then(|l| l.password_hash.clone()) else {
        return Page::MethodNotAllowed;
    };
    match visited.decision.outcome {
        Outcome::Locked => {
            let code = visited.code.unwrap_or_default();
            boxed(password_io::unlock(ctx, host, &code, &stored)).await
        }
        _ => Page::SeeOther {
            location: crate::password::after_unlock(ctx.path, ctx.query().as_deref()),
            set_cookie: None,
        },
    }
}

/// A dynamic link: its domain, group and the blocklist in one round of KV reads on a new isolate (the three do
/// not depend on each other).
async fn dynamic(ctx: &Visit<'_>, host: &str, group_id: String, token: Option<String>) -> Visited {
    let records = &ctx.records;
    let (domain, group, blocklist) = join3(
        records.domain(host),
        records.group(&group_id),
        records.blocklist(),
    )
    .await;
    let now_seconds = i64::try_from(ctx.now_ms / 1000).unwrap_or(i64::MAX);
    // A group that could not be read, with no earlier copy, is no group: the link falls back.
    let group = match &group {
        GroupRead::Found(group) => Some(group.as_ref()),
        GroupRead::Absent | GroupRead::Unavailable => None,
    };
    let visitor = ctx.visitor(group.map(|g| &g.settings), false);
    let decision = decision::decide_dynamic(
        domain.as_deref(),
        group,
        token.as_deref(),
        blocklist.as_deref(),
        &visitor,
        now_seconds,
    );
    Visited {
        decision,
        visitor,
        code: None,
        group_id,
    }
}

async fn page_for(ctx: &Visit<'_>, outcome: Outcome) -> Page {
    match outcome {
        // Reached from `visit` only for outcomes other than a destination; a plain redirect here is a 302.
        Outcome::Destination(url) => Page::Destination(url, 302),
        Outcome::Preview {
            destination,
            preview,
        } => Page::Preview {
            destination,
            preview,
        },
        Outcome::Interstitial {
            destination,
            seconds,
        } => Page::Interstitial {
            destination,
            seconds,
        },
        Outcome::Locked => Page::PasswordForm(crate::password_form::Notice::None),
        Outcome::Blocked {
            access_fallback: Some(url),
        } => Page::Fallback(url),
        Outcome::Blocked {
            access_fallback: None,
        }
        | Outcome::Fallback(_) => ctx.fallback().await,
    }
}

/// Copies a [`Reply`] into a Workers `Response`. Header values are built by [`crate::reply`] from checked URLs
/// and constants, so setting them does not fail in practice; if it ever did, the header is skipped rather than
/// the request failed.
fn into_response(reply: Reply) -> worker::Result<Response> {
    let headers = Headers::new();
    for (name, value) in &reply.headers {
        let _ = headers.set(name, value);
    }
    let builder = Response::builder()
        .with_status(reply.status)
        .with_headers(headers);
    Ok(if reply.body.is_empty() {
        builder.empty()
    } else {
        builder.fixed(reply.body.into_bytes())
    })
}
