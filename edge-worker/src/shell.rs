//! The Workers entry point (wasm32 only): reads the request and KV, calls the plain decision code, and copies
//! the resulting [`Reply`] into a `Response`. Nothing here decides where a visitor goes.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use std::time::Duration;

use futures_util::future::{Either, join, select};
use kv_model::{
    BLOCKLIST_KEY, BlocklistRecord, DomainRecord, GroupRecord, GroupSettings, LinkRecord,
    ResolvedLink,
};
use serde::de::DeserializeOwned;
use shared_crypto::DomainBlocklist;
use wasm_bindgen::JsValue;
use worker::{
    AbortController, Context, Delay, Env, Fetch, Headers, KvStore, Method, Request, RequestInit,
    Response, event,
};

use crate::analytics::{self, ClickBuffer, ClickEvent};
use crate::cache::{self, TtlCache};
use crate::config;
use crate::decision::{self, Decision, Group, Outcome};
use crate::origin::{self, Delivery, Lookup, Origin};
use crate::reply::{Page, Reply, reply};
use crate::route::{self, Route};
use crate::sync::{self, Auth};
use crate::visitor::Visitor;

/// A cached KV record, parsed once per isolate. `None` inside means "absent or unusable" and is cached too.
#[derive(Clone)]
enum Cached {
    Link(Option<Rc<LinkRecord>>),
    Group(Option<Rc<Group>>),
    Domain(Option<Rc<DomainRecord>>),
    Blocklist(Rc<DomainBlocklist>),
}

/// What one load of a KV key produced.
struct Loaded {
    /// The entry now in the isolate cache; `None` when KV could not be read (nothing is cached then, and the
    /// callers fall back).
    entry: Option<Cached>,
    /// A link KV did not have but the origin did: the request that started the load writes it back to KV.
    write_back: Option<Rc<LinkRecord>>,
    /// Another entry the load learned, cached with it (the link's group in the origin's answer).
    also: Option<(String, Cached)>,
}

impl Loaded {
    fn entry(entry: Cached) -> Self {
        Loaded {
            entry: Some(entry),
            write_back: None,
            also: None,
        }
    }

    /// KV could not be read: nothing to cache, the callers fall back.
    fn failed() -> Self {
        Loaded {
            entry: None,
            write_back: None,
            also: None,
        }
    }
}

/// The isolate-cache key (never a KV key) of a group as the origin gave it, for a link whose group is missing
/// from KV: kept apart from `group:<id>` so KV's own answer, absence included, stays what it is.
fn origin_group_key(group_id: &str) -> String {
    format!("origin-{}", kv_model::group_key(group_id))
}

/// The isolate's form of a group record from the origin (`None`: unusable key, treated as missing).
fn origin_group(record: Option<GroupRecord>) -> Cached {
    Cached::Group(record.and_then(Group::from_record).map(Rc::new))
}

/// Settings read from the environment once per isolate: `[vars]` cannot change without a new deployment, which
/// starts new isolates, and every read is a call out of wasm.
struct IsolateConfig {
    default_fallback: Option<String>,
    /// The origin for KV-miss lookups and click reports; `None` when `ORIGIN_URL` or `ORIGIN_SECRET` is unset.
    origin: Option<Rc<Origin>>,
}

thread_local! {
    /// One cache per isolate; wasm32 Workers are single-threaded, so the `RefCell` is never contended and no
    /// borrow is held across an `.await`.
    static CACHE: RefCell<TtlCache<Cached>> = RefCell::new(TtlCache::new(
        config::ISOLATE_CACHE_TTL_SECONDS * 1000,
        config::ISOLATE_CACHE_CAPACITY,
    ));
    static CONFIG: OnceCell<Rc<IsolateConfig>> = const { OnceCell::new() };
    /// Click events not yet reported to the origin (see [`analytics`]).
    static CLICKS: RefCell<ClickBuffer> = RefCell::new(ClickBuffer::new());
    /// Loads under way, by KV key: the load's number and when it started. A request that needs a key another
    /// request of the isolate is loading waits for that load to fill the cache instead of starting its own: an
    /// expired hot key, or a new link hit by a crowd before KV has it, costs one KV read (and one origin lookup)
    /// per isolate rather than one per request in flight.
    static LOADING: RefCell<HashMap<String, (u64, u64)>> = RefCell::new(HashMap::new());
    static LOAD_NUMBER: Cell<u64> = const { Cell::new(0) };
    /// Bumped by the sync route: a load that read KV before a write must not cache what it read.
    static EPOCH: Cell<u64> = const { Cell::new(0) };
}

/// How long a request waits for another request's load of a key before it loads the key itself: longer than
/// a load normally takes (a KV read, then at most an origin lookup of [`origin::LOOKUP_TIMEOUT_MS`]). A load
/// older than this is taken for lost (its request cancelled) and replaced.
const JOIN_TIMEOUT_MS: u64 = origin::LOOKUP_TIMEOUT_MS + 500;

/// The first and the longest pause between a waiting request's looks at the cache.
const JOIN_FIRST_PAUSE_MS: u64 = 2;
const JOIN_MAX_PAUSE_MS: u64 = 50;

/// The number of the load of `key` under way, if one started less than [`JOIN_TIMEOUT_MS`] before `now_ms`.
fn loading(key: &str, now_ms: u64) -> Option<u64> {
    LOADING.with(|l| {
        l.borrow()
            .get(key)
            .filter(|(_, since)| now_ms < since.saturating_add(JOIN_TIMEOUT_MS))
            .map(|(number, _)| *number)
    })
}

/// Marks a load of a key as under way until dropped (also when the loading request is cancelled mid-load).
struct LoadMark {
    key: String,
    number: u64,
}

impl LoadMark {
    fn new(key: &str) -> Self {
        let number = LOAD_NUMBER.with(|n| {
            n.set(n.get() + 1);
            n.get()
        });
        let since = js_sys::Date::now() as u64;
        LOADING.with(|l| l.borrow_mut().insert(key.to_owned(), (number, since)));
        LoadMark {
            key: key.to_owned(),
            number,
        }
    }
}

impl Drop for LoadMark {
    fn drop(&mut self) {
        LOADING.with(|l| {
            let mut loading = l.borrow_mut();
            // A newer load of the key (after a sync, or replacing a lost one) stays marked.
            if loading
                .get(&self.key)
                .is_some_and(|(n, _)| *n == self.number)
            {
                loading.remove(&self.key);
            }
        });
    }
}

/// Runs `load` as the load of `key` that other requests wait for, and caches its entry (unless the sync route
/// wrote meanwhile).
async fn load(key: &str, load: impl Future<Output = Loaded>) -> Loaded {
    let _mark = LoadMark::new(key);
    let epoch = EPOCH.with(Cell::get);
    let loaded = load.await;
    if let Some(entry) = &loaded.entry
        && EPOCH.with(Cell::get) == epoch
    {
        let now_ms = js_sys::Date::now() as u64;
        CACHE.with(|c| {
            let mut cache = c.borrow_mut();
            cache.insert(key.to_owned(), entry.clone(), now_ms);
            if let Some((key, entry)) = &loaded.also {
                cache.insert(key.clone(), entry.clone(), now_ms);
            }
        });
    }
    loaded
}

/// Waits for another request's load `number` of `key` to put its entry into the cache, looking on timers of this
/// request's own: workerd cancels a request that has nothing pending in its own context, and one woken from
/// another request's context (by awaiting that request's I/O) can be seen as hung in between. `None` when that
/// load ended without an entry, was replaced, or took longer than [`JOIN_TIMEOUT_MS`]: load it yourself.
async fn wait_for_load(key: &str, number: u64) -> Option<Cached> {
    let mut pause = JOIN_FIRST_PAUSE_MS;
    loop {
        Delay::from(Duration::from_millis(pause)).await;
        let now_ms = js_sys::Date::now() as u64;
        if let Some(entry) = CACHE.with(|c| c.borrow().get(key, now_ms)) {
            return Some(entry);
        }
        if loading(key, now_ms) != Some(number) {
            return None;
        }
        pause = (pause * 2).min(JOIN_MAX_PAUSE_MS);
    }
}

/// KV's text for `key` (`Some(None)`: absent); `None` when KV could not be read.
async fn kv_get(kv: Option<KvStore>, key: &str) -> Option<Option<String>> {
    kv?.get(key)
        .cache_ttl(config::KV_CACHE_TTL_SECONDS)
        .text()
        .await
        .ok()
}

/// Writes a link the origin supplied back to KV, provisionally: it expires unless the publisher's own write
/// replaces it (origin.rs explains why).
async fn write_back(kv: Option<KvStore>, key: String, record: Rc<LinkRecord>) {
    let (Some(kv), Ok(text)) = (kv, serde_json::to_string(&*record)) else {
        return;
    };
    if let Ok(put) = kv.put(&key, text) {
        let _ = put
            .expiration_ttl(origin::FALLBACK_RECORD_TTL_SECONDS)
            .execute()
            .await;
    }
}

/// The isolate's configuration, read from `env` on its first request.
fn isolate_config(env: &Env) -> Rc<IsolateConfig> {
    CONFIG.with(|c| {
        c.get_or_init(|| {
            let var = |name: &str| env.var(name).ok().map(|v| v.to_string());
            let ttl_ms = config::cache_ttl_seconds(var(config::CACHE_TTL_VAR).as_deref()) * 1000;
            CACHE.with(|cache| cache.borrow_mut().set_ttl_ms(ttl_ms));
            let secret = env
                .secret(config::ORIGIN_SECRET)
                .ok()
                .map(|s| s.to_string());
            Rc::new(IsolateConfig {
                default_fallback: var(config::DEFAULT_FALLBACK_VAR),
                origin: Origin::from_vars(
                    var(config::ORIGIN_URL_VAR).as_deref(),
                    secret.as_deref(),
                )
                .map(Rc::new),
            })
        })
        .clone()
    })
}

/// The Workers fetch handler. Every visitor request ends in a redirect, an interstitial, a 404 when no fallback
/// is configured at all, or a 405; errors from bindings are absorbed into fallbacks, never turned into a 5xx.
#[event(fetch)]
async fn fetch(mut req: Request, env: Env, ctx: Context) -> worker::Result<Response> {
    // js_sys's static Date.now(): one call out of wasm, no Date object.
    let now_ms = js_sys::Date::now() as u64;
    let config = isolate_config(&env);
    let method = req.method();
    let head = method == Method::Head;
    // worker::Request already holds the path; the full URL (another call out of wasm) is only needed for a
    // dynamic link's query or a request without a Host header.
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
        Route::Sync => sync_route(&mut req, &env).await,
        Route::MethodNotAllowed => reply(&Page::MethodNotAllowed, head),
        route => {
            let visit_ctx = Visit {
                req: &req,
                env: &env,
                ctx: &ctx,
                config: &config,
                host,
                head,
                now_ms,
                kv: OnceCell::new(),
            };
            let page = visit(&visit_ctx, route).await;
            reply(&page, head)
        }
    };
    into_response(reply)
}

/// The facts of one visitor request. What costs calls out of wasm (visitor facts, the KV binding) is read only
/// when a decision needs it.
struct Visit<'a> {
    req: &'a Request,
    env: &'a Env,
    /// For work that must not delay the response (KV write-back, click reports).
    ctx: &'a Context,
    config: &'a IsolateConfig,
    host: Option<String>,
    head: bool,
    now_ms: u64,
    kv: OnceCell<Option<KvStore>>,
}

impl Visit<'_> {
    /// The visitor facts the group rules look at, or the default when the rules do not look.
    fn visitor(&self, settings: Option<&GroupSettings>) -> Visitor {
        if !decision::needs_visitor(settings) {
            return Visitor::default();
        }
        let header = |name: &str| self.req.headers().get(name).ok().flatten();
        let cf = js_sys::Reflect::get(self.req.inner(), &JsValue::from_str("cf")).ok();
        let cf_get = |obj: Option<&JsValue>, name: &str| {
            obj.filter(|o| o.is_object())
                .and_then(|o| js_sys::Reflect::get(o, &JsValue::from_str(name)).ok())
        };
        let bot = cf_get(cf.as_ref(), "botManagement");
        Visitor::new(
            cf_get(cf.as_ref(), "country")
                .and_then(|v| v.as_string())
                .as_deref(),
            header("CF-IPCountry").as_deref(),
            header("User-Agent").as_deref(),
            cf_get(bot.as_ref(), "score").and_then(|v| v.as_f64()),
            cf_get(bot.as_ref(), "verifiedBot").and_then(|v| v.as_bool()) == Some(true),
        )
    }

    fn kv(&self) -> Option<&KvStore> {
        self.kv
            .get_or_init(|| self.env.kv(config::KV_BINDING).ok())
            .as_ref()
    }

    /// The entry for `key`: from the isolate cache, else from another request's load of it under way, else from
    /// a load of this request's own (`start`). An entry near expiry is served as it is and reloaded after the
    /// response, so a hot key never makes a request wait. `None` when KV could not be read.
    async fn entry<F>(&self, key: &str, start: impl FnOnce() -> F) -> Option<Cached>
    where
        F: Future<Output = Loaded> + 'static,
    {
        let (lookup, caching) = CACHE.with(|c| {
            let mut cache = c.borrow_mut();
            (cache.lookup(key, self.now_ms), cache.is_enabled())
        });
        match lookup {
            cache::Lookup::Hit(entry) => Some(entry),
            cache::Lookup::Refresh(entry) => {
                if loading(key, self.now_ms).is_none() {
                    let (kv, key, reload) = (self.kv().cloned(), key.to_owned(), start());
                    self.ctx.wait_until(async move {
                        if let Some(record) = load(&key, reload).await.write_back {
                            write_back(kv, key, record).await;
                        }
                    });
                }
                Some(entry)
            }
            cache::Lookup::Miss => {
                // Without a cache there is nothing to wait for: the other load's entry would not be kept.
                if caching
                    && let Some(number) = loading(key, self.now_ms)
                    && let Some(entry) = wait_for_load(key, number).await
                {
                    return Some(entry);
                }
                let loaded = load(key, start()).await;
                if let Some(record) = loaded.write_back {
                    self.ctx
                        .wait_until(write_back(self.kv().cloned(), key.to_owned(), record));
                }
                loaded.entry
            }
        }
    }

    /// A load of `key` from KV alone; `wrap` parses the text into the entry to cache.
    fn kv_load(
        &self,
        key: &str,
        wrap: fn(Option<String>) -> Cached,
    ) -> impl Future<Output = Loaded> + 'static {
        let (kv, key) = (self.kv().cloned(), key.to_owned());
        async move {
            match kv_get(kv, &key).await {
                Some(text) => Loaded::entry(wrap(text)),
                None => Loaded::failed(),
            }
        }
    }

    /// A link, through the isolate cache and KV, and on a KV miss (a key KV does not have, not a value it cannot
    /// parse) through the origin when one is configured: a link created seconds ago redirects before the
    /// publisher's write has reached this location, and is written back to KV.
    async fn link(&self, host: &str, code: &str) -> Option<Rc<LinkRecord>> {
        let key = kv_model::link_key(host, code);
        let start = || {
            let kv = self.kv().cloned();
            let origin = self.config.origin.clone();
            let (key, host, code) = (key.clone(), host.to_owned(), code.to_owned());
            async move {
                let Some(text) = kv_get(kv, &key).await else {
                    return Loaded::failed();
                };
                match (text, origin) {
                    (Some(text), _) => {
                        Loaded::entry(Cached::Link(parse::<LinkRecord>(Some(text)).map(Rc::new)))
                    }
                    // An origin 404 or failure is cached as absence like a KV miss: an unknown code costs the
                    // origin one lookup per isolate per TTL, not one per request, and a failing origin one slow
                    // visitor, not all.
                    (None, Some(origin)) => match link_from_origin(&origin, &host, &code).await {
                        Some(resolved) => {
                            let record = Rc::new(resolved.link());
                            // The group may be as new as the link: keep the origin's copy for the rules.
                            let also = resolved.group.map(|g| {
                                (origin_group_key(&record.group_id), origin_group(Some(g)))
                            });
                            Loaded {
                                entry: Some(Cached::Link(Some(record.clone()))),
                                write_back: Some(record),
                                also,
                            }
                        }
                        None => Loaded::entry(Cached::Link(None)),
                    },
                    (None, None) => Loaded::entry(Cached::Link(None)),
                }
            }
        };
        match self.entry(&key, start).await {
            Some(Cached::Link(link)) => link,
            _ => None,
        }
    }

    /// Queues a click event and makes sure a flush is under way (after the response, in `wait_until`).
    fn record_click(
        &self,
        host: &str,
        short_code: Option<&str>,
        group_id: &str,
        visitor: &Visitor,
    ) {
        let Some(origin) = self.config.origin.clone() else {
            return;
        };
        let referer = self.req.headers().get("Referer").ok().flatten();
        let event = ClickEvent::new(
            host,
            short_code,
            group_id,
            self.now_ms,
            visitor,
            referer.as_deref(),
        );
        CLICKS.with(|b| b.borrow_mut().push(event));
        self.ctx.wait_until(flush_clicks(origin));
    }

    /// The group of an active persistent link when KV has no usable `group:<id>` (a group created with the link,
    /// seconds ago, not yet published or not yet visible at this location): the origin's copy, from the same
    /// lookup as a link KV lacks, so the group's rules apply from the first visit. `None` without an origin, or
    /// when it does not answer (cached like a KV miss: one lookup per isolate per TTL).
    async fn group_from_origin(&self, host: &str, code: &str, group_id: &str) -> Option<Rc<Group>> {
        let origin = self.config.origin.clone()?;
        let start = || {
            let (host, code) = (host.to_owned(), code.to_owned());
            async move {
                let group = link_from_origin(&origin, &host, &code)
                    .await
                    .and_then(|resolved| resolved.group);
                Loaded::entry(origin_group(group))
            }
        };
        match self.entry(&origin_group_key(group_id), start).await {
            Some(Cached::Group(group)) => group,
            _ => None,
        }
    }

    async fn group(&self, group_id: &str) -> Option<Rc<Group>> {
        let key = kv_model::group_key(group_id);
        let wrap = |text| {
            Cached::Group(
                parse::<GroupRecord>(text)
                    .and_then(Group::from_record)
                    .map(Rc::new),
            )
        };
        match self.entry(&key, || self.kv_load(&key, wrap)).await {
            Some(Cached::Group(group)) => group,
            _ => None,
        }
    }

    async fn domain(&self, host: &str) -> Option<Rc<DomainRecord>> {
        let key = kv_model::domain_key(host);
        let wrap = |text| Cached::Domain(parse::<DomainRecord>(text).map(Rc::new));
        match self.entry(&key, || self.kv_load(&key, wrap)).await {
            Some(Cached::Domain(domain)) => domain,
            _ => None,
        }
    }

    /// The blocked domains; empty when KV cannot be read (that is not cached).
    async fn blocklist(&self) -> Rc<DomainBlocklist> {
        let wrap = |text| {
            Cached::Blocklist(Rc::new(
                parse::<BlocklistRecord>(text)
                    .map(|r| r.domains.iter().collect())
                    .unwrap_or_default(),
            ))
        };
        match self
            .entry(BLOCKLIST_KEY, || self.kv_load(BLOCKLIST_KEY, wrap))
            .await
        {
            Some(Cached::Blocklist(list)) => list,
            _ => Rc::default(),
        }
    }

    /// The domain's fallback (its record's URL, else the configured default).
    async fn fallback(&self) -> Page {
        let domain = match &self.host {
            Some(host) => self.domain(host).await,
            None => None,
        };
        match decision::domain_fallback(domain.as_deref(), self.config.default_fallback.as_deref())
        {
            Some(url) => Page::Fallback(url),
            None => Page::NoFallback,
        }
    }
}

/// Visitor routes: persistent links, dynamic links and everything else that falls back.
async fn visit(ctx: &Visit<'_>, route: Route) -> Page {
    let Some(host) = ctx.host.as_deref() else {
        return ctx.fallback().await;
    };
    let (decision, visitor, code, group_id) = match route {
        Route::Persistent { code } => {
            let link = ctx.link(host, &code).await;
            let group = match &link {
                Some(l) if l.is_active => match ctx.group(&l.group_id).await {
                    Some(group) => Some(group),
                    None => ctx.group_from_origin(host, &code, &l.group_id).await,
                },
                _ => None,
            };
            let settings = group.as_deref().map(|g| &g.settings);
            let visitor = ctx.visitor(settings);
            let decision = decision::decide_persistent(link.as_deref(), settings, &visitor);
            let group_id = link.map(|l| l.group_id.clone()).unwrap_or_default();
            (decision, visitor, Some(code), group_id)
        }
        Route::Dynamic { group_id, token } => {
            let (domain, group) = join(ctx.domain(host), ctx.group(&group_id)).await;
            let blocklist = ctx.blocklist().await;
            let now_seconds = i64::try_from(ctx.now_ms / 1000).unwrap_or(i64::MAX);
            let visitor = ctx.visitor(group.as_deref().map(|g| &g.settings));
            let decision = decision::decide_dynamic(
                domain.as_deref(),
                group.as_deref(),
                token.as_deref(),
                blocklist.as_ref(),
                &visitor,
                now_seconds,
            );
            (decision, visitor, None, group_id)
        }
        _ => return ctx.fallback().await,
    };
    if analytics::counts(&decision, ctx.head, &visitor) {
        ctx.record_click(host, code.as_deref(), &group_id, &visitor);
    }
    page_for(ctx, decision).await
}

async fn page_for(ctx: &Visit<'_>, decision: Decision) -> Page {
    match decision.outcome {
        Outcome::Destination(url) => Page::Destination(url),
        Outcome::Interstitial {
            destination,
            seconds,
        } => Page::Interstitial {
            destination,
            seconds,
        },
        Outcome::Blocked {
            access_fallback: Some(url),
        } => Page::Fallback(url),
        Outcome::Blocked {
            access_fallback: None,
        }
        | Outcome::Fallback(_) => ctx.fallback().await,
    }
}

/// Asks the origin for a link KV does not have (and its group).
async fn link_from_origin(origin: &Origin, host: &str, code: &str) -> Option<ResolvedLink> {
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
async fn flush_clicks(origin: Rc<Origin>) {
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

/// A JSON record, or `None` when absent, unparsable or of another version (the contract: treat as missing).
fn parse<T: DeserializeOwned>(text: Option<String>) -> Option<T> {
    serde_json::from_str(&text?).ok()
}

/// `POST /__shortlink/sync`.
async fn sync_route(req: &mut Request, env: &Env) -> Reply {
    let secret = env.secret(config::SYNC_SECRET).ok().map(|s| s.to_string());
    let authorization = req.headers().get("Authorization").ok().flatten();
    let auth = sync::authorize(authorization.as_deref(), secret.as_deref());
    // Refuse an oversized body before reading it when its length is declared.
    let declared = req
        .headers()
        .get("Content-Length")
        .ok()
        .flatten()
        .and_then(|v| v.trim().parse::<usize>().ok());
    let body = if declared.is_some_and(|len| len > sync::MAX_BODY_BYTES) {
        Err("body_too_large")
    } else {
        // Read the body even when the answer is 401 or 404: workerd closes a connection whose request body was
        // left unread, and a client reusing it from its pool would see a reset instead of our answer.
        req.bytes().await.map_err(|_| "unreadable_body")
    };
    match auth {
        Auth::Disabled => return reply(&Page::NoFallback, false),
        Auth::Denied => return Reply::json(401, sync::error_body("unauthorized")),
        Auth::Allowed => {}
    }
    let body = match body {
        Ok(body) => body,
        Err(e) => return Reply::json(400, sync::error_body(e)),
    };
    let batch = match sync::parse_batch(&body) {
        Ok(batch) => batch,
        Err(e) => return Reply::json(400, sync::error_body(&e)),
    };
    let Ok(kv) = env.kv(config::KV_BINDING) else {
        return Reply::json(503, sync::error_body("kv_binding_missing"));
    };
    let mut result = Ok(());
    for (key, value) in &batch.puts {
        let put = match kv.put(key, value.as_str()) {
            Ok(put) => put.execute().await,
            Err(e) => Err(e),
        };
        if put.is_err() {
            result = Err(format!("kv_put_failed: {key}"));
            break;
        }
    }
    if result.is_ok() {
        for key in &batch.deletes {
            if kv.delete(key).await.is_err() {
                result = Err(format!("kv_delete_failed: {key}"));
                break;
            }
        }
    }
    // Evict even after a partial failure: some keys may have changed. Loads that read before the write neither
    // cache what they read nor serve the requests that come after it.
    EPOCH.with(|e| e.set(e.get() + 1));
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        for key in batch.keys() {
            cache.remove(key);
            if let Some(group_id) = key.strip_prefix("group:") {
                cache.remove(&origin_group_key(group_id));
            }
        }
    });
    LOADING.with(|l| {
        let mut loading = l.borrow_mut();
        for key in batch.keys() {
            loading.remove(key);
        }
    });
    match result {
        Ok(()) => Reply::json(200, sync::ok_body(&batch)),
        // The batch is idempotent: 503 tells the publisher to retry it whole.
        Err(e) => Reply::json(503, sync::error_body(&e)),
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
