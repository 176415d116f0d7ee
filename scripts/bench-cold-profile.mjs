// Where a cold start's time goes: profiles of a new isolate (a new workerd through Miniflare, as
// scripts/bench-cold-start.mjs starts them), two ways.
//
//   inspector  workerd's own V8 inspector (`--inspector-addr`, as `wrangler dev` uses it): a CPU profile of the
//              first request, sampled every 50 µs, summed by function (self time), our wasm functions named
//              through the build's functions.txt. The isolate's start (the script's top level) runs before any
//              inspector can attach, so it is not in this profile.
//   perf       Linux `perf record` of the whole workerd process from exec to 300 ms after the first answer (the
//              start included), at 20 kHz with call stacks, every thread. Each sample is put in one bucket: by
//              when it was taken, the first request (from the moment it is sent until its answer reached the
//              client) or after it (ours reads its group's record in waitUntil then); before it, by its stack,
//              the worker's start (its modules compiled, its top level run) or workerd's own start; and within
//              that by what its stack runs (JS parse, wasm compile, Liftoff, JS or wasm run, GC). For ours and
//              the careful JavaScript worker, so the difference is what ours adds; CPU ms are samples / 20 kHz,
//              medians of PERF_RUNS runs. (Before 2026-11-29 the first request was told by its stack alone,
//              which left out what runs after a KV read, and the KV seeding was inside the profile.)
//   compiled   which of our wasm functions V8 compiles (Liftoff, lazily: on its first call) for the first request,
//              from V8's `--perf-basic-prof` map of workerd: each function's index, its size in the wasm's code
//              section and in machine code, its Rust name (functions.txt), split into those compiled before the
//              response and after it (the group's record read in `waitUntil` after a first visit decided from the
//              link's copy of its settings). A steady count, unlike times: the first request's Liftoff time goes
//              with the bytes compiled before the response.
//   flushes    when V8 drops the process's Liftoff code: ours' workerd run under gdb (apt-get install gdb), with
//              breakpoints that print a line for each memory-pressure notification (its level and caller), each
//              flush of Liftoff code (`WasmEngine::FlushLiftoffCode`) and each wasm module compiled or
//              instantiated, in order, split at the worker's readiness. Not in `perf` or the latency benches: gdb
//              slows workerd's start.
//
// Usage: node scripts/bench-cold-profile.mjs [inspector|perf|compiled|flushes]...   (default: inspector and perf; after
//        scripts/build-edge-worker.sh; perf needs the `perf` tool, apt-get install linux-perf)
// Environment: EDGE_BUILD_DIR (default edge-worker/build), PEER_JS (default ../shared/bench/peer-js), PERF_RUNS
//        (default 5), CASE (hot or dynamic, default hot), WORKER=careful (the inspector profile of the careful
//        JavaScript worker instead of ours), SETTINGS=long (a plain group's settings in the records in the long form
//        the origin wrote before 2026-12-02, every field at its default, instead of `{}`), UNNAMED=1 (the
//        blocklist's record names no enabled host, as the origin published it before 2026-12-03), PERF_LEAVES (perf: the functions the samples of the buckets whose name
//        holds this text stopped in, e.g. "first request: wasm lazy"), COMPILED_TOP (compiled: how many of the
//        largest functions to list, default 25), COMPILED_LIST (compiled: a file to which the index of every wasm
//        function our isolate compiled, its start, the first request and a second one included, is appended, one a
//        line: what a module split by use would have to keep in the part a new isolate loads).
import { execFileSync, execSync } from "node:child_process";
import { appendFileSync, chmodSync, copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Log, LogLevel, Miniflare } from "miniflare";
import { buildDynamicLink } from "../snippets/sign.mjs";
import { edgeWorkerOptions } from "./bench-worker-options.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const build = resolve(root, process.env.EDGE_BUILD_DIR ?? "edge-worker/build");
const peer = resolve(process.env.PEER_JS ?? join(root, "../shared/bench/peer-js"));
const perfRuns = Number(process.env.PERF_RUNS ?? 5);
const modes = process.argv.slice(2).length ? process.argv.slice(2) : ["inspector", "perf"];
const HOST = "bench.example.com";
const GROUP = "cccccccc-0000-4000-8000-000000000001";
const KEY = "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI"; // 32 bytes of 0x42, base64url
const HOT_URL = "https://destination.example.org/landing?campaign=bench";
const path =
  process.env.CASE === "dynamic"
    ? (
        await buildDynamicLink(KEY, GROUP, HOST, {
          destination_url: "https://destination.example.org/landing/page?campaign=benchmark",
          back_param: "utm_source=bench&utm_medium=cold",
        })
      ).slice(`https://${HOST}`.length)
    : "/hot";

const work = mkdtempSync(join(root, "target", "bench-profile-"));
// V8 flags for workerd, read by Miniflare when it starts one: the compiled mode needs the perf map. V8 also writes
// its log then, one file per isolate in workerd's directory (the checkout) unless told where: one file, in `work`.
if (modes.includes("compiled")) {
  process.env.MINIFLARE_WORKERD_V8_FLAGS = `--perf-basic-prof --no-logfile-per-isolate --logfile=${join(work, "v8.log")}`;
}
copyFileSync(join(peer, "careful-worker.mjs"), join(work, "careful-worker.mjs"));
const common = { host: "127.0.0.1", port: 0, log: new Log(LogLevel.WARN) };
const record = (value) => JSON.stringify({ v: 1, ...value });
// A plain group's settings: `{}`, as the origin writes them since 2026-12-02, or with SETTINGS=long every field at its
// default, as it wrote them before.
const settings =
  process.env.SETTINGS === "long"
    ? {
        access: { allow_countries: [], block_countries: [], block_bots: false, fallback_url: null },
        monetization: null,
        analytics: { enabled: false },
      }
    : {};
const ours = {
  name: "ours",
  options: {
    ...common,
    // Without the empty bindings wrangler gives, whose Miniflare simulators would start with ours.
    ...edgeWorkerOptions(join(root, "wrangler.toml")),
    modules: true,
    scriptPath: join(build, "index.js"),
    rootPath: root,
    cf: { colo: "LCL", httpProtocol: "HTTP/1.1" },
  },
  seed: {
    binding: "SHORTLINK_KV",
    records: {
      [`domain:${HOST}`]: record({ enabled: true, fallback_url: "https://www.example.com/" }),
      [`group:${GROUP}`]: record({ key: KEY, settings }),
      // Naming the host as an enabled platform domain, as the origin publishes it since 2026-12-03; UNNAMED=1 for a
      // build from before, which reads that field with serde_json.
      blocklist: record({
        domains: ["evil.example"],
        ...(process.env.UNNAMED === "1" ? {} : { enabled_hosts: [HOST] }),
      }),
      [`link:${HOST}:hot`]: record({ long_url: HOT_URL, group_id: GROUP, is_active: true, group_settings: settings, vouched: true }),
    },
  },
};
const careful = {
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
};

function get(url) {
  return new Promise((done, fail) => {
    const req = request(new URL(path, url), { headers: { Host: HOST }, agent: false }, (res) => {
      res.resume();
      res.on("end", () => done(res.statusCode));
    });
    req.on("error", fail);
    req.end();
  });
}

// The worker's options with its KV records already stored: written by a Miniflare of its own into a directory the
// profiled one reads (`kvPersist`), so that the seeding's requests (handled in the profiled workerd like any
// other) are in no profile.
async function seeded(worker) {
  const kvPersist = mkdtempSync(join(work, "kv-"));
  const seeder = new Miniflare({ ...worker.options, kvPersist });
  try {
    await seeder.ready;
    const kv = await seeder.getKVNamespace(worker.seed.binding);
    for (const [k, v] of Object.entries(worker.seed.records)) await kv.put(k, v);
  } finally {
    await seeder.dispose();
  }
  return { ...worker.options, kvPersist };
}

// Index -> Rust name of the build's wasm functions (functions.txt: "N:name" lines from wasm-opt).
function functionNames() {
  const names = new Map();
  const file = join(build, "functions.txt");
  if (!existsSync(file)) return names;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const at = line.indexOf(":");
    if (at > 0) names.set(Number(line.slice(0, at)), line.slice(at + 1));
  }
  return names;
}

async function inspectorProfile() {
  const port = 9300 + Math.floor(Math.random() * 500);
  const worker = process.env.WORKER === "careful" ? careful : ours;
  const mf = new Miniflare({ ...(await seeded(worker)), inspectorPort: port });
  const url = await mf.ready;
  try {
    const targets = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
    const target = targets.find((t) => t.id === "core:user:" || t.title?.includes("core:user:")) ?? targets[0];
    const ws = new WebSocket(target.webSocketDebuggerUrl);
    await new Promise((ok, fail) => {
      ws.onopen = ok;
      ws.onerror = fail;
    });
    let id = 0;
    const pending = new Map();
    ws.onmessage = (m) => {
      const msg = JSON.parse(m.data);
      if (msg.id && pending.has(msg.id)) pending.get(msg.id)(msg);
    };
    const call = (method, params = {}) =>
      new Promise((ok) => {
        pending.set(++id, ok);
        ws.send(JSON.stringify({ id, method, params }));
      });
    await call("Profiler.enable");
    await call("Profiler.setSamplingInterval", { interval: 50 });
    await call("Profiler.start");
    const t0 = performance.now();
    const status = await get(url);
    const first = performance.now() - t0;
    const { result } = await call("Profiler.stop");
    ws.close();
    summarizeProfile(result.profile, status, first, worker.name);
  } finally {
    await mf.dispose();
  }
}

function summarizeProfile(profile, status, first, worker) {
  const names = functionNames();
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const nameOf = (node) => {
    const f = node.callFrame;
    const wasm = /^\$?(?:func|wasm-function\[)(\d+)/.exec(f.functionName) ?? /wasm-function\[(\d+)\]/.exec(f.url);
    if (wasm && names.has(Number(wasm[1]))) return `wasm: ${names.get(Number(wasm[1]))}`;
    const where = f.url ? ` (${f.url.split("/").pop()}:${f.lineNumber + 1})` : "";
    return `${f.functionName || "(anonymous)"}${where}`;
  };
  const self = new Map();
  const deltas = profile.timeDeltas;
  let total = 0;
  profile.samples.forEach((nodeId, i) => {
    const dt = (deltas[i + 1] ?? 0) / 1000;
    const name = nameOf(byId.get(nodeId));
    self.set(name, (self.get(name) ?? 0) + dt);
    total += dt;
  });
  console.log(`\n### First request, inspector CPU profile (${worker}, ${path === "/hot" ? "hot link" : "dynamic link"})`);
  console.log(`status ${status}, ${first.toFixed(1)} ms from the client; profile ${total.toFixed(2)} ms, by self time:\n`);
  // By kind: our wasm (each lazily compiled callee's Liftoff charged to its caller), JavaScript (with the native
  // calls it makes, such as a KV read's), V8's own entries ("(program)", "(garbage collector)"), and idle.
  const kinds = new Map();
  for (const [name, ms] of self) {
    const kind = name.startsWith("wasm: ")
      ? "wasm"
      : name === "(idle)"
        ? "idle"
        : name.startsWith("(")
          ? "V8"
          : name.startsWith("wasm-to-js") || name.startsWith("js-to-wasm")
            ? "wasm/JS transitions"
            : "JavaScript";
    kinds.set(kind, (kinds.get(kind) ?? 0) + ms);
  }
  console.log(`by kind: ${[...kinds].map(([k, ms]) => `${k} ${ms.toFixed(2)} ms`).join(", ")}\n`);
  console.log("| function | self, ms | share |");
  console.log("|---|---|---|");
  for (const [name, ms] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) {
    console.log(`| ${name.replaceAll("|", "\\|")} | ${ms.toFixed(2)} | ${((100 * ms) / total).toFixed(1)} % |`);
  }
}

// The bucket of one perf sample, from when it was taken (`when`: before the first request was sent, while it was
// answered, after its answer reached the client) and its stack (leaf first). Every thread's samples while the
// request is answered are the request's: a stack alone does not tell (the work after a KV read resumes from
// workerd's event loop, with no request handler below it).
function bucket(frames, when) {
  const has = (re) => frames.some((f) => re.test(f));
  const phase =
    when === "request"
      ? "first request"
      : when === "after"
        ? "after the answer"
        : has(/Server::makeWorkerImpl|Worker::Worker\b|Worker::Script::Script/)
          ? "worker start"
          : "workerd's own start";
  if (phase === "workerd's own start") {
    // Other threads (V8's background compile jobs, workerd's own) and the main thread's own start, by what runs.
    if (has(/wasm::/)) return `${phase}: wasm (background compile)`;
    if (has(/Parser::|PreParser|Scanner::|BackgroundCompileTask/)) return `${phase}: JS parse (background)`;
    if (has(/capnp::|kj::parse|Config/)) return `${phase}: configuration`;
    return `${phase}: other`;
  }
  let what = "other";
  if (has(/WasmCompileLazy|wasm::CompileLazy|TriggerTierUp|wasm::.*TierUp/)) what = "wasm lazy compile (Liftoff)";
  else if (has(/turboshaft|compiler::Pipeline|TurbofanCompilationJob/)) what = "optimizing compile";
  else if (has(/wasm::(Compile|ModuleDecoder|.*Validat|NativeModule|.*Decoder)|WasmModuleObject|SyncCompile/))
    what = "wasm module compile";
  else if (has(/InstantiateToInstanceObject|WasmInstanceObject|InstanceBuilder/)) what = "wasm instantiate";
  else if (has(/Parser::|PreParser|Scanner::|CompileToplevel|interpreter::BytecodeGenerator|Compiler::Compile/))
    what = "JS parse and compile";
  else if (has(/Heap::|Scavenge|MarkCompact|GCTracer/)) what = "GC";
  else if (/wasm-function|^JS:|Builtins_Wasm/.test(frames[0] ?? "")) what = "wasm and JS run";
  else if (has(/Builtins_|Execution::Call/)) what = "JS run (interpreter, builtins)";
  return `${phase}: ${what}`;
}

function perfProfile(worker) {
  const dir = mkdtempSync(join(work, "perf-"));
  const wrapper = join(dir, "workerd.sh");
  const workerd = execSync(`readlink -f ${join(root, "node_modules/.bin/workerd")}`).toString().trim();
  // CLOCK_MONOTONIC timestamps, the clock of Node's process.hrtime: samples are placed against the request's times.
  writeFileSync(wrapper, `#!/bin/sh\nexec perf record -q -k mono -F 20000 -g -o ${dir}/perf.$$.data -- ${workerd} "$@"\n`);
  chmodSync(wrapper, 0o755);
  return { dir, wrapper };
}

async function perfSample(worker) {
  const options = await seeded(worker);
  const { dir, wrapper } = perfProfile(worker);
  process.env.MINIFLARE_WORKERD_PATH = wrapper;
  const mf = new Miniflare(options);
  let perfPid;
  let sent;
  let answered;
  try {
    const url = await mf.ready;
    sent = process.hrtime.bigint();
    if ((await get(url)) !== 302) throw new Error(`${worker.name}: not a 302`);
    answered = process.hrtime.bigint();
    // What the worker does after its answer (ours: the group's record read in waitUntil) gets time to run.
    await new Promise((r) => setTimeout(r, 300));
    perfPid = execSync(`pgrep -P ${process.pid} -x perf || true`).toString().trim().split("\n")[0];
    // perf writes its file on SIGINT; Miniflare's dispose would SIGKILL it first.
    // perf's workload, workerd: perf leaves it running when it stops, and Miniflare only kills the process it
    // started (perf), so without this every sample left a workerd behind.
    const workerdPids = perfPid
      ? execSync(`pgrep -P ${perfPid} || true`).toString().trim().split("\n").filter(Boolean).map(Number)
      : [];
    if (perfPid) process.kill(Number(perfPid), "SIGINT");
    for (let i = 0; i < 100 && perfPid && existsSync(`/proc/${perfPid}`); i++) await new Promise((r) => setTimeout(r, 50));
    for (const pid of workerdPids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
  } finally {
    delete process.env.MINIFLARE_WORKERD_PATH;
    await mf.dispose();
  }
  const file = join(dir, `perf.${perfPid}.data`);
  const script = execFileSync("perf", ["script", "-i", file, "-F", "pid,tid,time,ip,sym"], {
    maxBuffer: 1 << 30,
    stdio: ["ignore", "pipe", "ignore"],
  }).toString();
  const counts = new Map();
  let total = 0;
  // Seconds with microseconds, as perf prints them, to nanoseconds as process.hrtime gives them.
  const ns = (seconds) => {
    const [whole, fraction = ""] = seconds.split(".");
    return BigInt(whole) * 1_000_000_000n + BigInt(fraction.padEnd(9, "0").slice(0, 9));
  };
  for (const sample of script.split(/\n\s*\n/)) {
    const lines = sample.split("\n").filter((l) => l.trim());
    const at = /^\s*(\d+)\/(\d+)\s+(\d+\.\d+):/.exec(lines[0] ?? "");
    if (!at) continue;
    const frames = lines.slice(1).map((l) => l.trim().replace(/^[0-9a-f]+\s+/, ""));
    if (!frames.length) continue;
    const t = ns(at[3]);
    const when = t < sent ? "before" : t <= answered ? "request" : "after";
    // Once the worker has started, V8's threads (wasm compile jobs, GC helpers) apart from the main thread's work.
    const thread = when !== "before" && at[1] !== at[2] ? " (other threads)" : "";
    const b = bucket(frames, when) + thread;
    // PERF_LEAVES=<text>: the functions most samples of the buckets named with that text stopped in, per worker.
    if (process.env.PERF_LEAVES && b.includes(process.env.PERF_LEAVES)) {
      const key = `${worker.name}\t${frames[0].replace(/\+0x[0-9a-f]+.*$/, "")}`;
      leaves.set(key, (leaves.get(key) ?? 0) + 1);
    }
    counts.set(b, (counts.get(b) ?? 0) + 1);
    total++;
  }
  counts.set("total", total);
  rmSync(dir, { recursive: true, force: true });
  return counts;
}

// PERF_LEAVES' counts: "<worker>\t<leaf function>" -> samples, over every run.
const leaves = new Map();

async function perfProfiles() {
  const results = new Map(); // worker -> [Map]
  for (let run = 0; run < perfRuns; run++) {
    for (const worker of [careful, ours]) {
      if (!results.has(worker.name)) results.set(worker.name, []);
      results.get(worker.name).push(await perfSample(worker));
      process.stderr.write(`bench-cold-profile: perf run ${run + 1} ${worker.name}\n`);
    }
  }
  const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  const keys = new Set();
  for (const runs of results.values()) for (const r of runs) for (const k of r.keys()) keys.add(k);
  const ms = (name, key) => median(results.get(name).map((r) => r.get(key) ?? 0)) / 20;
  console.log(`\n### CPU of workerd from exec to 300 ms after the first answer, perf at 20 kHz (medians of ${perfRuns} runs, ms)\n`);
  console.log("| bucket | careful JS | ours | ours − JS |");
  console.log("|---|---|---|---|");
  const sorted = [...keys].sort((a, b) => (a === "total" ? 1 : b === "total" ? -1 : a.localeCompare(b)));
  for (const key of sorted) {
    const a = ms("careful JS", key);
    const b = ms("ours", key);
    console.log(`| ${key} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(b - a).toFixed(1)} |`);
  }
  if (process.env.PERF_LEAVES) {
    console.log(`\nWhere the samples of "${process.env.PERF_LEAVES}" stopped (ms over all ${perfRuns} runs):\n`);
    console.log("| worker | function | ms |\n|---|---|---|");
    for (const [key, n] of [...leaves].sort((a, b) => b[1] - a[1]).slice(0, 30)) {
      const [name, leaf] = key.split("\t");
      console.log(`| ${name} | ${leaf.replaceAll("|", "\\|").slice(0, 120)} | ${(n / 20).toFixed(1)} |`);
    }
  }
}

// The size in bytes of each function body in a wasm module's code section, by function index (imports first,
// with no body: 0), read from the binary format's sections (type 2 imports, type 10 code).
function wasmBodySizes(bytes) {
  let at = 8;
  const leb = () => {
    let value = 0;
    let shift = 0;
    for (;;) {
      const byte = bytes[at++];
      value += (byte & 0x7f) * 2 ** shift;
      shift += 7;
      if (byte < 0x80) return value;
    }
  };
  const skipName = () => {
    const n = leb();
    at += n;
  };
  const sizes = [];
  while (at < bytes.length) {
    const id = bytes[at++];
    const size = leb();
    const end = at + size;
    if (id === 2) {
      for (let n = leb(); n > 0; n--) {
        skipName();
        skipName();
        const kind = bytes[at++];
        if (kind === 0) {
          leb(); // a function's type index
          sizes.push(0);
        } else if (kind === 1) {
          at++; // a table's element type, then its limits
          if (bytes[at++] & 1) leb();
          leb();
        } else if (kind === 2) {
          if (bytes[at++] & 1) leb(); // a memory's limits
          leb();
        } else if (kind === 3) {
          at += 2; // a global's value type and mutability
        } else if (kind === 4) {
          at++; // a tag's attribute, then its type index
          leb();
        }
      }
    } else if (id === 10) {
      for (let n = leb(); n > 0; n--) {
        const body = leb();
        sizes.push(body);
        at += body;
      }
    }
    at = end;
  }
  return sizes;
}

// The wasm functions in a perf map's lines from `from` on: [index, machine code bytes] in compile order.
function liftoffLines(text, from) {
  const out = [];
  for (const line of text.split("\n").slice(from)) {
    const m = /^\S+ ([0-9a-f]+) JS:wasm-function\[(\d+)\]/.exec(line);
    if (m) out.push([Number(m[2]), parseInt(m[1], 16)]);
  }
  return out;
}

// The bundle's JavaScript functions V8 compiled (to bytecode, lazily: on the first call) in the map's lines from
// `from` on, split where the wasm function `isBoundary` (by index) was compiled last: before it and after it. A
// function compiled when the isolate started (scripts/eager-first-visit.mjs) is not among them.
function bundleFunctions(text, from, isBoundary) {
  const lines = text.split("\n").slice(from);
  let boundary = -1;
  lines.forEach((line, i) => {
    const m = /JS:wasm-function\[(\d+)\]/.exec(line);
    if (m && isBoundary(Number(m[1]))) boundary = i;
  });
  const js = [];
  lines.forEach((line, i) => {
    // `JS:~<name> <file>:<line>:<column>`; the bundle is the only script named index.js in the process.
    const m = /^\S+ [0-9a-f]+ JS:~(.*?) ?(?:\S*\/)?index\.js:(\d+:\d+)$/.exec(line);
    if (m) js.push({ name: m[1] || "(anonymous)", at: m[2], before: boundary < 0 || i <= boundary });
  });
  return js;
}

async function flushes() {
  // The workerd binary Miniflare runs (the `workerd` package, a CommonJS module: its export is under `default`).
  const workerd = (await import("workerd")).default.default;
  const log = join(work, "gdb.log");
  const commands = join(work, "gdb-commands");
  // `args`: printf's arguments after the format (x86-64: a method's second argument is in esi).
  const event = (symbol, text, { backtrace = "", args = "" } = {}) =>
    `break ${symbol}\ncommands\nsilent\nprintf "EVENT ${text}\\n"${args}\n${backtrace}continue\nend\n`;
  writeFileSync(
    commands,
    "set pagination off\nset confirm off\n" +
      ["SIGPIPE", "SIGUSR1", "SIGUSR2", "SIG34", "SIG35"].map((s) => `handle ${s} nostop noprint pass\n`).join("") +
      event("v8::internal::Heap::MemoryPressureNotification", "memory pressure notification, level %d (1 moderate, 2 critical)", {
        args: ", $esi",
        backtrace: "bt 3\n",
      }) +
      event("v8::internal::wasm::WasmEngine::FlushLiftoffCode", "V8 flushes the Liftoff code of every isolate in the process", {
        backtrace: "bt 2\n",
      }) +
      event("v8::internal::wasm::WasmEngine::SyncCompile", "a wasm module compiled") +
      event("v8::internal::wasm::WasmEngine::SyncInstantiate", "a wasm module instantiated") +
      event("v8::internal::wasm::WasmEngine::AsyncCompile", "a wasm module compiled (async)") +
      "run\n",
  );
  const wrapper = join(work, "workerd-under-gdb");
  writeFileSync(wrapper, `#!/bin/sh\nexec gdb -batch -x '${commands}' --args '${workerd}' "$@" >>'${log}' 2>&1\n`);
  chmodSync(wrapper, 0o755);
  // One entry per event, with its callers (" <- "), in order.
  const events = () => {
    const entries = [];
    const lines = existsSync(log) ? readFileSync(log, "utf8").split("\n") : [];
    for (const line of lines) {
      // A flush that a notification led to is told in the notification's entry.
      if (line.startsWith("EVENT V8 flushes") && entries.at(-1)?.startsWith("memory pressure")) {
        entries[entries.length - 1] += `; then ${line.slice(6)}`;
      } else if (line.startsWith("EVENT ")) entries.push(line.slice(6));
      else if (/^#[12] /.test(line) && entries.length) {
        entries[entries.length - 1] += ` <- ${line.replace(/^#\d+\s+0x[0-9a-f]+ in /, "").replace(/\(.*$/, "")}`;
      }
    }
    return entries;
  };
  // Markdown list items, runs of the same entry counted.
  const listed = (entries) => {
    const runs = [];
    for (const e of entries) {
      if (runs.length && runs[runs.length - 1][0] === e) runs[runs.length - 1][1]++;
      else runs.push([e, 1]);
    }
    return runs.length ? runs.map(([e, n]) => `- ${e}${n > 1 ? ` (${n} times in a row)` : ""}`) : ["- (none)"];
  };
  // Seeded first, so that the seeding Miniflare's workerd runs without gdb.
  const options = await seeded(ours);
  process.env.MINIFLARE_WORKERD_PATH = wrapper;
  const mf = new Miniflare(options);
  try {
    const url = await mf.ready;
    await new Promise((r) => setTimeout(r, 500));
    const atReady = events().length;
    const status = await get(url);
    await new Promise((r) => setTimeout(r, 500));
    const all = events();
    console.log(`\n### V8's wasm events in ours' workerd (${path === "/hot" ? "hot link" : "dynamic link"}, status ${status})\n`);
    console.log(`Until the worker was ready:\n\n${listed(all.slice(0, atReady)).join("\n")}\n`);
    console.log(`From then until 500 ms after the first answer:\n\n${listed(all.slice(atReady)).join("\n")}`);
  } finally {
    delete process.env.MINIFLARE_WORKERD_PATH;
    await mf.dispose();
  }
}

async function compiledFunctions() {
  const names = functionNames();
  const sizes = wasmBodySizes(readFileSync(join(build, "index_bg.wasm")));
  const codeBytes = sizes.reduce((a, b) => a + b, 0);
  // Every workerd process writes /tmp/perf-<pid>.map; ours is the new one naming our wasm functions.
  const maps = () =>
    readdirSync("/tmp")
      .filter((f) => /^perf-\d+\.map$/.test(f))
      .map((f) => join("/tmp", f));
  const options = await seeded(ours);
  const earlier = new Set(maps());
  const mf = new Miniflare(options);
  const url = await mf.ready;
  try {
    const ourMap = maps().find((f) => !earlier.has(f) && readFileSync(f, "utf8").includes("JS:wasm-function["));
    if (!ourMap) throw new Error("no perf map names a wasm function: did workerd get --perf-basic-prof?");
    const start = readFileSync(ourMap, "utf8").split("\n").length - 1;
    const status = await get(url);
    // What the worker does after the response, in waitUntil, follows the entry module's call of `first_after`
    // (edge-worker/js/entry.js, `firstVisit`): its shim, compiled on that call, is the boundary.
    await new Promise((r) => setTimeout(r, 500));
    // A second request, as a visitor's next one: what it compiles is listed with the rest in COMPILED_LIST.
    if (process.env.COMPILED_LIST) await get(url);
    await new Promise((r) => setTimeout(r, process.env.COMPILED_LIST ? 300 : 0));
    const compiled = liftoffLines(readFileSync(ourMap, "utf8"), start);
    if (process.env.COMPILED_LIST) {
      // Every function compiled in our isolate, its start included, one index a line (appended).
      const all = liftoffLines(readFileSync(ourMap, "utf8"), 0).map(([index]) => index);
      appendFileSync(process.env.COMPILED_LIST, all.join("\n") + "\n");
    }
    let boundary = compiled.findIndex(([index]) => names.get(index)?.startsWith("first_after"));
    // The shim is compiled first, then the export's body when binaryen left it out of the shim: both run before the
    // response (until 2026-12-03 the body counted as after it).
    while (boundary >= 0 && names.get(compiled[boundary + 1]?.[0])?.startsWith("first_after")) boundary++;
    const before = boundary < 0 ? compiled : compiled.slice(0, boundary + 1);
    const after = boundary < 0 ? [] : compiled.slice(boundary + 1);
    const sum = (fs) => fs.reduce((a, [index]) => a + (sizes[index] ?? 0), 0);
    const label = path === "/hot" ? "hot link" : "dynamic link";
    console.log(`\n### wasm functions compiled for the first request (ours, ${label}, status ${status})`);
    console.log(`${build}: code section ${codeBytes} bytes in ${sizes.filter(Boolean).length} functions\n`);
    console.log("| | functions | wasm bytes | machine code bytes |");
    console.log("|---|---|---|---|");
    for (const [name, fs] of [["before the response", before], ["after it (waitUntil)", after]]) {
      console.log(`| ${name} | ${fs.length} | ${sum(fs)} | ${fs.reduce((a, [, m]) => a + m, 0)} |`);
    }
    const isFirstAfter = (index) => names.get(index)?.startsWith("first_after");
    const js = bundleFunctions(readFileSync(ourMap, "utf8"), start, isFirstAfter);
    const jsBefore = js.filter((f) => f.before);
    const named = jsBefore.length ? ` (${jsBefore.map((f) => `${f.name} at ${f.at}`).join(", ")})` : "";
    console.log(
      `\nJavaScript functions of the bundle compiled on the first request: ${jsBefore.length} before the response` +
        `${named}, ${js.length - jsBefore.length} after it.`,
    );
    console.log("\nLargest compiled before the response:\n\n| index | wasm bytes | function |\n|---|---|---|");
    for (const [index] of [...before].sort((a, b) => (sizes[b[0]] ?? 0) - (sizes[a[0]] ?? 0)).slice(0, Number(process.env.COMPILED_TOP ?? 25))) {
      console.log(`| ${index} | ${sizes[index]} | ${(names.get(index) ?? "?").replaceAll("|", "\\|").slice(0, 120)} |`);
    }
  } finally {
    await mf.dispose();
    for (const f of maps()) if (!earlier.has(f)) rmSync(f, { force: true });
  }
}

try {
  for (const mode of modes) {
    if (mode === "inspector") await inspectorProfile();
    else if (mode === "perf") await perfProfiles();
    else if (mode === "compiled") await compiledFunctions();
    else if (mode === "flushes") await flushes();
    else throw new Error(`unknown mode ${mode}`);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
