//! The edge worker's JavaScript entry module, under Node: its kept answers stay within their bounds (count and
//! bytes), tested directly in `edge-worker/js/kept-answers.test.mjs` (the worker in workerd cannot show its memory).
//! Needs no build: the module is plain JavaScript, bundled as it is.

use std::process::Command;

#[test]
fn kept_answers_stay_within_their_byte_budget() {
    let root = e2e::root();
    let node = root.join("node_modules/.bin/node");
    assert!(
        node.exists(),
        "{} is missing: run scripts/install-edge-toolchain.sh",
        node.display()
    );
    let out = Command::new(node)
        .arg("--test")
        .arg(root.join("edge-worker/js/kept-answers.test.mjs"))
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
