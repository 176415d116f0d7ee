//! `POST /__shortlink/sync` (wasm32 only): the origin's authenticated KV writer. What a request may carry and what
//! the answers say is [`crate::sync`]'s (host-tested); this file reads the body, writes KV and evicts the isolate's
//! copies of the keys it wrote. Refusals (400, 401) and KV failures (503) are logged ([`crate::log`]); a request
//! while the route is disabled (404) is not: without `SYNC_SECRET` the route does not exist, and a probe of a
//! route that does not exist is not a failure of the worker's.

use worker::{Env, Request};

use super::{emit, kv, records};
use crate::config;
use crate::log::{self, KvWrite, Via};
use crate::reply::{Page, Reply, reply};
use crate::sync::{self, Auth};

/// `POST /__shortlink/sync`.
pub(super) async fn sync_route(req: &mut Request, env: &Env) -> Reply {
    let secret = super::env_text(env, config::SYNC_SECRET);
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
        Auth::Denied => {
            // Which of the two, for the operator (a publisher without EDGE_SYNC_SECRET, or with another
            // environment's); never the token itself.
            let reason = if authorization.is_some() {
                "wrong_token"
            } else {
                "missing_token"
            };
            emit(log::sync_refused(401, reason));
            return Reply::json(401, sync::error_body("unauthorized"));
        }
        Auth::Allowed => {}
    }
    let body = match body {
        Ok(body) => body,
        Err(e) => return refuse(e),
    };
    let batch = match sync::parse_batch(&body) {
        Ok(batch) => batch,
        Err(e) => return refuse(&e),
    };
    let Some(kv) = kv::binding(env, config::KV_BINDING) else {
        emit(log::kv_binding_missing(config::KV_BINDING, Via::Sync));
        return Reply::json(503, sync::error_body("kv_binding_missing"));
    };
    let mut result = Ok(());
    for (key, value) in &batch.puts {
        if let Err(e) = kv.put(key, value, None).await {
            emit(log::kv_write_failed(key, KvWrite::Put, Via::Sync, &e));
            result = Err(format!("kv_put_failed: {key}"));
            break;
        }
    }
    if result.is_ok() {
        for key in &batch.deletes {
            if let Err(e) = kv.delete(key).await {
                emit(log::kv_write_failed(key, KvWrite::Delete, Via::Sync, &e));
                result = Err(format!("kv_delete_failed: {key}"));
                break;
            }
        }
    }
    // Evict even after a partial failure: some keys may have changed. Loads that read before the write neither
    // cache what they read nor serve the requests that come after it.
    let keys: Vec<&str> = batch.keys().collect();
    // Deletions end the last good copies only when they all happened: after a failure KV may still have the record.
    let deleted: Vec<&str> = match result {
        Ok(()) => batch.deletes.iter().map(String::as_str).collect(),
        Err(_) => Vec::new(),
    };
    records::synced(&keys, &deleted);
    match result {
        Ok(()) => Reply::json(200, sync::ok_body(&batch)),
        // The batch is idempotent: 503 tells the publisher to retry it whole.
        Err(e) => Reply::json(503, sync::error_body(&e)),
    }
}

/// A 400 for an authorized request whose body the route cannot take (`error`: the answer's error code), logged.
fn refuse(error: &str) -> Reply {
    emit(log::sync_refused(400, error));
    Reply::json(400, sync::error_body(error))
}
