// Gives the wasm's imports short names, in the wasm and in the bundled glue alike. wasm-bindgen names each import
// after its JS function plus a 16-digit hash (`__wbg_warn_228ff2257384d295`), and every one of the 130-odd names is
// written twice: in the wasm's import section, with its module name ("./index_bg.js"), and as a property of the
// imports object in `index.js`. That is about 4 KB of the bundle's 18 KB of JavaScript and 6 KB of the wasm, all of
// it parsed by every new isolate (and, locally, by Miniflare in Node before workerd even starts; BENCHMARKS.md,
// "Cold start, issue 28"). The names carry no meaning at run time: the imports object is built in the same file.
//
// Each import of the module "./index_bg.js" whose name occurs in the bundle exactly once, as a property key
// (`name:`), becomes a short name (base 36 of its position, prefixed with `_`); the module name becomes "a" when the
// bundle names it exactly once. Anything else is left as it is, so a glue shape this does not recognise costs bytes,
// never a broken link between the two files (a missing import would fail the instantiation, which every test does).
//
// Usage: node shorten-wasm-imports.mjs INDEX_JS WASM      (both rewritten in place)
import { readFileSync, writeFileSync } from "node:fs";

const [jsPath, wasmPath] = process.argv.slice(2);
if (!jsPath || !wasmPath) {
  console.error("usage: node shorten-wasm-imports.mjs INDEX_JS WASM");
  process.exit(2);
}
let js = readFileSync(jsPath, "utf8");
const wasm = readFileSync(wasmPath);
const MODULE = "./index_bg.js";

let p = 8;
function leb() {
  let result = 0;
  let shift = 0;
  let byte;
  do {
    byte = wasm[p++];
    result += (byte & 0x7f) * 2 ** shift;
    shift += 7;
  } while (byte & 0x80);
  return result;
}
function encodeLeb(n) {
  const out = [];
  do {
    let byte = n & 0x7f;
    n = Math.floor(n / 128);
    if (n) byte |= 0x80;
    out.push(byte);
  } while (n);
  return Buffer.from(out);
}
function name() {
  const length = leb();
  const text = wasm.toString("utf8", p, p + length);
  p += length;
  return text;
}
function limits() {
  const flags = wasm[p++];
  leb();
  if (flags & 1) leb();
}

const occurrences = (text) => js.split(text).length - 1;
const moduleOk = occurrences(`"${MODULE}"`) === 1;
const newModule = moduleOk ? "a" : MODULE;

// Walk the sections; rebuild the import section with new names, keep every other byte as it is.
const parts = [wasm.subarray(0, 8)];
let renamed = 0;
while (p < wasm.length) {
  const sectionStart = p;
  const id = wasm[p++];
  const size = leb();
  const bodyStart = p;
  const end = p + size;
  if (id !== 2) {
    parts.push(wasm.subarray(sectionStart, end));
    p = end;
    continue;
  }
  const count = leb();
  const entries = [encodeLeb(count)];
  for (let i = 0; i < count; i++) {
    const module = name();
    const field = name();
    const descStart = p;
    const kind = wasm[p++];
    if (kind === 0) leb(); // function: type index
    else if (kind === 1) {
      p++; // table: reference type
      limits();
    } else if (kind === 2) limits(); // memory
    else if (kind === 3) p += 2; // global: value type, mutability
    else if (kind === 4) {
      p++; // tag: attribute
      leb();
    } else throw new Error(`shorten-wasm-imports: unknown import kind ${kind}`);
    let newName = field;
    if (module === MODULE && occurrences(`${field}:`) === 1 && occurrences(field) === 1) {
      newName = `_${i.toString(36)}`;
      if (occurrences(`${newName}:`) !== 0) throw new Error(`shorten-wasm-imports: ${newName} already in the bundle`);
      js = js.replace(`${field}:`, `${newName}:`);
      renamed++;
    }
    const newModuleName = module === MODULE ? newModule : module;
    const m = Buffer.from(newModuleName, "utf8");
    const f = Buffer.from(newName, "utf8");
    entries.push(encodeLeb(m.length), m, encodeLeb(f.length), f, wasm.subarray(descStart, p));
  }
  if (p !== end) throw new Error("shorten-wasm-imports: import section not read to its end");
  const body = Buffer.concat(entries);
  parts.push(Buffer.from([2]), encodeLeb(body.length), body);
  void bodyStart;
}
if (moduleOk) js = js.replace(`"${MODULE}"`, `"${newModule}"`);
const out = Buffer.concat(parts);
writeFileSync(wasmPath, out);
writeFileSync(jsPath, js);
console.error(
  `shorten-wasm-imports: ${renamed} imports renamed${moduleOk ? ", module a" : ""}; wasm ${wasm.length} → ${out.length} bytes`,
);
