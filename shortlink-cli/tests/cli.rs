//! Runs the built `shortlink` binary: sign → verify round trips and the error paths.

use std::process::{Command, Output};

use serde_json::{Value, json};

const KEY: &str = "UvImZaYMEtKJGF2VDuiBNgkWb2sRPReNbA_TkB_yOaE";
const OTHER_KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
const GROUP: &str = "0b7e2c1a-3f4d-4e5f-8a9b-0c1d2e3f4a5b";

fn shortlink(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shortlink"))
        .args(args)
        .env_remove("SHORTLINK_GROUP_KEY")
        .output()
        .expect("run shortlink")
}

fn sign(extra: &[&str]) -> String {
    sign_with(KEY, extra)
}

fn sign_with(key: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "sign",
        "--group-key",
        key,
        "--group-id",
        GROUP,
        "--domain",
        "go.example.com",
    ];
    args.extend_from_slice(extra);
    let out = shortlink(&args);
    assert!(
        out.status.success(),
        "sign failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let url = String::from_utf8(out.stdout).expect("UTF-8 output");
    assert!(url.ends_with('\n'));
    url.trim_end().to_owned()
}

fn token_of(url: &str) -> &str {
    let prefix = format!("https://go.example.com/e/{GROUP}?signature=");
    url.strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("unexpected URL {url}"))
}

fn verify(key: &str, extra: &[&str], token: &str) -> Value {
    let mut args = vec!["verify", "--group-key", key];
    args.extend_from_slice(extra);
    args.push(token);
    let out = shortlink(&args);
    assert!(
        out.status.success(),
        "verify failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    serde_json::from_str(&stdout).expect("one JSON object")
}

fn invalid(reason: &str) -> Value {
    json!({"valid": false, "redirect_to": null, "reason": reason})
}

#[test]
fn sign_then_verify() {
    let url = sign(&[
        "--destination",
        "http://dest.example.org/path?a=1#top",
        "--back-param",
        "utm=1",
    ]);
    let token = token_of(&url);
    let expected = json!({"valid": true, "redirect_to": "https://dest.example.org/path?a=1&utm=1#top", "reason": null});
    assert_eq!(verify(KEY, &[], token), expected);
    // A whole URL is accepted too.
    assert_eq!(verify(KEY, &[], &url), expected);
    // Fresh IV per token.
    assert_ne!(
        token_of(&sign(&["--destination", "https://dest.example.org/"])),
        token_of(&sign(&["--destination", "https://dest.example.org/"]))
    );
}

#[test]
fn a_group_key_may_start_with_a_hyphen() {
    // One base64url key in 64 starts with `-` (this one is 32 bytes of 0xF8); it must not be taken
    // for an option, as it once was in the snippet cross-check.
    const HYPHEN_KEY: &str = "-Pj4-Pj4-Pj4-Pj4-Pj4-Pj4-Pj4-Pj4-Pj4-Pj4-Pg";
    let url = sign_with(HYPHEN_KEY, &["--destination", "https://dest.example.org/"]);
    assert_eq!(
        verify(HYPHEN_KEY, &[], token_of(&url)),
        json!({"valid": true, "redirect_to": "https://dest.example.org/", "reason": null})
    );
    // A token starting with `-` is a bad token, not a usage error.
    assert_eq!(verify(KEY, &[], "-abc"), invalid("signature"));
}

#[test]
fn wrong_key_is_a_signature_failure_not_an_error() {
    let url = sign(&["--destination", "https://dest.example.org/"]);
    assert_eq!(verify(OTHER_KEY, &[], token_of(&url)), invalid("signature"));
    assert_eq!(verify(KEY, &[], "%%%"), invalid("signature"));
}

#[test]
fn expired() {
    let url = sign(&[
        "--destination",
        "https://dest.example.org/",
        "--expires-at",
        "1000",
    ]);
    assert_eq!(verify(KEY, &[], token_of(&url)), invalid("expired"));
    assert_eq!(
        verify(KEY, &["--now", "999"], token_of(&url))["valid"],
        true
    );

    let url = sign(&[
        "--destination",
        "https://dest.example.org/",
        "--expires-in",
        "1h",
    ]);
    assert_eq!(verify(KEY, &[], token_of(&url))["valid"], true);
    let later = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 7200)
        .to_string();
    assert_eq!(
        verify(KEY, &["--now", &later], token_of(&url)),
        invalid("expired")
    );
}

#[test]
fn blocked() {
    let url = sign(&["--destination", "https://a.dest.example.org/"]);
    let token = token_of(&url);
    assert_eq!(
        verify(
            KEY,
            &[
                "--blocked-domain",
                "other.example",
                "--blocked-domain",
                "dest.example.org"
            ],
            token
        ),
        invalid("destination")
    );
    assert_eq!(
        verify(KEY, &["--blocked-domain", "st.example.org"], token)["valid"],
        true
    );
}

#[test]
fn bad_input_exits_non_zero() {
    let base = [
        "--group-id",
        GROUP,
        "--domain",
        "go.example.com",
        "--destination",
        "https://dest.example.org/",
    ];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["sign", "--group-key", "AAAA"], "32 bytes"),
        (vec!["sign", "--group-key", "not base64!"], "base64"),
        (
            vec!["sign", "--group-key", KEY, "--group-id", "not-a-uuid"],
            "UUID",
        ),
        (
            vec![
                "sign",
                "--group-key",
                KEY,
                "--destination",
                "ftp://dest.example.org/",
            ],
            "https",
        ),
        (
            vec!["sign", "--group-key", KEY, "--expires-in", "soon"],
            "duration",
        ),
        (
            vec![
                "sign",
                "--group-key",
                KEY,
                "--domain",
                "https://go.example.com/",
            ],
            "host name",
        ),
    ];
    for (args, message) in cases {
        // Later flags override the defaults in `base`, except where clap rejects duplicates: put overrides first.
        let mut all = args.clone();
        for pair in base.chunks(2) {
            if !all.contains(&pair[0]) {
                all.extend_from_slice(pair);
            }
        }
        let out = shortlink(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{all:?} succeeded");
        assert!(out.stdout.is_empty(), "{all:?} printed to stdout");
        assert!(stderr.contains(message), "{all:?}: {stderr}");
    }
    let out = shortlink(&["verify", "--group-key", "AAAA", "token"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
}
