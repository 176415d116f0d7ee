// Cold start of the edge worker against the careful JavaScript worker and the fixed-302 floor: for every sample, a
// new workerd (through Miniflare, in this process) with a new isolate, KV already holding the records, then the
// first request and a second one. Reported per worker, medians over interleaved rounds (each round in another order):
//   start   new Miniflare(...) until it accepts requests: workerd starting, the script compiled, its top level run
//           (ours instantiates the wasm there); with, apart, the CPU this Node process spent in it (Miniflare
//           building and encoding workerd's configuration, and parsing the entry module to find its imports:
//           costs of the local harness that grow with the bundle, not of Cloudflare's isolates);
//   first   the first request's latency: the isolate's caches empty, KV read, the decision, the response;
//   second  the next request's latency, for comparison;
// and the cold start over the floor, (start + first) minus the floor's, which is what the worker itself adds; then the
// issue-28 goals' differences against the careful worker, paired by round, and each build's against the baseline's.
// Two cases per worker, each on its own new isolate: the hot persistent link and a dynamic link.
//
// Usage: node scripts/bench-cold-start.mjs      (after scripts/build-edge-worker.sh; run by scripts/bench-edge.sh
//        with COLD_ROUNDS set, or alone)
// Environment: COLD_ROUNDS (default 10), PEER_JS (default ../shared/bench/peer-js), EDGE_BUILD_DIR (default
//        edge-worker/build), BASELINE_BUILD (an earlier build inside the repository, measured in the same rounds),
//        BUILDS (more builds in the same rounds, each `name=dir`, comma-separated: variants of one lever, side by
//        side), BASELINE_SETTINGS=long (the baseline's records carry a plain group's settings in the long form
//        the origin wrote before 2026-12-02, every field at its default, where the others get `{}`: each build
//        measured with what its own origin publishes), BASELINE_UNNAMED=1 (the baseline's blocklist record names
//        no enabled host, as the origin published it before 2026-12-03: for a build that predates the names),
//        UNNAMED_TOO=1 (ours a second time with such records: a host its records do not name),
//        CASES (default "hot dynamic"), DIRECT=1 (every worker a second time, "(workerd alone)": workerd
//        started from the configuration Miniflare wrote for it, without Miniflare's work in Node; below),
//        ALL_OPTIONS_BUILD (a build started with every option wrangler gives, empty bindings and all, as this
//        harness started ours before 2026-12-02; scripts/bench-worker-options.mjs).
import { spawn } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { request } from "node:http";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import { Log, LogLevel, Miniflare } from "miniflare";
import workerd from "workerd";

// The workerd binary Miniflare starts (the `workerd` package's CommonJS export, seen from ESM).
const workerdBinary = workerd.default ?? workerd;
import { buildDynamicLink } from "../snippets/sign.mjs";
import { edgeWorkerOptions } from "./bench-worker-options.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const rounds = Number(process.env.COLD_ROUNDS ?? 10);
const peer = resolve(process.env.PEER_JS ?? join(root, "../shared/bench/peer-js"));
const HOST = "bench.example.com";
const GROUP = "cccccccc-0000-4000-8000-000000000001";
const KEY = "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI"; // 32 bytes of 0x42, base64url
const HOT_URL = "https://destination.example.org/landing?campaign=bench";
const dynamicPath = (
  await buildDynamicLink(KEY, GROUP, HOST, {
    destination_url: "https://destination.example.org/landing/page?campaign=benchmark",
    back_param: "utm_source=bench&utm_medium=cold",
  })
).slice(`https://${HOST}`.length);

// The careful worker runs from a directory inside the repository, so that it resolves nothing outside it.
const work = mkdtempSync(join(root, "target", "bench-cold-"));
mkdirSync(work, { recursive: true });
copyFileSync(join(peer, "careful-worker.mjs"), join(work, "careful-worker.mjs"));

const common = { host: "127.0.0.1", port: 0, log: new Log(LogLevel.WARN) };
// `all`: with every option wrangler gives (scripts/bench-worker-options.mjs says why not by default).
const oursOptions = (dir, { all = false } = {}) => ({
  ...common,
  ...edgeWorkerOptions(join(root, "wrangler.toml"), { all }),
  modules: true,
  scriptPath: resolve(root, dir, "index.js"),
  rootPath: root,
  cf: { colo: "LCL", httpProtocol: "HTTP/1.1" },
});
const record = (value) => JSON.stringify({ v: 1, ...value });
// A plain group's settings as the origin wrote them until 2026-12-02 (kv_model::GroupSettings, every field); since,
// `{}`.
const LONG_SETTINGS = {
  access: { allow_countries: [], block_countries: [], block_bots: false, fallback_url: null },
  monetization: null,
  analytics: { enabled: false },
};
// `named`: the blocklist's record names the host as an enabled platform domain, as the origin publishes it since
// 2026-12-03 (kv_model::BlocklistRecord::enabled_hosts); a build from before reads that field with serde_json
// (BASELINE_UNNAMED=1 gives its records without it).
const seedWith = (settings, { named = true } = {}) => ({
  binding: "SHORTLINK_KV",
  records: {
    [`domain:${HOST}`]: record({ enabled: true, fallback_url: "https://www.example.com/" }),
    [`group:${GROUP}`]: record({ key: KEY, settings }),
    blocklist: record({ domains: ["evil.example"], ...(named ? { enabled_hosts: [HOST] } : {}) }),
    [`link:${HOST}:hot`]: record({ long_url: HOT_URL, group_id: GROUP, is_active: true, group_settings: settings, vouched: true }),
  },
});
const oursSeed = seedWith({});

const workers = [
  {
    name: "floor",
    options: {
      ...common,
      cf: { colo: "LCL", httpProtocol: "HTTP/1.1" },
      modules: true,
      script:
        'export default { fetch() { return new Response(null, { status: 302, headers: { Location: "https://example.com/", "Cache-Control": "private, no-store, max-age=0" } }); } };',
    },
  },
  {
    name: "careful JS",
    options: {
      ...common,
      cf: false,
      modules: true,
      scriptPath: join(work, "careful-worker.mjs"),
      compatibilityDate: "2025-11-01",
      kvNamespaces: { LINKS: "00000000000000000000000000000000" },
    },
    seed: {
      binding: "LINKS",
      records: {
        [`link:${HOST}:hot`]: JSON.stringify({ u: HOT_URL, a: true }),
        [`group:${GROUP}`]: JSON.stringify({ key: KEY }),
      },
    },
  },
  { name: "ours", options: oursOptions(process.env.EDGE_BUILD_DIR ?? "edge-worker/build"), seed: oursSeed },
];
if (process.env.BASELINE_BUILD) {
  const named = process.env.BASELINE_UNNAMED !== "1";
  const seed = seedWith(process.env.BASELINE_SETTINGS === "long" ? LONG_SETTINGS : {}, { named });
  workers.push({ name: "baseline", options: oursOptions(process.env.BASELINE_BUILD), seed });
}
// ALL_OPTIONS_BUILD=<dir>: that build once more, "… (every wrangler option)", with the empty bindings wrangler gives
// and Miniflare's simulators for them, as this harness started ours before 2026-12-02 (a comparison of harnesses).
if (process.env.ALL_OPTIONS_BUILD) {
  workers.push({ name: "every wrangler option", options: oursOptions(process.env.ALL_OPTIONS_BUILD, { all: true }), seed: oursSeed });
}
// UNNAMED_TOO=1: ours once more, "ours, host not named", its blocklist's record naming no enabled host (another
// account's custom domain, or a platform past kv_model::MAX_ENABLED_HOSTS): a dynamic first visit's second round.
if (process.env.UNNAMED_TOO === "1") {
  const dir = process.env.EDGE_BUILD_DIR ?? "edge-worker/build";
  workers.push({ name: "ours, host not named", options: oursOptions(dir), seed: seedWith({}, { named: false }) });
}
for (const spec of (process.env.BUILDS ?? "").split(",").filter(Boolean)) {
  const [name, dir] = spec.split("=");
  workers.push({ name, options: oursOptions(dir), seed: oursSeed });
}
// LISTED=1: every worker a second time, "(listed)", its modules given to Miniflare as a list instead of found
// from the entry's imports. Miniflare finds them by parsing the entry with acorn, in Node, before workerd starts,
// which costs about 0.6 ms per KB of bundle on this machine (BENCHMARKS.md, "Cold start"): a cost of the local
// harness that grows with our glue and that Cloudflare, which receives the modules listed, never has.
if (process.env.LISTED === "1") {
  for (const worker of [...workers]) {
    const { script, scriptPath, modulesRules, ...options } = worker.options;
    let entry = scriptPath;
    if (script !== undefined) {
      entry = join(work, "floor.mjs");
      writeFileSync(entry, script);
    }
    const wasm = join(dirname(entry), "index_bg.wasm");
    options.modulesRoot = dirname(entry);
    options.modules = [
      { type: "ESModule", path: entry },
      ...(existsSync(wasm) ? [{ type: "CompiledWasm", path: wasm }] : []),
    ];
    workers.push({ ...worker, name: `${worker.name} (listed)`, options });
  }
}
// DIRECT=1: every worker a second time, "(workerd alone)": a new workerd started from the binary configuration
// Miniflare wrote for that worker (captured once, through a wrapper in place of the workerd binary), with the same
// arguments, so "start" is workerd's own (its start, the worker's modules compiled, the top level run) and none of
// Miniflare's work in Node (building and encoding the configuration, parsing the entry for its imports), which
// Cloudflare never does and which grows with our bundle (BENCHMARKS.md, "Cold start"). KV is persisted to a
// directory the captured configuration names; the capturing Miniflare stays up until the end, for its loopback.
const direct = process.env.DIRECT === "1";
if (direct) {
  const wrapper = join(work, "capture-workerd.sh");
  writeFileSync(
    wrapper,
    `#!/bin/sh\nprintf '%s\\n' "$@" > "$CAPTURE_TO.args"\ntee "$CAPTURE_TO" | exec "${workerdBinary}" "$@"\n`,
  );
  chmodSync(wrapper, 0o755);
  for (const worker of [...workers]) {
    workers.push({ ...worker, name: `${worker.name} (workerd alone)`, capture: { wrapper } });
  }
}

const allCases = [
  { name: "hot persistent link", path: "/hot", location: HOT_URL },
  {
    name: "dynamic link",
    path: dynamicPath,
    location: "https://destination.example.org/landing/page?campaign=benchmark&utm_source=bench&utm_medium=cold",
  },
];
const wanted = (process.env.CASES ?? "hot dynamic").split(/\s+/);
const cases = allCases.filter((c) => wanted.includes(c.name.startsWith("hot") ? "hot" : "dynamic"));

// One GET on a new connection; resolves with the status and Location header.
function get(url, path) {
  return new Promise((done, fail) => {
    const req = request(new URL(path, url), { headers: { Host: HOST }, agent: false }, (res) => {
      res.resume();
      res.on("end", () => done({ status: res.statusCode, location: res.headers.location }));
    });
    req.on("error", fail);
    req.end();
  });
}

// Starts `worker` once through Miniflare with workerd replaced by the capturing wrapper and KV persisted to a
// directory, seeds KV, and keeps the configuration and arguments Miniflare gave workerd.
async function capture(worker) {
  const name = worker.name.replace(/[^a-z]+/gi, "-");
  const file = join(work, `${name}.capnp`);
  process.env.MINIFLARE_WORKERD_PATH = worker.capture.wrapper;
  process.env.CAPTURE_TO = file;
  const mf = new Miniflare({ ...worker.options, kvPersist: join(work, `${name}-kv`) });
  try {
    await mf.ready;
  } finally {
    delete process.env.MINIFLARE_WORKERD_PATH;
    delete process.env.CAPTURE_TO;
  }
  if (worker.seed) {
    const kv = await mf.getKVNamespace(worker.seed.binding);
    for (const [k, v] of Object.entries(worker.seed.records)) await kv.put(k, v);
  }
  const args = readFileSync(`${file}.args`, "utf8").trimEnd().split("\n");
  return { mf, config: readFileSync(file), args };
}

// A new workerd from a captured configuration: its start until the entry socket listens (workerd says so on the
// control pipe, fd 3, as Miniflare reads it), then the first and second requests.
async function directSample(worker, kase) {
  const { config, args } = worker.captured;
  const t0 = performance.now();
  const child = spawn(workerdBinary, args, { stdio: ["pipe", "ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const exited = new Promise((done) => child.once("exit", done));
  child.stdin.end(config);
  try {
    const port = await new Promise((done, fail) => {
      child.once("exit", (code) => fail(new Error(`${worker.name}: workerd exited (${code}): ${stderr}`)));
      createInterface(child.stdio[3]).on("line", (line) => {
        const message = JSON.parse(line);
        if (message.event === "listen" && message.socket === "entry") done(message.port);
      });
    });
    const start = performance.now() - t0;
    const url = `http://127.0.0.1:${port}/`;
    return { start, node: 0, ...(await requests(worker, kase, url)) };
  } finally {
    child.kill("SIGKILL");
    await exited;
  }
}

// The first and second requests to a worker that has just started, each checked.
async function requests(worker, kase, url) {
  const t1 = performance.now();
  const path = worker.name.startsWith("floor") ? "/" : kase.path;
  const first = await get(url, path);
  const t2 = performance.now();
  const second = await get(url, path);
  const t3 = performance.now();
  for (const answer of [first, second]) {
    const expected = worker.name.startsWith("floor") ? "https://example.com/" : kase.location;
    if (answer.status !== 302 || answer.location !== expected) {
      throw new Error(`${worker.name}, ${kase.name}: ${answer.status} ${answer.location}, not 302 ${expected}`);
    }
  }
  return { first: t2 - t1, second: t3 - t2 };
}

async function sample(worker, kase) {
  if (worker.capture) return directSample(worker, kase);
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const mf = new Miniflare(worker.options);
  const url = await mf.ready;
  const start = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  // Miniflare's own work in this process before workerd answers (its config built and encoded, the entry module
  // parsed to find its imports): part of "start" here, nothing Cloudflare's isolates pay.
  const node = (cpu.user + cpu.system) / 1000;
  try {
    if (worker.seed) {
      const kv = await mf.getKVNamespace(worker.seed.binding);
      for (const [k, v] of Object.entries(worker.seed.records)) await kv.put(k, v);
    }
    return { start, node, ...(await requests(worker, kase, url)) };
  } finally {
    await mf.dispose();
  }
}

// The captures first, so that none of their work falls inside a round.
for (const worker of workers) if (worker.capture) worker.captured = await capture(worker);
const results = new Map(); // "worker|case" -> [{start, first, second}]
for (let round = 1; round <= rounds; round++) {
  // Each round starts with the next worker. A worker's start depends on the one run before it: in a fixed order the
  // slot after the careful worker's started about 15 ms slower than the next, whichever of two builds held it
  // (2026-11-29, BENCHMARKS.md), so no worker keeps a slot.
  const order = workers.map((_, i) => workers[(i + round - 1) % workers.length]);
  for (const kase of cases) {
    for (const worker of order) {
      const key = `${worker.name}|${kase.name}`;
      const s = await sample(worker, kase);
      if (!results.has(key)) results.set(key, []);
      results.get(key).push(s);
      process.stderr.write(
        `bench-cold-start: round ${round} ${key}: start ${s.start.toFixed(1)} (Node ${s.node.toFixed(1)}) first ${s.first.toFixed(1)} second ${s.second.toFixed(1)} ms\n`,
      );
    }
  }
}
for (const worker of workers) if (worker.captured) await worker.captured.mf.dispose();
rmSync(work, { recursive: true, force: true });

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const field = (key, f) => median(results.get(key).map((s) => (f === "cold" ? s.start + s.first : s[f])));
const f1 = (x) => x.toFixed(1);
console.log(
  "| case | worker | start, ms | of which Miniflare's CPU in Node, ms | first request, ms | second request, ms | cold start over the floor, ms |",
);
console.log("|---|---|---|---|---|---|---|");
for (const kase of cases) {
  for (const worker of workers) {
    const key = `${worker.name}|${kase.name}`;
    const floor = worker.name.endsWith("(listed)")
      ? "floor (listed)"
      : worker.name.endsWith("(workerd alone)")
        ? "floor (workerd alone)"
        : "floor";
    const floorCold = field(`${floor}|${kase.name}`, "cold");
    const over = worker.name.startsWith("floor") ? "" : f1(field(key, "cold") - floorCold);
    console.log(
      `| ${kase.name} | ${worker.name} | ${f1(field(key, "start"))} | ${f1(field(key, "node"))} | ${f1(field(key, "first"))} | ${f1(field(key, "second"))} | ${over} |`,
    );
  }
}
// The goals' differences (issue 28), paired by round: a worker's sample against the careful worker's of the same
// round and mode, whose medians are steadier than a difference of medians on a shared machine. A cold start over the
// floor minus the careful worker's is a difference of their start + first request (the floor's cancels).
console.log(
  "\n| case | worker | first request − careful JS's, ms (rounds ≤ 3) | cold start over the floor − careful JS's, ms (rounds ≤ 10) |",
);
console.log("|---|---|---|---|");
for (const kase of cases) {
  for (const worker of workers) {
    if (worker.name.startsWith("floor") || worker.name.startsWith("careful JS")) continue;
    const mode = worker.name.match(/ \((listed|workerd alone)\)$/)?.[0] ?? "";
    const ours = results.get(`${worker.name}|${kase.name}`);
    const js = results.get(`careful JS${mode}|${kase.name}`);
    const first = ours.map((s, i) => s.first - js[i].first);
    const cold = ours.map((s, i) => s.start + s.first - (js[i].start + js[i].first));
    const within = (xs, goal) => `${xs.filter((x) => x <= goal).length} of ${xs.length}`;
    console.log(
      `| ${kase.name} | ${worker.name} | ${f1(median(first))} (${within(first, 3)}) | ${f1(median(cold))} (${within(cold, 10)}) |`,
    );
  }
}
// Each build against the baseline (BASELINE_BUILD) of the same mode, paired by round as above: what a change moved,
// which every comparison of two builds on this noisy machine wants (before 2026-12-03 computed by hand from the
// round lines). Negative is faster; "faster in" counts the rounds where it was.
const baselines = workers.filter((w) => w.name.startsWith("baseline"));
if (baselines.length) {
  console.log("\n| case | build − baseline, paired by round | first request, ms (faster in) | start + first request, ms (faster in) |");
  console.log("|---|---|---|---|");
  for (const kase of cases) {
    for (const worker of workers) {
      if (/^(floor|careful JS|baseline)/.test(worker.name)) continue;
      const mode = worker.name.match(/ \((listed|workerd alone)\)$/)?.[0] ?? "";
      const base = results.get(`baseline${mode}|${kase.name}`);
      if (!base) continue;
      const ours = results.get(`${worker.name}|${kase.name}`);
      const first = ours.map((s, i) => s.first - base[i].first);
      const cold = ours.map((s, i) => s.start + s.first - (base[i].start + base[i].first));
      const faster = (xs) => `${xs.filter((x) => x < 0).length} of ${xs.length}`;
      const signed = (x) => (x > 0 ? "+" : x < 0 ? "−" : "") + Math.abs(x).toFixed(2);
      console.log(
        `| ${kase.name} | ${worker.name} | ${signed(median(first))} (${faster(first)}) | ${signed(median(cold))} (${faster(cold)}) |`,
      );
    }
  }
}
const wasm = readFileSync(join(root, process.env.EDGE_BUILD_DIR ?? "edge-worker/build", "index_bg.wasm"));
console.log(`\nmedians of ${rounds} rounds, each starting a new workerd for every worker and case; wasm ${wasm.length} bytes raw.`);
