// Runs the built edge worker (or the benchmark's floor worker) in workerd through Miniflare, configured from the
// root wrangler.toml, and prints one JSON line `{"url":"http://127.0.0.1:PORT/"}` on stdout once it accepts
// requests. KV is in memory and starts empty, unless KV_PERSIST names a directory: KV is then kept there, and a
// worker started later on the same directory (after this one stopped) starts with what this one had: a new isolate
// on a KV namespace others filled, as a Cloudflare location starts one. Stops on SIGINT/SIGTERM, and with --stop-on-eof also when stdin
// closes (the test harness holds stdin open, so the worker goes away even if the harness is killed).
//
//   node tests/support/serve-worker.mjs [--floor] [--stop-on-eof]
//
// Environment: PORT (default 0: any free port), SYNC_SECRET, DEFAULT_FALLBACK_URL, ISOLATE_CACHE_TTL_SECONDS,
// ORIGIN_URL and ORIGIN_SECRET (override wrangler.toml's values; unset ones keep them).
// EDGE_BUILD_DIR serves another build of the worker (default edge-worker/build; the benchmark's baseline).
// CLICK_QUEUE=1 gives the worker the click queue as wrangler.toml's staging and production environments do (the
// CLICK_QUEUE and CLICK_DEAD_LETTERS producers, the worker consuming the first), with a 1-second retry delay
// instead of minutes; a second, test-only worker consumes the dead-letter queue and keeps what it received, which
// a small HTTP server here answers as a JSON array at `dead_letters_url` in the readiness line.
// KV_FAULTS=1 serves the worker behind a test-only entry module (below, `kvFaultsEntry`) that hands it a KV binding
// whose reads of chosen keys fail, as a failing KV read does (a rejected promise): `POST /__test/kv-faults` with
// `{"fail": ["group:…", "blocklist"], "slow": {"domain:…": 300}}` sets the keys (any host; the request never reaches
// the worker; `slow`: reads that succeed after that many milliseconds) and answers
// `{"fail": […], "failed_reads": n, "reads": {key: m}}`, n counting the reads failed so far and m every read of
// each key (`GET` answers the same without changing the keys). --floor serves a JavaScript worker that answers every
// request with a fixed 302: the benchmark's baseline for what workerd itself costs.
// NO_KV=1 serves the worker without its KV binding (SHORTLINK_KV), as a deployment whose wrangler.toml lost it
// would run.
//
// Miniflare is used directly, not `wrangler dev`, because wrangler's dev proxy halves throughput. Requests keep
// their Host header, which names the domain. `request.cf` has no country or bot score unless a request sends an
// `MF-CF-Blob` header (workerd's way to inject `cf`), so the worker's CF-IPCountry fallback is what tests see.
//
// The worker's console output (its structured log lines, edge-worker/src/log.rs) and workerd's own messages go to
// stderr, line by line and unchanged: stdout carries only the readiness line, so the harness can read the two apart
// (tests/src/lib.rs keeps stderr to check what the worker logged).
import { createServer } from "node:http";
import { createInterface } from "node:readline";
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

// The test-only entry of KV_FAULTS=1: the edge worker's own entry (index.js) called with an `env` whose KV binding
// fails the reads of the keys set through `/__test/kv-faults` (which also tells the reads, and WebCrypto's decryptions). workers-rs takes a KV binding by its methods (no
// type check), so a plain object with KvNamespace's methods serves. Module state is the isolate's, which Miniflare
// keeps for the worker's life, like the worker's own caches.
const kvFaultsEntry = `import worker from "./index.js";
const failing = new Set();
// Key -> milliseconds its reads wait before KV is asked: a slow read, so that other requests come while it is under way.
const slow = new Map();
let failedReads = 0;
const reads = new Map();
// The entry module's WebCrypto decryptions (a new isolate's first visit to a dynamic link opens its token so), and
// how many of them opened the token: counted around crypto.subtle.decrypt, which the worker alone calls.
const subtle = crypto.subtle;
const decrypt = subtle.decrypt.bind(subtle);
const webcrypto = { decrypts: 0, opened: 0 };
subtle.decrypt = (...args) => {
  webcrypto.decrypts++;
  return decrypt(...args).then((plaintext) => {
    webcrypto.opened++;
    return plaintext;
  });
};
function read(kv, method, key, options) {
  reads.set(key, (reads.get(key) ?? 0) + 1);
  if (failing.has(key)) {
    failedReads++;
    return Promise.reject(new Error("KV GET failed: 500 Internal Server Error (injected by the test)"));
  }
  const ms = slow.get(key);
  if (ms !== undefined) return new Promise((resolve) => setTimeout(resolve, ms)).then(() => kv[method](key, options));
  return kv[method](key, options);
}
const wrapped = new WeakMap();
function faulty(env) {
  let w = wrapped.get(env);
  if (w === undefined) {
    const kv = env.SHORTLINK_KV;
    const binding = {
      get: (key, options) => read(kv, "get", key, options),
      getWithMetadata: (key, options) => read(kv, "getWithMetadata", key, options),
      put: (...args) => kv.put(...args),
      list: (...args) => kv.list(...args),
      delete: (...args) => kv.delete(...args),
    };
    w = Object.create(env, { SHORTLINK_KV: { value: binding, enumerable: true } });
    wrapped.set(env, w);
  }
  return w;
}
export default {
  async fetch(request, env, ctx) {
    if (new URL(request.url).pathname === "/__test/kv-faults") {
      if (request.method === "POST") {
        const body = await request.json();
        failing.clear();
        for (const key of body.fail ?? []) failing.add(key);
        slow.clear();
        for (const [key, ms] of Object.entries(body.slow ?? {})) slow.set(key, ms);
      }
      return Response.json({ fail: [...failing], failed_reads: failedReads, reads: Object.fromEntries(reads), webcrypto });
    }
    return worker.fetch(request, faulty(env), ctx);
  },
  queue(batch, env, ctx) {
    return worker.queue(batch, faulty(env), ctx);
  },
};
`;
const kvFaults = !floor && process.env.KV_FAULTS === "1";
const buildDir = resolve(root, process.env.EDGE_BUILD_DIR ?? "edge-worker/build");

const script = floor
  ? {
      modules: true,
      script:
        'export default { fetch() { return new Response(null, { status: 302, headers: { Location: "https://example.com/", "Cache-Control": "private, no-store, max-age=0" } }); } };',
    }
  : kvFaults
    ? {
        // Named as the build's own modules are (relative to the build directory), so their imports resolve.
        modulesRoot: buildDir,
        modules: [
          { type: "ESModule", path: join(buildDir, "kv-faults-entry.mjs"), contents: kvFaultsEntry },
          { type: "ESModule", path: join(buildDir, "index.js") },
          { type: "CompiledWasm", path: join(buildDir, "index_bg.wasm") },
        ],
      }
    : { modules: true, scriptPath: join(buildDir, "index.js") };

const clickQueue = !floor && process.env.CLICK_QUEUE === "1";
const noKv = process.env.NO_KV === "1";
// The test-only entry would hand the worker a binding of its own, over an absent one.
if (noKv && kvFaults) throw new Error("NO_KV=1 and KV_FAULTS=1 do not go together");
const edge = { ...workerOptions, ...script, rootPath: root, bindings, ...(noKv ? { kvNamespaces: {} } : {}) };
// Queue names as in wrangler.toml's environments (there per environment: shortlink-clicks-staging, …).
const queues = clickQueue
  ? {
      queueProducers: {
        CLICK_QUEUE: { queueName: "shortlink-clicks" },
        CLICK_DEAD_LETTERS: { queueName: "shortlink-clicks-dead" },
      },
      queueConsumers: {
        "shortlink-clicks": {
          maxBatchSize: 100,
          maxBatchTimeout: 1,
          maxRetries: 100,
          retryDelay: 1,
          deadLetterQueue: "shortlink-clicks-dead",
        },
      },
    }
  : {};
// The dead-letter queue's test consumer: keeps every message (a click event's JSON text), answers them all on fetch.
const deadLetterProbe = {
  name: "dead-letter-probe",
  modules: true,
  script: `const received = [];
export default {
  async queue(batch) { for (const m of batch.messages) received.push(JSON.parse(m.body)); batch.ackAll(); },
  async fetch() { return Response.json(received); },
};`,
  queueConsumers: { "shortlink-clicks-dead": { maxBatchSize: 100, maxBatchTimeout: 1 } },
};
const workers = clickQueue
  ? { workers: [{ ...edge, ...queues, name: "edge" }, deadLetterProbe] }
  : edge;

const mf = new Miniflare({
  ...workers,
  ...(process.env.KV_PERSIST ? { kvPersist: process.env.KV_PERSIST } : {}),
  host: "127.0.0.1",
  port,
  // No country or bot score by default; see the header comment.
  cf: { colo: "LCL", httpProtocol: "HTTP/1.1" },
  log: new Log(LogLevel.WARN),
  // Instead of Miniflare's default (workerd's stdout to ours, stderr coloured red): both to stderr, as they are.
  handleRuntimeStdio(stdout, stderr) {
    for (const stream of [stdout, stderr]) {
      createInterface({ input: stream, crlfDelay: Infinity }).on("line", (line) => {
        process.stderr.write(line + "\n");
      });
    }
  },
});

const url = await mf.ready;
const ready = { url: url.href };
if (clickQueue) {
  const probe = await mf.getWorker("dead-letter-probe");
  const server = createServer(async (_req, res) => {
    const answer = await probe.fetch("http://dead-letter-probe/");
    res.writeHead(200, { "content-type": "application/json" });
    res.end(await answer.text());
  });
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  server.unref();
  ready.dead_letters_url = `http://127.0.0.1:${server.address().port}/`;
}
process.stdout.write(JSON.stringify(ready) + "\n");

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
