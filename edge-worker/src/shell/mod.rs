//! The Workers entry point (wasm32 only): reads the request, asks [`records`] for the KV records the route
//! needs, calls the plain decision code, and copies the resulting [`Reply`] into a `Response`. Nothing here decides
//! where a visitor goes; the isolate's records, the origin calls and the sync route are the other files here.

mod origin_io;
mod records;
mod sync_route;

use std::cell::OnceCell;
use std::rc::Rc;

use futures_util::future::join;
use kv_model::GroupSettings;
use wasm_bindgen::JsValue;
use worker::{Context, Env, Headers, Method, Request, Response, event};

use crate::analytics;
use crate::config;
use crate::decision::{self, Decision, Outcome};
use crate::origin::Origin;
use crate::reply::{Page, Reply, reply};
use crate::route::{self, Route};
use crate::visitor::Visitor;
use records::Records;

/// Settings read from the environment once per isolate: `[vars]` cannot change without a new deployment, which
/// starts new isolates, and every read is a call out of wasm.
struct IsolateConfig {
    default_fallback: Option<String>,
    /// The origin for KV-miss lookups and click reports; `None` when `ORIGIN_URL` or `ORIGIN_SECRET` is unset.
    origin: Option<Rc<Origin>>,
}

thread_local! {
    static CONFIG: OnceCell<Rc<IsolateConfig>> = const { OnceCell::new() };
}

/// The isolate's configuration, read from `env` on its first request.
fn isolate_config(env: &Env) -> Rc<IsolateConfig> {
    CONFIG.with(|c| {
        c.get_or_init(|| {
            let var = |name: &str| env.var(name).ok().map(|v| v.to_string());
            let ttl_ms = config::cache_ttl_seconds(var(config::CACHE_TTL_VAR).as_deref()) * 1000;
            records::set_cache_ttl_ms(ttl_ms);
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
        Route::Sync => sync_route::sync_route(&mut req, &env).await,
        Route::MethodNotAllowed => reply(&Page::MethodNotAllowed, head),
        route => {
            let visit_ctx = Visit {
                req: &req,
                ctx: &ctx,
                config: &config,
                records: Records::new(&env, &ctx, config.origin.clone(), now_ms),
                host,
                head,
                now_ms,
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
    /// For work that must not delay the response (click reports).
    ctx: &'a Context,
    config: &'a IsolateConfig,
    /// The KV records (and the origin's answers) this request reads.
    records: Records<'a>,
    host: Option<String>,
    head: bool,
    now_ms: u64,
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
        let event = analytics::click_event(
            host,
            short_code,
            group_id,
            self.now_ms,
            visitor,
            referer.as_deref(),
        );
        origin_io::buffer_click(event);
        self.ctx.wait_until(origin_io::flush_clicks(origin));
    }

    /// The domain's fallback (its record's URL, else the configured default).
    async fn fallback(&self) -> Page {
        let domain = match &self.host {
            Some(host) => self.records.domain(host).await,
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
            let link = ctx.records.link(host, &code).await;
            let group = match &link {
                Some(l) if l.is_active => match ctx.records.group(&l.group_id).await {
                    Some(group) => Some(group),
                    None => {
                        ctx.records
                            .group_from_origin(host, &code, &l.group_id)
                            .await
                    }
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
            let records = &ctx.records;
            let (domain, group) = join(records.domain(host), records.group(&group_id)).await;
            let blocklist = records.blocklist().await;
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
