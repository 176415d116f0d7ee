// The entry module's kept answers stay within their bounds (./kept-answers.mjs): filled far past its byte budget
// with answers of the largest kind, the map keeps the newest within the budget.
//
//   node_modules/.bin/node --test edge-worker/js/kept-answers.test.mjs
//
// (tests/tests/entry_module.rs runs it as part of `cargo test -p e2e`.)
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  ANSWER_OVERHEAD_BYTES,
  KeptAnswers,
  MAX_ANSWERS,
  MAX_ANSWERS_BYTES,
  MAX_FACTS_LENGTH,
  VARY_COUNTRY,
  VARY_LANGUAGE,
  VARY_USER_AGENT,
  answerBytes,
  visitorFacts,
} from "./kept-answers.mjs";

// The headers of a redirect as src/reply.rs makes them, to `location`.
function redirectHeaders(location) {
  return new Headers({
    location,
    "cache-control": "private, no-store, max-age=0",
    "referrer-policy": "strict-origin-when-cross-origin",
  });
}

// The largest answer the entry module keeps: a 4,096-character URL, a long Host, a 2,048-character Location.
function largest(i) {
  const url = `https://go.example.com/e/${i}?signature=${"x".repeat(4096)}`.slice(0, 4096);
  const key = url + "\n" + "h".repeat(253);
  const headers = redirectHeaders(`https://dest.example/${i}/${"d".repeat(2048)}`.slice(0, 2048));
  return { key, headers, bytes: answerBytes(key, headers) };
}

test("filled past its byte budget, it keeps the newest within the budget", () => {
  const answers = new KeptAnswers();
  const until = Date.now() + 60_000;
  const n = MAX_ANSWERS; // as many as the old bound allowed: 1,024 of the largest were about 24 MB
  const charged = [];
  for (let i = 0; i < n; i++) {
    const { key, headers, bytes } = largest(i);
    assert.ok(bytes > 12_000 && bytes < 24_000, `${bytes} bytes`);
    assert.equal(answers.set(key, { status: 302, headers }, until, bytes), true);
    assert.ok(answers.bytes <= MAX_ANSWERS_BYTES, `after ${i}: ${answers.bytes}`);
    charged.push(bytes);
  }
  const total = charged.reduce((a, b) => a + b, 0);
  assert.ok(total > 3 * MAX_ANSWERS_BYTES, `filled with ${total} bytes`);
  const kept = answers.size;
  assert.ok(kept < n && kept > 100, `${kept} kept`);
  // The newest are kept, the oldest went first; the accounting is exact.
  for (let i = n - kept; i < n; i++) assert.ok(answers.get(largest(i).key), `answer ${i} kept`);
  assert.equal(answers.get(largest(0).key), undefined);
  assert.equal(answers.get(largest(n - kept - 1).key), undefined);
  assert.equal(answers.bytes, charged.slice(n - kept).reduce((a, b) => a + b, 0));
  answers.clear();
  assert.equal(answers.size, 0);
  assert.equal(answers.bytes, 0);
});

test("small answers are bounded in number", () => {
  const answers = new KeptAnswers();
  for (let i = 0; i < 3 * MAX_ANSWERS; i++) {
    const key = `https://go.example.com/c${i}\ngo.example.com`;
    const headers = redirectHeaders(`https://dest.example/${i}`);
    answers.set(key, { status: 302, headers }, Date.now() + 1000, answerBytes(key, headers));
  }
  assert.equal(answers.size, MAX_ANSWERS);
  assert.ok(answers.get(`https://go.example.com/c${3 * MAX_ANSWERS - 1}\ngo.example.com`));
  assert.equal(answers.get("https://go.example.com/c0\ngo.example.com"), undefined);
});

test("replacing, deleting and an answer larger than the budget", () => {
  const answers = new KeptAnswers(10_000, 100);
  assert.equal(answers.set("a", {}, 1, 4_000), true);
  assert.equal(answers.set("a", {}, 2, 3_000), true);
  assert.equal(answers.bytes, 3_000);
  assert.equal(answers.get("a").until, 2);
  assert.equal(answers.set("huge", {}, 1, 20_000), false);
  assert.equal(answers.get("a").until, 2, "nothing evicted for it");
  answers.set("b", {}, 1, 4_000);
  answers.set("c", {}, 1, 4_000);
  assert.equal(answers.get("a"), undefined, "the oldest went");
  assert.equal(answers.bytes, 8_000);
  answers.delete("b");
  answers.delete("b");
  assert.equal(answers.bytes, 4_000);
});

test("the estimate counts the key and every header", () => {
  const headers = redirectHeaders("https://dest.example/");
  let chars = 0;
  for (const [name, value] of headers) chars += name.length + value.length;
  assert.equal(answerBytes("key", headers), 2 * (3 + chars) + ANSWER_OVERHEAD_BYTES);
});

// A request as the entry module sees one: its headers and, on Cloudflare, `cf`.
function request(headers, cf) {
  return { headers: new Headers(headers), cf };
}

test("a smart link's answers are kept under the facts its rules read, never given to another visitor", () => {
  const answers = new KeptAnswers();
  const now = Date.now();
  const until = now + 60_000;
  const key = "https://go.example.com/smart\ngo.example.com";
  const iphone = request({ "user-agent": "iPhone", "accept-language": "de" }, { country: "DE" });
  const pixel = request({ "user-agent": "Pixel", "accept-language": "de" }, { country: "DE" });
  const vary = VARY_USER_AGENT | VARY_COUNTRY;
  const kept = (location) => ({ status: 302, headers: redirectHeaders(location) });
  assert.equal(answers.keep(key, iphone, kept("https://apps.apple.com/"), redirectHeaders("a"), until, vary), true);
  assert.equal(answers.answer(key, iphone, now).init.headers.get("location"), "https://apps.apple.com/");
  assert.equal(answers.answer(key, pixel, now), undefined, "another User-Agent is not the same visitor");
  // The language is not one of the facts: the same User-Agent and country with another language share the answer.
  const iphoneEn = request({ "user-agent": "iPhone", "accept-language": "en" }, { country: "DE" });
  assert.equal(answers.answer(key, iphoneEn, now).init.headers.get("location"), "https://apps.apple.com/");
  // The country from cf or from the header, each its own fact.
  const iphoneUs = request({ "user-agent": "iPhone" }, { country: "US" });
  const iphoneHeaderDe = request({ "user-agent": "iPhone", "cf-ipcountry": "DE" }, undefined);
  assert.equal(answers.answer(key, iphoneUs, now), undefined);
  assert.equal(answers.answer(key, iphoneHeaderDe, now), undefined);
  answers.keep(key, pixel, kept("https://play.google.com/"), redirectHeaders("p"), until, vary);
  assert.equal(answers.answer(key, pixel, now).init.headers.get("location"), "https://play.google.com/");
  assert.equal(answers.answer(key, iphone, now).init.headers.get("location"), "https://apps.apple.com/");
  // Until its instant only, marker and answer alike.
  assert.equal(answers.answer(key, iphone, until), undefined);
  assert.equal(answers.get(key), undefined, "the expired marker is gone");
  // Facts too long are neither kept nor looked up.
  const long = request({ "user-agent": "x".repeat(MAX_FACTS_LENGTH + 1) }, undefined);
  assert.equal(answers.keep(key, long, kept("https://x.example/"), redirectHeaders("x"), until, VARY_USER_AGENT), false);
  // A plain link's answer is one entry under its key, whoever asks.
  const plain = "https://go.example.com/plain\ngo.example.com";
  answers.keep(plain, iphone, kept("https://dest.example/"), redirectHeaders("d"), until, 0);
  assert.equal(answers.answer(plain, pixel, now).init.headers.get("location"), "https://dest.example/");
});

test("visitor facts: only those named, each in its place", () => {
  const r = request({ "user-agent": "UA", "accept-language": "fr", "cf-ipcountry": "FR" }, { country: "BE" });
  assert.equal(visitorFacts(r, VARY_USER_AGENT), "\nUA");
  assert.equal(visitorFacts(r, VARY_COUNTRY), "\nBE\nFR");
  assert.equal(visitorFacts(r, VARY_LANGUAGE), "\nfr");
  assert.equal(visitorFacts(r, VARY_USER_AGENT | VARY_COUNTRY | VARY_LANGUAGE), "\nUA\nBE\nFR\nfr");
  assert.equal(visitorFacts(request({}, undefined), VARY_USER_AGENT | VARY_COUNTRY), "\n\n\n");
});
