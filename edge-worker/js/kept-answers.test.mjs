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
  answerBytes,
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
