// What verifying a link password costs in workerd (issue 25: "≤ 10 ms CPU per attempt, which decides the hash's
// parameters"): PBKDF2-HMAC-SHA256 through WebCrypto (`crypto.subtle.deriveBits`, native code in workerd, as the
// worker will call it) at several iteration counts, interleaved, each request deriving once from a 16-byte salt
// and a 12-character password. Local workerd has no CPU-time counter a request can read (its clock stands still
// while JavaScript runs), so the cost is the request's latency over the same request at 1 iteration: on an idle
// machine a derivation is all CPU, so that difference is its CPU time.
//
// Usage: node scripts/bench-password-verify.mjs   (ROUNDS, default 15; ITERATIONS, default "1 10000 25000 50000
//        100000"; workerd refuses counts above 100,000)
import { request } from "node:http";
import { Log, LogLevel, Miniflare } from "miniflare";

const rounds = Number(process.env.ROUNDS ?? 15);
const counts = (process.env.ITERATIONS ?? "1 10000 25000 50000 100000").split(/\s+/).filter(Boolean).map(Number);

const script = `
export default {
  async fetch(request) {
    const iterations = Number(new URL(request.url).searchParams.get("n"));
    const password = new TextEncoder().encode("correct-horse");
    const salt = new Uint8Array(16).fill(7);
    const key = await crypto.subtle.importKey("raw", password, "PBKDF2", false, ["deriveBits"]);
    const bits = await crypto.subtle.deriveBits({ name: "PBKDF2", hash: "SHA-256", salt, iterations }, key, 256);
    return new Response(String(new Uint8Array(bits)[0]));
  },
};`;

const mf = new Miniflare({
  modules: true,
  script,
  host: "127.0.0.1",
  port: 0,
  cf: { colo: "LCL", httpProtocol: "HTTP/1.1" },
  log: new Log(LogLevel.WARN),
});
const url = await mf.ready;

function get(n) {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    request(new URL(`/?n=${n}`, url), (res) => {
      res.resume();
      res.on("end", () => resolve(Number(process.hrtime.bigint() - start) / 1e6));
    })
      .on("error", reject)
      .end();
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// Warm the isolate and WebCrypto's paths first.
for (const n of counts) await get(n);
const samples = Object.fromEntries(counts.map((n) => [n, []]));
for (let r = 0; r < rounds; r++) {
  for (const n of counts) samples[n].push(await get(n));
}
await mf.dispose();

const base = median(samples[counts[0]]);
console.log(`| iterations | latency p50, ms | over ${counts[0]} iteration(s), ms | µs per 1,000 iterations |`);
console.log("|---|---|---|---|");
for (const n of counts) {
  const m = median(samples[n]);
  const over = m - base;
  const per = n > counts[0] ? (over * 1000) / ((n - counts[0]) / 1000) : 0;
  console.log(`| ${n.toLocaleString("en")} | ${m.toFixed(2)} | ${over.toFixed(2)} | ${per.toFixed(1)} |`);
}
console.log(`\n${rounds} rounds, interleaved, ${new Date().toISOString()}`);
