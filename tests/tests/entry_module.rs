//! The edge worker's JavaScript, under Node: the entry module's kept answers stay within their bounds (count and
//! bytes), tested directly in `edge-worker/js/kept-answers.test.mjs` (the worker in workerd cannot show its memory);
//! and the build's rewrite of wasm-bindgen's glue (`scripts/eager-first-visit.mjs`) puts the functions it is told
//! of in parentheses, changing nothing else, in a form esbuild's bundle keeps. Needs no build: plain JavaScript.

use std::process::Command;

#[test]
fn kept_answers_stay_within_their_byte_budget() {
    node_test("edge-worker/js/kept-answers.test.mjs");
}

#[test]
fn the_glue_a_first_visit_runs_is_compiled_with_the_script() {
    node_test("scripts/eager-first-visit.test.mjs");
}

/// Runs `file` (relative to the repository) with `node --test`; every test in it must pass, and there must be some.
fn node_test(file: &str) {
    let root = e2e::root();
    let node = root.join("node_modules/.bin/node");
    assert!(
        node.exists(),
        "{} is missing: run scripts/install-edge-toolchain.sh",
        node.display()
    );
    let out = Command::new(node)
        .arg("--test")
        .arg(root.join(file))
        .current_dir(&root)
        .output()
        .expect("run node --test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "node --test failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // node's TAP summary: every test ran and passed.
    assert!(stdout.contains("# fail 0"), "{stdout}");
    assert!(!stdout.contains("# pass 0"), "{stdout}");
}
