// The edge worker's entry module, bundled by worker-build in place of its own (scripts/build-edge-worker.sh says
// how). worker-build 0.8.7's entry exports a `WorkerEntrypoint` class behind a Proxy whose every request builds two
// more Proxies (the instance, then the handler it returns) and awaits the handler's result, all to reinitialize the
// Wasm module on the request after one traps. That costs more CPU than our whole hot path (BENCHMARKS.md, "Edge
// worker"). This module keeps the recovery and drops the rest: a plain module-worker object whose handlers call
// wasm-bindgen's exports directly, so the fast path's `Response` goes back as it is, not wrapped in a Promise.
import * as exports from "./index.js";

Error.stackTraceLimit = 100;
// Shared with the Rust side (workers-rs reads and sets it): whether the module trapped, and how often it was reset.
const initState = exports.__worker_init_state();

// After a trap the module's memory may hold half-done state: start it afresh before running anything in it.
function checkReinitialize() {
  if (initState.criticalError) {
    console.log("Reinitializing Wasm application");
    exports.__wbg_reset_state();
    initState.criticalError = false;
    initState.instanceId++;
  }
}

function markCritical(e) {
  if (e instanceof WebAssembly.RuntimeError) {
    console.error("Critical", e);
    initState.criticalError = true;
  }
}

addEventListener("error", (e) => markCritical(e.error));

// Runs a handler with the recovery around it: a trap while it runs, or later in the Promise it returned, marks the
// module for a reset before the next request.
function guarded(handler, event, env, ctx) {
  checkReinitialize();
  let result;
  try {
    result = handler(event, env, ctx);
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
}

export default {
  fetch(request, env, ctx) {
    return guarded(exports.fetch, request, env, ctx);
  },
  queue(batch, env, ctx) {
    return guarded(exports.queue, batch, env, ctx);
  },
};
