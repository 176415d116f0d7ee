// The edge worker's entry module, bundled by worker-build in place of its own (scripts/build-edge-worker.sh says
// how). worker-build 0.8.7's entry exports a `WorkerEntrypoint` class behind a Proxy whose every request builds two
// more Proxies (the instance, then the handler it returns) and awaits the handler's result, all to reinitialize the
// Wasm module on the request after one traps. That costs more CPU than our whole hot path (BENCHMARKS.md, "Edge
// worker"). This module keeps the recovery and drops the rest: a plain module-worker object whose handlers call
// wasm-bindgen's exports directly, so the fast path's `Response` goes back as it is, not wrapped in a Promise.
//
// It also keeps answers. When the Rust fast path redirects from records the isolate holds, it says until when the
// same request (GET or HEAD, same URL and Host header) gets the same redirect: until the first of those records is
// due for a reload, or the link or token expires (`answer_until` in src/shell/mod.rs, `decision::answer_until`).
// Until then this module answers that request itself, with no call into wasm and no string copied into it; any
// change to the isolate's records (a load, a reload, the sync route) makes it forget every answer at once
// (`on_records_change`). A smart link's redirect also depends on the visitor facts its rules read (User-Agent,
// country, Accept-Language; `answer_vary`): it is kept under those facts as well, so that one visitor is never
// given another's destination. The decision stays Rust's: this is a memo of its result with Rust's own expiry. The
// answers are bounded in number and in bytes (./kept-answers.mjs).
// And it reads a new isolate's first records. When the wasm holds nothing of the records a visit needs, its `fetch`
// returns a plan of KV reads (a string) rather than a Promise; `firstVisit` below reads them in one round (two when
// the first shows another record is needed), hands the texts back, and calls the wasm's synchronous path again, so
// that no async Rust is compiled or run before that response (edge-worker/src/shell/first.rs). A dynamic link's token
// on that visit is opened here, with WebCrypto.
// Named imports, not `import * as`: esbuild then leaves out what the entry never uses (the classes workers-rs
// exports for features this worker has no use for), which makes the bundle smaller to parse on a new isolate.
// The functions a first visit runs are written `const f = (function f(…) {…});`: V8 compiles a function in
// parentheses with the script, when the isolate starts, rather than lazily on that visit (esbuild keeps the
// parentheses; scripts/eager-first-visit.mjs does the same for wasm-bindgen's glue, and says why).
import {
  __wbg_reset_state,
  __worker_init_state,
  answer_until,
  answer_vary,
  fetch as wasmFetch,
  first_after,
  first_fetch,
  first_settle,
  first_store,
  first_store_missing,
  on_records_change,
  queue as wasmQueue,
} from "./index.js";
import { KeptAnswers } from "./kept-answers.mjs";

Error.stackTraceLimit = 100;
// Shared with the Rust side (workers-rs reads and sets it): whether the module trapped, and how often it was reset.
const initState = __worker_init_state();

// After a trap the module's memory may hold half-done state: start it afresh before running anything in it.
const checkReinitialize = (function checkReinitialize() {
  if (initState.criticalError) {
    console.log("Reinitializing Wasm application");
    __wbg_reset_state();
    initState.criticalError = false;
    initState.instanceId++;
    // A new instance starts with empty records: nothing answered from the old ones is kept.
    forgetAnswers();
    on_records_change(forgetAnswers);
  }
});

function markCritical(e) {
  if (e instanceof WebAssembly.RuntimeError) {
    console.error("Critical", e);
    initState.criticalError = true;
  }
}

addEventListener("error", (e) => markCritical(e.error));

// Request key (URL, then the Host header) -> { init: the redirect's status and headers, until: UNIX ms }. At most
// MAX_ANSWERS answers and MAX_ANSWERS_BYTES (./kept-answers.mjs), the oldest going first; a request with a longer URL
// is answered, just not kept.
const MAX_KEPT_URL_LENGTH = 4096;
const answers = new KeptAnswers();
function forgetAnswers() {
  answers.clear();
}
on_records_change(forgetAnswers);

// The key of a request whose answer may be kept: GET and HEAD only (their redirect is the same). A URL holds no
// line break, so the two parts cannot run into each other, and a request without a Host header gets a key of its own.
const answerKey = (function answerKey(request) {
  const method = request.method;
  if (method !== "GET" && method !== "HEAD") return undefined;
  const url = request.url;
  if (url.length > MAX_KEPT_URL_LENGTH) return undefined;
  const host = request.headers.get("host");
  if (host === null) return url;
  // A host name is at most 253 characters; with a port, a few more.
  return host.length > 300 ? undefined : url + "\n" + host;
});

// Runs `call(a1, …, a6)`, a call into wasm, with the recovery around it: a trap while it runs, or later in the
// Promise it returned, marks the module for a reset before the next request. The call's arguments are passed, not
// closed over: a closure is one more function for a first visit to compile. Six at most (`first_fetch` takes six):
// a seventh would be dropped.
const guarded = (function guarded(call, a1, a2, a3, a4, a5, a6) {
  checkReinitialize();
  let result;
  try {
    result = call(a1, a2, a3, a4, a5, a6);
  } catch (e) {
    markCritical(e);
    throw e;
  }
  if (result instanceof Promise) {
    return result.catch((e) => {
      markCritical(e);
      throw e;
    });
  }
  return result;
});

// Keeps a redirect the wasm answered with, for as long as it says (answer_until), under the request's key.
const answered = (function answered(key, request, result) {
  if (key !== undefined && result instanceof Response) {
    const until = answer_until();
    if (until > Date.now()) {
      // A smart link's redirect depends on the visitor facts its rules read (answer_vary): kept under them.
      const headers = new Headers(result.headers);
      answers.keep(key, request, { status: result.status, headers }, headers, until, answer_vary());
    }
  }
  return result;
});

// One KV read: the text, null when KV has no such key, undefined when the read failed (the wasm's full path then
// reads the key again, and logs the failure).
const readKey = (function readKey(kv, key, cacheTtl) {
  try {
    return kv.get(key, { cacheTtl }).catch(() => undefined);
  } catch {
    return undefined;
  }
});

// A plan from the wasm (a line each for the KV binding, cacheTtl and every key; edge-worker/src/shell/first.rs): its
// keys read in one round.
const readPlan = (async function readPlan(env, plan) {
  const [binding, cacheTtl, ...keys] = plan.split("\n");
  const kv = env[binding];
  const ttl = Number(cacheTtl);
  const reads = [];
  for (const key of keys) reads.push(readKey(kv, key, ttl));
  return { keys, texts: await Promise.all(reads) };
});

// Hands what a plan read back to the wasm, held for this visit and cached after its answer (which also ends the
// reads it marked as under way; edge-worker/src/shell/settle.rs): each key's text (null: KV has no such key) to
// first_store, and what it does not hold (a link KV lacks: false) or a failed read (undefined) to
// first_store_missing, which a first visit whose reads came back never calls. Whether every read came back.
const storeRead = (function storeRead(read, env) {
  let all = true;
  for (let i = 0; i < read.keys.length; i++) {
    const key = read.keys[i];
    const text = read.texts[i];
    if (text === undefined) all = false;
    if (text === undefined || !guarded(first_store, key, text ?? undefined)) {
      guarded(first_store_missing, key, text !== undefined, env);
    }
  }
  return all;
});

// A request whose records the isolate holds nothing of (a new isolate's first visit): the records read here, then
// the wasm's synchronous path, with no async Rust compiled or run before the response (nor the isolate cache's
// insertion: what was read is held for this answer, and cached after it); the records it went without after it
// (the group's own, when the link's copy of its settings decided; the blocklist, when the origin's word that the
// link's destinations are not on it did). A link first_store_missing could not cache (KV lacks it: the origin
// is asked) is loaded by the full path under its read's mark, so that requests waiting for it wait for that load.
const firstVisit = (async function firstVisit(request, env, ctx, key, plan) {
  const all = storeRead(await readPlan(env, plan), env);
  // Records this visit turned out to need besides (a dynamic link's domain that neither its group's record nor the
  // blocklist's names: edge-worker/src/named_hosts.rs; the blocklist, for a link without the origin's word): one
  // more round, and no more (the next call plans nothing). Not after a read that failed: the full path reads that
  // again, and logs the failure, as it would have at once.
  let result = guarded(first_fetch, request, env, ctx, undefined, undefined, all);
  if (typeof result === "string") {
    storeRead(await readPlan(env, result), env);
    result = guarded(first_fetch, request, env, ctx, undefined, undefined, false);
  }
  // A dynamic link's token the group's record has not opened, handed on: opened with WebCrypto, whose AES-GCM is
  // native code already there, rather than by the wasm's, which a new isolate would compile first (about 15 KB of
  // it; edge-worker/src/shell/fast.rs, `hand_on`). What was handed on goes back with the plaintext: the wasm decides
  // from the plaintext only if that is still this token under the group's current key.
  if (result instanceof Uint8Array) {
    const sealed = result;
    const plaintext = await openToken(sealed);
    result = guarded(first_fetch, request, env, ctx, sealed, plaintext, false);
  }
  result = answered(key, request, result);
  const after = first_after();
  if (after !== undefined) {
    // What the wasm leaves for after a response (edge-worker/src/shell/settle.rs: the records this visit read,
    // held for its answer, into the isolate cache) is done by its next `fetch`, or by a request waiting for those
    // reads; these reads come after the response, so it is done now.
    ctx.waitUntil(
      readPlan(env, after).then((read) => {
        storeRead(read, env);
        guarded(first_settle);
      }),
    );
  }
  return result;
});

// The token first_fetch handed on (the group key, 32 bytes, the IV, 12, then the ciphertext and its tag): its
// plaintext as text, or undefined when WebCrypto does not open it or the plaintext is not UTF-8 (the strict decoder
// throws; the wasm then opens the token itself, and reads its bytes as it reads any token's). A leading BOM is kept, as
// Rust's reading keeps it. Text, so that the wasm needs no UTF-8 check of its own (edge-worker/src/shell/first.rs,
// `first_fetch`).
const openToken = (async function openToken(sealed) {
  try {
    const key = await crypto.subtle.importKey("raw", sealed.subarray(0, 32), "AES-GCM", false, ["decrypt"]);
    const iv = sealed.subarray(32, 44);
    const plaintext = await crypto.subtle.decrypt({ name: "AES-GCM", iv }, key, sealed.subarray(44));
    return strictUtf8.decode(plaintext);
  } catch {
    return undefined;
  }
});
// Made once: a decoder keeps no state between calls to `decode` without `stream`.
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

export default {
  fetch: (function fetch(request, env, ctx) {
    // After a trap, everything goes to the module first, which resets.
    const key = initState.criticalError ? undefined : answerKey(request);
    // Nothing kept (a new isolate's first visit, or since the records changed): nothing to look up.
    if (key !== undefined && answers.size !== 0) {
      const kept = answers.answer(key, request, Date.now());
      if (kept !== undefined) return new Response(null, kept.init);
    }
    const result = guarded(wasmFetch, request, env, ctx);
    if (typeof result === "string") return firstVisit(request, env, ctx, key, result);
    return answered(key, request, result);
  }),
  queue(batch, env, ctx) {
    return guarded(wasmQueue, batch, env, ctx);
  },
};
