// scripts/eager-first-visit.mjs on a module shaped as wasm-bindgen writes index.js: the functions it is told of go
// into parentheses, and nothing else changes; the parentheses survive esbuild's minified bundle, which the edge
// worker's build relies on. Run with `node --test` (tests/tests/entry_module.rs).
import assert from "node:assert/strict";
import { test } from "node:test";
import { transformSync } from "esbuild";
import { makeEager } from "./eager-first-visit.mjs";

const GLUE = `let wasm;
/**
 * @param {number} a
 */
export function fetch(a, b) {
    let ret;
    ret = helper(a) + b;
    return ret;
}

export function queue(a) {
    return a;
}

function helper(x) {
    if (x > 1) {
        return x * 2;
    }
    return x;
}

function odd(x) {
    const s = \`
not indented\`;
    return s + x;
}

function __wbg_get_imports() {
    const import0 = {
        __proto__: null,
        __wbg_now_463ac581d2fc7ea3: function() {
            const ret = Date.now();
            return ret;
        },
        __wbg_warn_228ff2257384d295: function(arg0) {
            console.warn(arg0);
        },
        __wbindgen_generic_0000000000000004: function(arg0, arg1) {
            // Cast intrinsic for \`Ref(String) -> Externref\`.
            const ret = String(arg0) + String(arg1);
            return ret;
        },
    };
    return import0;
}
export const imports = __wbg_get_imports();
`;

const chosen = { topLevel: ["fetch", "helper"], imports: ["now", "cast Ref(String) -> Externref"] };

test("the chosen functions, and only they, go into parentheses", () => {
  const { text, made, missing } = makeEager(GLUE, chosen);
  assert.equal(made, 4);
  assert.deepEqual(missing, []);
  assert.match(text, /^export const fetch = \(function fetch\(a, b\) \{$/m);
  assert.match(text, /^const helper = \(function helper\(x\) \{$/m);
  assert.match(text, /^ {8}__wbg_now_463ac581d2fc7ea3: \(function\(\) \{$/m);
  assert.match(text, /^ {8}__wbindgen_generic_0000000000000004: \(function\(arg0, arg1\) \{$/m);
  // Left as they were: not chosen.
  assert.match(text, /^export function queue\(a\) \{$/m);
  assert.match(text, /^ {8}__wbg_warn_228ff2257384d295: function\(arg0\) \{$/m);
  // Each block closed where it was, its body untouched.
  assert.equal(text.split("\n").length, GLUE.split("\n").length);
  assert.equal(text.match(/^\}\);$/gm).length, 2);
  assert.equal(text.match(/^ {8}\}\),$/gm).length, 2);
  assert.ok(text.includes("    if (x > 1) {\n        return x * 2;\n    }\n    return x;\n});\n"));
});

test("the module does what it did", async () => {
  const { text } = makeEager(GLUE, chosen);
  const before = await import(`data:text/javascript,${encodeURIComponent(GLUE)}`);
  const after = await import(`data:text/javascript,${encodeURIComponent(text)}`);
  assert.equal(after.fetch(3, 1), before.fetch(3, 1));
  assert.equal(after.fetch(3, 1), 7);
  assert.equal(after.imports.__wbindgen_generic_0000000000000004("a", "b"), "ab");
  assert.equal(typeof after.imports.__wbg_now_463ac581d2fc7ea3(), "number");
});

test("a listed name it cannot find, or whose block it does not recognise, is reported", () => {
  const { text, missing } = makeEager(GLUE, { topLevel: ["fetch", "gone", "odd"], imports: ["now", "then"] });
  assert.deepEqual(missing, ["gone", "odd", "then"]);
  // A line at column 0 inside `odd` (a template literal's): its block is not recognised, and left alone.
  assert.match(text, /^function odd\(x\) \{$/m);
});

test("all: every function it recognises", () => {
  const { made, missing } = makeEager(GLUE, { all: true });
  // fetch, queue, helper, __wbg_get_imports and the three imports; not `odd`.
  assert.equal(made, 7);
  assert.deepEqual(missing, []);
});

test("esbuild's minified bundle keeps the parentheses", () => {
  const { text } = makeEager(GLUE, chosen);
  const { code } = transformSync(text, { minify: true, format: "esm" });
  // `fetch` and `helper`, and the two imports.
  assert.equal(code.match(/=\(function\(/g)?.length, 2, code);
  assert.equal(code.match(/:\(function\(/g)?.length, 2, code);
  // And the ones left lazy have none.
  assert.doesNotMatch(code, /\(function\(\)\{console\.warn/);
});
