// scripts/eager-first-visit.mjs on a module shaped as wasm-bindgen writes index.js: the functions it is told of go
// into parentheses, and nothing else changes; the parentheses survive the minified bundle of the esbuild the build
// runs (node_modules' own, as scripts/build-edge-worker.sh does), which the edge worker relies on; the command
// rewrites its file, also when reached through a symbolic link, and refuses a list it cannot follow. Run with
// `node --test` (tests/tests/entry_module.rs).
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { IMPORTS, TOP_LEVEL, makeEager } from "./eager-first-visit.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const node = process.execPath;

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
        __wbg___wbindgen_is_object_8b968c3ab8e96595: function(arg0) {
            const val = arg0;
            const ret = typeof(val) === 'object' && val !== null;
            return ret;
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

const chosen = {
  topLevel: ["fetch", "helper"],
  imports: ["now", "__wbindgen_is_object", "cast Ref(String) -> Externref"],
};

test("the chosen functions, and only they, go into parentheses", () => {
  const { text, made, missing, unrecognised } = makeEager(GLUE, chosen);
  assert.equal(made, 5);
  assert.deepEqual(missing, []);
  assert.deepEqual(unrecognised, []);
  assert.match(text, /^export const fetch = \(function fetch\(a, b\) \{$/m);
  assert.match(text, /^const helper = \(function helper\(x\) \{$/m);
  assert.match(text, /^ {8}__wbg_now_463ac581d2fc7ea3: \(function\(\) \{$/m);
  assert.match(text, /^ {8}__wbg___wbindgen_is_object_8b968c3ab8e96595: \(function\(arg0\) \{$/m);
  assert.match(text, /^ {8}__wbindgen_generic_0000000000000004: \(function\(arg0, arg1\) \{$/m);
  // Left as they were: not chosen.
  assert.match(text, /^export function queue\(a\) \{$/m);
  assert.match(text, /^ {8}__wbg_warn_228ff2257384d295: function\(arg0\) \{$/m);
  // Each block closed where it was, its body untouched.
  assert.equal(text.split("\n").length, GLUE.split("\n").length);
  assert.equal(text.match(/^\}\);$/gm).length, 2);
  assert.equal(text.match(/^ {8}\}\),$/gm).length, 3);
  assert.ok(text.includes("    if (x > 1) {\n        return x * 2;\n    }\n    return x;\n});\n"));
});

test("the module does what it did", async () => {
  const { text } = makeEager(GLUE, chosen);
  const before = await import(`data:text/javascript,${encodeURIComponent(GLUE)}`);
  const after = await import(`data:text/javascript,${encodeURIComponent(text)}`);
  assert.equal(after.fetch(3, 1), before.fetch(3, 1));
  assert.equal(after.fetch(3, 1), 7);
  assert.equal(after.imports.__wbindgen_generic_0000000000000004("a", "b"), "ab");
  assert.equal(after.imports.__wbg___wbindgen_is_object_8b968c3ab8e96595({}), true);
  assert.equal(typeof after.imports.__wbg_now_463ac581d2fc7ea3(), "number");
});

test("a listed name it cannot find, or whose block it does not recognise, is reported", () => {
  const { text, missing, unrecognised } = makeEager(GLUE, {
    topLevel: ["fetch", "gone", "odd", "now"],
    imports: ["now", "then", "fetch"],
  });
  // Each list on its own: `now` is an import, not a top-level function, and `fetch` the other way round.
  assert.deepEqual(missing, ["gone", "now", "then", "fetch"]);
  assert.deepEqual(unrecognised, ["odd"]);
  // A line at column 0 inside `odd` (a template literal's): its block is not recognised, and left alone.
  assert.match(text, /^function odd\(x\) \{$/m);
});

test("all: every function it recognises", () => {
  const { made, missing } = makeEager(GLUE, { all: true });
  // fetch, queue, helper, __wbg_get_imports and the four imports; not `odd`.
  assert.equal(made, 8);
  assert.deepEqual(missing, []);
});

test("the build's esbuild keeps the parentheses in its minified bundle", () => {
  const dir = mkdtempSync(join(tmpdir(), "eager-first-visit-"));
  try {
    writeFileSync(join(dir, "index.js"), makeEager(GLUE, chosen).text);
    // An entry that uses the glue, as edge-worker/js/entry.js does, so that the bundle keeps it.
    writeFileSync(join(dir, "entry.js"), 'import { fetch, queue, imports } from "./index.js";\n' +
      "export default { fetch, queue, imports };\n");
    // worker-build's arguments to it (--bundle --format=esm --minify), with the output on stdout.
    const code = execFileSync(join(root, "node_modules/.bin/esbuild"), ["--bundle", "--format=esm", "--minify",
      join(dir, "entry.js")], { encoding: "utf8" });
    // `fetch` and `helper`, and the three imports chosen.
    assert.equal(code.match(/=\(function\(/g)?.length, 2, code);
    assert.equal(code.match(/:\(function\(/g)?.length, 3, code);
    // And the ones left lazy have none.
    assert.doesNotMatch(code, /\(function\([a-z]?\)\{console\.warn/, code);
    assert.match(code, /function\([a-z]?\)\{console\.warn/, code);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the command rewrites its file, also run through a symbolic link, and refuses what it cannot follow", () => {
  const dir = mkdtempSync(join(tmpdir(), "eager-first-visit-"));
  try {
    // The real index.js's shape, with every name of the script's own lists once.
    const [top, imports] = [TOP_LEVEL, IMPORTS];
    let glue = top.map((name) => `function ${name}(a) {\n    return a;\n}\n`).join("\n");
    glue += "const imports = {\n";
    imports.forEach((name, i) => {
      const hash = String(i).padStart(16, "0");
      const head = name.startsWith("cast ")
        ? `        __wbindgen_generic_${hash}: function(arg0) {\n` +
          `            // Cast intrinsic for \`${name.slice(5)}\`.\n`
        : `        __wbg_${name}_${hash.replace(/0/g, "a")}: function(arg0) {\n`;
      glue += `${head}            return arg0;\n        },\n`;
    });
    glue += "};\n";
    writeFileSync(join(dir, "index.js"), glue);
    symlinkSync(join(root, "scripts"), join(dir, "scripts"));
    const run = () => spawnSync(node, [join(dir, "scripts/eager-first-visit.mjs"), join(dir, "index.js")], {
      encoding: "utf8",
    });
    const ok = run();
    assert.equal(ok.status, 0, ok.stderr);
    const made = readFileSync(join(dir, "index.js"), "utf8");
    assert.equal(made.match(/ = \(function /g)?.length, top.length, made);
    assert.equal(made.match(/: \(function\(/g)?.length, imports.length, made);
    // A glue without one of the listed names: the build stops, and the file is left as it was.
    writeFileSync(join(dir, "index.js"), glue.replace(`function ${top[0]}(`, "function renamed("));
    const refused = run();
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, new RegExp(`not in wasm-bindgen's index.js: ${top[0]}`));
    assert.doesNotMatch(readFileSync(join(dir, "index.js"), "utf8"), /\(function /);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
