// The Miniflare options of the edge worker for the benchmarks, from wrangler.toml: what wrangler gives, without
// the bindings wrangler.toml does not configure.
//
// Why: `unstable_getMiniflareWorkerOptions` returns every binding kind wrangler knows, most of them empty
// (`ratelimits: {}`, `analyticsEngineDatasets: {}`, `dispatchNamespaces: {}`, `email: { send_email: [] }`, ...).
// Miniflare 4.20260730 takes some of those empty options as a plugin in use and adds its local simulators to
// workerd's configuration (a rate limiter with its Durable Object, the Analytics Engine, dispatch-namespace and
// email workers), whose isolates workerd starts with ours: about 5 ms of a cold start that no deployed worker has,
// and that the careful JavaScript worker, given its KV namespace alone, never paid (BENCHMARKS.md, "Cold start",
// 2026-12-02, 03:59–06:59 UTC session). The worker's own bindings (its KV namespace and vars) stay.
import { unstable_getMiniflareWorkerOptions } from "wrangler";

// Whether an option holds nothing: an empty object or array, or an object of such (`email`'s `send_email: []`).
function empty(value) {
  if (Array.isArray(value)) return value.length === 0;
  if (value !== null && typeof value === "object") return Object.values(value).every(empty);
  return false;
}

// `all`: every option as wrangler gives it (the benchmarks' harness before that session), for a comparison.
export function edgeWorkerOptions(wranglerToml, { all = false } = {}) {
  const { workerOptions } = unstable_getMiniflareWorkerOptions(wranglerToml);
  if (all) return workerOptions;
  // compatibilityFlags stays even when empty: it is configuration, not a binding.
  return Object.fromEntries(
    Object.entries(workerOptions).filter(
      ([key, value]) => value !== undefined && (key === "compatibilityFlags" || !empty(value)),
    ),
  );
}
