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

export class KeptAnswers {
  constructor(maxBytes = MAX_ANSWERS_BYTES, maxAnswers = MAX_ANSWERS) {
    this.map = new Map();
    this.bytes = 0;
    this.maxBytes = maxBytes;
    this.maxAnswers = maxAnswers;
  }

  // The kept { init, until, bytes } for `key`, or undefined. The hot path: one Map lookup.
  get(key) {
    return this.map.get(key);
  }

  delete(key) {
    const kept = this.map.get(key);
    if (kept === undefined) return;
    this.map.delete(key);
    this.bytes -= kept.bytes;
  }

  // Keeps `init` as the answer to `key` until `until` (UNIX ms), charged `bytes`, evicting the oldest answers
  // until it fits. An answer larger than the whole budget is not kept (it would evict everything for itself).
  set(key, init, until, bytes) {
    this.delete(key);
    if (bytes > this.maxBytes) return false;
    while (this.map.size > 0 && (this.map.size >= this.maxAnswers || this.bytes + bytes > this.maxBytes)) {
      this.delete(this.map.keys().next().value);
    }
    this.map.set(key, { init, until, bytes });
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
