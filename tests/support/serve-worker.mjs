// Runs the built edge worker (or the benchmark's floor worker) in workerd through Miniflare, configured from the
// root wrangler.toml, and prints one JSON line `{"url":"http://127.0.0.1:PORT/"}` on stdout once it accepts
// requests. KV is in memory and starts empty. Stops on SIGINT/SIGTERM, and with --stop-on-eof also when stdin
// closes (the test harness holds stdin open, so the worker goes away even if the harness is killed).
//
//   node tests/support/serve-worker.mjs [--floor] [--stop-on-eof]
//
// Environment: PORT (default 0: any free port), SYNC_SECRET, DEFAULT_FALLBACK_URL, ISOLATE_CACHE_TTL_SECONDS,
// ORIGIN_URL and ORIGIN_SECRET (override wrangler.toml's values; unset ones keep them). --floor serves a JavaScript
// worker that answers every request with a fixed
// 302: the benchmark's baseline for what workerd itself costs.
//
// Miniflare is used directly, not `wrangler dev`, because wrangler's dev proxy halves throughput. Requests keep
// their Host header, which names the domain. `request.cf` has no country or bot score unless a request sends an
// `MF-CF-Blob` header (workerd's way to inject `cf`), so the worker's CF-IPCountry fallback is what tests see.
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Log, LogLevel, Miniflare } from "miniflare";
import { unstable_getMiniflareWorkerOptions } from "wrangler";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const floor = process.argv.includes("--floor");
const port = Number(process.env.PORT ?? 0);

const { workerOptions } = unstable_getMiniflareWorkerOptions(join(root, "wrangler.toml"));
const bindings = { ...workerOptions.bindings };
for (const name of [
  "SYNC_SECRET",
  "DEFAULT_FALLBACK_URL",
  "ISOLATE_CACHE_TTL_SECONDS",
  "ORIGIN_URL",
  "ORIGIN_SECRET",
]) {
  if (process.env[name] !== undefined) bindings[name] = process.env[name];
}

const script = floor
  ? {
      modules: true,
      script:
        'export default { fetch() { return new Response(null, { status: 302, headers: { Location: "https://example.com/", "Cache-Control": "private, no-store, max-age=0" } }); } };',
    }
  : { modules: true, scriptPath: join(root, "edge-worker/build/index.js") };

const mf = new Miniflare({
  ...workerOptions,
  ...script,
  rootPath: root,
  bindings,
  host: "127.0.0.1",
  port,
  // No country or bot score by default; see the header comment.
  cf: { colo: "LCL", httpProtocol: "HTTP/1.1" },
  log: new Log(LogLevel.WARN),
});

const url = await mf.ready;
process.stdout.write(JSON.stringify({ url: url.href }) + "\n");

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  await mf.dispose().catch(() => {});
  process.exit(0);
}
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
if (process.argv.includes("--stop-on-eof")) {
  process.stdin.on("end", stop);
  process.stdin.on("error", stop);
  process.stdin.resume();
}
