// The entry module's kept answers (edge-worker/js/entry.js says what they are): request key -> the redirect's
// init and the instant until which it stays the answer. A module of its own so that its bounds are tested under
// Node (edge-worker/js/kept-answers.test.mjs); scripts/esbuild-edge-entry.sh bundles it with the entry.
//
// Bounded in bytes, not only in entries: a kept answer holds its key (a URL of up to MAX_KEPT_URL_LENGTH
// characters and the Host header) and a copy of the redirect's headers (a Location of up to a few thousand
// characters), up to about 24 KB each, and the isolate has 128 MB for everything. Past either bound the oldest
// answers go (a Map iterates in insertion order): an answer evicted costs one call into wasm the next time.

// At most this many answers…
export const MAX_ANSWERS = 1024;
// …holding at most this many bytes (estimated: answerBytes).
export const MAX_ANSWERS_BYTES = 4 * 1024 * 1024;
// What an answer costs besides its texts: the Map's entry, the kept object, the init and its Headers. An estimate,
// on the high side.
export const ANSWER_OVERHEAD_BYTES = 512;

// The estimated bytes of an answer kept under `key` with `headers` (a Headers): two bytes a character (V8 keeps
// a string with any non-Latin-1 character in two bytes a character), for the key and each header's name and value.
export function answerBytes(key, headers) {
  let chars = key.length;
  for (const [name, value] of headers) chars += name.length + value.length;
  return 2 * chars + ANSWER_OVERHEAD_BYTES;
}

// The visitor facts a smart link's answer may depend on besides its URL: answer_vary's bits (smart::VARY_* in
// src/smart.rs): the User-Agent (a rule on the device or the system), the country (request.cf.country, else the
// CF-IPCountry header, as the Rust side reads it), Accept-Language.
export const VARY_USER_AGENT = 1;
export const VARY_COUNTRY = 2;
export const VARY_LANGUAGE = 4;
// Longest facts an answer is kept under: real ones are a few hundred characters; a request with longer ones is
// answered, just not from (or into) the kept answers.
export const MAX_FACTS_LENGTH = 2048;

// The suffix of a kept answer's key for the `vary` facts of `request` (each after a line break: no header value
// holds one, and the set of facts is the same for every answer of one link), or undefined when they are too long
// to keep. Absent and empty read the same, as they do for the Rust side.
export function visitorFacts(request, vary) {
  const headers = request.headers;
  let facts = "";
  if (vary & VARY_USER_AGENT) facts += "\n" + (headers.get("user-agent") ?? "");
  if (vary & VARY_COUNTRY) {
    const cf = request.cf;
    facts += "\n" + ((cf && cf.country) || "") + "\n" + (headers.get("cf-ipcountry") ?? "");
  }
  if (vary & VARY_LANGUAGE) facts += "\n" + (headers.get("accept-language") ?? "");
  return facts.length > MAX_FACTS_LENGTH ? undefined : facts;
}

export class KeptAnswers {
  constructor(maxBytes = MAX_ANSWERS_BYTES, maxAnswers = MAX_ANSWERS) {
    this.map = new Map();
    this.bytes = 0;
    this.maxBytes = maxBytes;
    this.maxAnswers = maxAnswers;
  }

  // The kept { init, until, bytes, vary } for `key`, or undefined. The hot path: one Map lookup.
  get(key) {
    return this.map.get(key);
  }

  // The answer kept for `request` under `key` (its URL and Host) that is still valid at `now`, or undefined. A
  // smart link's answers depend on visitor facts too: under `key` alone is then only a marker naming them (`vary`,
  // no init), and each answer is under `key` and the request's facts, so one visitor never gets another's.
  answer(key, request, now) {
    let kept = this.map.get(key);
    if (kept !== undefined && kept.vary !== 0 && now < kept.until) {
      const facts = visitorFacts(request, kept.vary);
      if (facts === undefined) return undefined;
      key += facts;
      kept = this.map.get(key);
    }
    if (kept === undefined) return undefined;
    if (now < kept.until) return kept;
    this.delete(key);
    return undefined;
  }

  // Keeps the redirect `init` (its `headers` a Headers) as the answer to `request` under `key` until `until`,
  // under the `vary` facts too when the answer depends on them (with the marker that names them under `key`).
  keep(key, request, init, headers, until, vary) {
    if (vary !== 0) {
      const facts = visitorFacts(request, vary);
      if (facts === undefined) return false;
      this.set(key, null, until, 2 * key.length + ANSWER_OVERHEAD_BYTES, vary);
      key += facts;
    }
    return this.set(key, init, until, answerBytes(key, headers));
  }

  delete(key) {
    const kept = this.map.get(key);
    if (kept === undefined) return;
    this.map.delete(key);
    this.bytes -= kept.bytes;
  }

  // Keeps `init` as the answer to `key` until `until` (UNIX ms), charged `bytes`, evicting the oldest answers
  // until it fits. An answer larger than the whole budget is not kept (it would evict everything for itself).
  // `vary` is non-zero for a smart link's marker (answer, keep).
  set(key, init, until, bytes, vary = 0) {
    this.delete(key);
    if (bytes > this.maxBytes) return false;
    while (this.map.size > 0 && (this.map.size >= this.maxAnswers || this.bytes + bytes > this.maxBytes)) {
      this.delete(this.map.keys().next().value);
    }
    this.map.set(key, { init, until, bytes, vary });
    this.bytes += bytes;
    return true;
  }

  clear() {
    this.map.clear();
    this.bytes = 0;
  }

  get size() {
    return this.map.size;
  }
}
