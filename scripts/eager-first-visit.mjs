// Has V8 compile, when a new isolate starts, the JavaScript glue that a first visit runs, rather than on that visit.
// V8 compiles a function lazily, on its first call, unless the function expression is wrapped in parentheses
// (`(function …)`), which its parser takes as a sign that the function runs at once: it is compiled with the script.
// A new isolate's first visit called about forty functions of wasm-bindgen's glue (index.js: the exports' wrappers,
// the string and externref helpers, a shim per import the wasm calls) and of the entry module; compiled lazily, they
// took about 0.5 ms of that visit (BENCHMARKS.md, "Cold start, issue 28": V8's function events, perf, and the
// latency paired by round). Compiled with the script, they cost the isolate's start instead (where they replace
// the preparse of the same functions), which Cloudflare runs while the visitor's TLS handshake is still under way.
// esbuild keeps such parentheses in the bundle. The entry module's own functions are written so
// (edge-worker/js/entry.js), and so are the fast path's imports (edge-worker/src/shell/fast.rs).
//
// Only the functions in the lists below: each costs the start its compilation, used or not, and most of the glue
// (the full path's imports, the queue's, the sync route's) is not used by a first visit. The lists are what a first
// visit to a persistent and to a dynamic link runs, read from a build with every function made eager
// (EAGER_FIRST_VISIT=all) and V8's function events; `node scripts/bench-cold-profile.mjs compiled` lists the
// bundle's functions a first visit still compiles. A listed name that index.js no longer has, or has in a shape
// this does not recognise, fails the build, so that the lists follow the glue. Imports are named as wasm-bindgen
// names them (`__wbg_<name>_<hash>`) without the hash, so one name may choose several (a new import of a listed
// name is chosen too); a cast by what it casts.
//
// Run by scripts/esbuild-edge-entry.sh in worker-build's staging directory, on wasm-bindgen's ./index.js, before
// the bundle: a top-level function chosen becomes `const NAME = (function NAME(…) {…});` (exported as before), an
// import chosen `KEY: (function(…) {…}),`. wasm-bindgen writes each at column 0 (an import at 8 spaces), closed by
// the first `}` at the same indentation; anything else is left as it is.
//
// Usage: node eager-first-visit.mjs INDEX_JS      (rewritten in place)
import { readFileSync, realpathSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

// wasm-bindgen's top-level functions a first visit runs: the wrappers of the exports it calls, and their helpers.
export const TOP_LEVEL = [
  "fetch",
  "first_store",
  "first_fetch",
  "first_after",
  "answer_until",
  "__wbg_call_guard",
  "addToExternrefTable0",
  "takeFromExternrefTable0",
  "getStringFromWasm0",
  "getArrayU8FromWasm0",
  "getUint8ArrayMemory0",
  "getDataViewMemory0",
  "getInt32ArrayMemory0",
  "decodeText",
  "isLikeNone",
  "passStringToWasm0",
  "passArray8ToWasm0",
];

// The imports a first visit calls.
export const IMPORTS = [
  "visit_line",
  "redirect_response",
  "env_string",
  "now",
  "new_from_slice",
  "__wbindgen_is_undefined",
  "__wbindgen_is_string",
  "cast Ref(String) -> Externref",
];

/**
 * `source` (wasm-bindgen's index.js) with the functions named in `topLevel` and `imports` in parentheses (`all`:
 * every one it recognises). Returns the new text, how many functions it changed, the listed names it did not find,
 * and those it found in a shape it does not recognise (left as they were).
 */
export function makeEager(source, { topLevel = TOP_LEVEL, imports = IMPORTS, all = false } = {}) {
  const lines = source.split("\n");
  // Per list: the names it asks for, those changed, and those met in a shape not recognised.
  const lists = [topLevel, imports].map((names) => ({ names, want: new Set(names), made: new Set(), odd: new Set() }));
  let made = 0;
  // The line that closes the block opened on line `from` at `indent`: the first line that is `indent` + `end`,
  // every line between indented further (or empty). -1 when the shape is not that.
  const closing = (from, indent, end) => {
    for (let i = from + 1; i < lines.length; i++) {
      if (lines[i].trimEnd() === indent + end) return i;
      if (lines[i].length > 0 && !lines[i].startsWith(indent + " ")) return -1;
    }
    return -1;
  };
  // Line `i` opens `name`'s block at `indent`, closed by `indent` + `end`: the two become `opening` and `closed`,
  // if the list wants it.
  const wrap = (list, name, i, indent, end, opening, closed) => {
    if (!all && !list.want.has(name)) return;
    const close = closing(i, indent, end);
    if (close < 0) {
      list.odd.add(name);
      return;
    }
    list.made.add(name);
    lines[i] = opening;
    lines[close] = closed;
    made++;
  };
  for (let i = 0; i < lines.length; i++) {
    const top = /^(export )?function (\w+) ?\((.*)\) \{$/.exec(lines[i]);
    if (top) {
      const [, exported = "", name, params] = top;
      wrap(lists[0], name, i, "", "}", `${exported}const ${name} = (function ${name}(${params}) {`, "});");
      continue;
    }
    const shim = /^ {8}(__wbg_(\w+)_[0-9a-f]{16}|__wbindgen_\w+): function\((.*)\) \{$/.exec(lines[i]);
    if (shim) {
      const [, key, named, params] = shim;
      // A cast's import is named by a number (`__wbindgen_generic_0000000000000004`); its first line says which.
      const cast = /^ {12}\/\/ Cast intrinsic for `(.*)`\.$/.exec(lines[i + 1] ?? "");
      const name = cast ? `cast ${cast[1]}` : (named ?? key);
      wrap(lists[1], name, i, " ".repeat(8), "},", `        ${key}: (function(${params}) {`, "        }),");
    }
  }
  // The listed names left as they were: not found, or found in a shape not recognised.
  const left = (odd) =>
    all ? [] : lists.flatMap((l) => l.names.filter((n) => !l.made.has(n) && l.odd.has(n) === odd));
  return { text: lines.join("\n"), made, missing: left(false), unrecognised: left(true) };
}

// Run as a command (by its real path: Node resolves symbolic links in `import.meta.url`, not in `argv`).
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  const [indexPath] = process.argv.slice(2);
  if (!indexPath) {
    console.error("usage: node eager-first-visit.mjs INDEX_JS");
    process.exit(2);
  }
  const { text, made, missing, unrecognised } = makeEager(readFileSync(indexPath, "utf8"), {
    all: process.env.EAGER_FIRST_VISIT === "all",
  });
  if (missing.length > 0 || unrecognised.length > 0) {
    if (missing.length > 0) console.error(`eager-first-visit: not in wasm-bindgen's index.js: ${missing.join(", ")}`);
    if (unrecognised.length > 0) {
      console.error(`eager-first-visit: in index.js, in a shape not recognised: ${unrecognised.join(", ")}`);
    }
    console.error("eager-first-visit: update scripts/eager-first-visit.mjs (its lists, or its reading of the glue)");
    process.exit(1);
  }
  writeFileSync(indexPath, text);
  console.error(`eager-first-visit: ${made} functions compiled with the script`);
}
