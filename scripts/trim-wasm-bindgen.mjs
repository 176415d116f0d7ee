// Leaves out of the edge worker's bundle the classes wasm-bindgen generates for workers-rs types this worker never
// hands to JavaScript, and their code in the wasm. workers-rs exports several `#[wasm_bindgen]` types whatever the
// worker uses (a container's startup options, an R2 range, and the stream adapters of wasm-streams): each is a class
// of its own in index.js, with a FinalizationRegistry, and a dozen wasm exports that keep their Rust code alive.
// A new isolate parses all of it (and Miniflare parses the bundle again before workerd starts): BENCHMARKS.md,
// "Cold start".
//
// A class is left out when nothing else in index.js names it (a class the Rust side creates, such as one an import
// wraps with `X.__wrap`, is named by that import, and stays) and the entry module (`edge-worker/js/entry.js`)
// does not import it. The wasm exports only its methods used are then removed with binaryen's wasm-opt
// (--remove-exports, --remove-unused-module-elements), which also drops the code only they reached. Run by scripts/esbuild-edge-entry.sh in worker-build's staging directory,
// before the bundle, on wasm-bindgen's ./index.js and ./index_bg.wasm.
//
// Usage: node trim-wasm-bindgen.mjs INDEX_JS WASM ENTRY_JS      (WASM_OPT_BIN: binaryen's wasm-opt)
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";

const [indexPath, wasmPath, entryPath] = process.argv.slice(2);
const wasmOpt = process.env.WASM_OPT_BIN ?? "wasm-opt";
const lines = readFileSync(indexPath, "utf8").split("\n");
const entry = readFileSync(entryPath, "utf8");

// Top-level class blocks: `class X {` or `export class X {` at column 0, to the first `}` at column 0.
const classes = [];
for (let i = 0; i < lines.length; i++) {
  const m = /^(?:export )?class (\w+) \{$/.exec(lines[i]);
  if (!m) continue;
  let end = i + 1;
  while (end < lines.length && lines[end] !== "}") end++;
  if (end === lines.length) throw new Error(`trim-wasm-bindgen: class ${m[1]} has no end`);
  classes.push({ name: m[1], from: i, to: end });
}

// The statements that belong to class X besides its block: its registry and its `Symbol.dispose` line.
function ownLines(name) {
  const own = new Set();
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].startsWith(`const ${name}Finalization = `)) {
      // The statement ends at the first line ending in `;` that is not indented (inner lines are).
      let j = i;
      while (!(lines[j].trimEnd().endsWith(";") && (j === i || !/^\s/.test(lines[j])))) j++;
      for (let k = i; k <= j; k++) own.add(k);
    } else if (lines[i] === `if (Symbol.dispose) ${name}.prototype[Symbol.dispose] = ${name}.prototype.free;`) {
      own.add(i);
    }
  }
  return own;
}

const drop = new Set();
const dropped = [];
for (const c of classes) {
  const own = ownLines(c.name);
  for (let i = c.from; i <= c.to; i++) own.add(i);
  const word = new RegExp(`\\b${c.name}\\b`);
  const namedElsewhere = lines.some((line, i) => !own.has(i) && word.test(line));
  if (namedElsewhere || word.test(entry)) continue;
  for (const i of own) drop.add(i);
  dropped.push(c.name);
}
const kept = lines.filter((_, i) => !drop.has(i));
const removedText = lines.filter((_, i) => drop.has(i)).join("\n");
const keptText = kept.join("\n");

// The wasm exports only the dropped classes used.
const uses = (text) => new Set([...text.matchAll(/\bwasm\.(\w+)/g)].map((m) => m[1]));
const stillUsed = uses(keptText);
const unused = [...uses(removedText)].filter((name) => !stillUsed.has(name));

if (unused.length) {
  const exportsOf = () => WebAssembly.Module.exports(new WebAssembly.Module(readFileSync(wasmPath))).map((e) => e.name);
  const exports = exportsOf();
  // wasm-opt's --remove-exports takes one wildcard a run: one per class, `*<class in lowercase>_*`, which
  // wasm-bindgen's names for a class's methods all match (`__wbg_get_r2range_offset`, `r2range_new`, …). Each
  // pattern must match only exports nothing else uses (an export of wasm-bindgen's own that only the dropped
  // classes used, such as __wbindgen_free, stays: it matches no pattern).
  const patterns = dropped.map((name) => `*${name.toLowerCase()}_*`);
  const matches = (pattern, name) => new RegExp(`^${pattern.replaceAll("*", ".*")}$`).test(name);
  for (const name of exports) {
    if (patterns.some((p) => matches(p, name)) && !unused.includes(name)) {
      throw new Error(`trim-wasm-bindgen: the patterns ${patterns} do not single out the unused exports (${name})`);
    }
  }
  const features = [
    "--enable-mutable-globals",
    "--enable-sign-ext",
    "--enable-nontrapping-float-to-int",
    "--enable-bulk-memory",
    "--enable-multivalue",
    "--enable-reference-types",
    "--enable-exception-handling",
  ];
  // -g keeps the names section (scripts/build-edge-worker.sh maps it to functions.txt, then strips it). The last
  // run optimizes what is left again, as worker-build ran it over the whole (EDGE_WASM_OPT_ARGS, from
  // scripts/build-edge-worker.sh, which says why they are more than -O).
  const optimize = (process.env.EDGE_WASM_OPT_ARGS ?? "-O").split(" ").filter(Boolean);
  patterns.forEach((pattern, i) => {
    const last = i === patterns.length - 1 ? optimize : [];
    execFileSync(
      wasmOpt,
      [wasmPath, ...features, "-g", "--remove-exports", `--pass-arg=remove-exports@${pattern}`,
        "--remove-unused-module-elements", ...last, "-o", `${wasmPath}.trimmed`],
      { stdio: ["ignore", "ignore", "inherit"] },
    );
    execFileSync("mv", [`${wasmPath}.trimmed`, wasmPath]);
  });
  const left = exportsOf();
  for (const name of stillUsed) {
    if (!left.includes(name)) throw new Error(`trim-wasm-bindgen: index.js uses wasm.${name}, no longer exported`);
  }
}
writeFileSync(indexPath, keptText);
process.stderr.write(`trim-wasm-bindgen: left out ${dropped.join(", ") || "nothing"}, and their wasm exports\n`);
