//! The shared test vectors (`tests/vectors/dynamic-links.json`, a copy of `shared/vectors/dynamic-links.json`),
//! evaluated as their `about` field says.

use serde_json::Value;
use shared_crypto::{GroupKey, TokenCipher};

#[test]
fn dynamic_link_vectors() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vectors/dynamic-links.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let vectors: Value = serde_json::from_str(&text).unwrap();

    let key = GroupKey::from_base64url(vectors["group_key"].as_str().unwrap()).unwrap();
    let cipher = TokenCipher::new(&key);
    let now = vectors["now"].as_i64().unwrap();
    let blocked: Vec<&str> = vectors["blocked_domains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();

    let cases = vectors["cases"].as_array().unwrap();
    assert!(cases.len() >= 30, "vector file looks truncated");
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let token = case["token"].as_str().unwrap();
        let result = cipher.evaluate(token, now, &blocked);
        match case["valid"].as_bool() {
            Some(true) => {
                let url = result.unwrap_or_else(|e| panic!("{name}: expected valid, got {e}"));
                match case["redirect_to"].as_str() {
                    Some(expected) => assert_eq!(url, expected, "{name}"),
                    // Any correct encoding of the destination: same scheme and host.
                    None => assert!(
                        url.starts_with("https://dest.example.org/"),
                        "{name}: {url}"
                    ),
                }
            }
            Some(false) => {
                let err = result
                    .err()
                    .unwrap_or_else(|| panic!("{name}: expected invalid"));
                assert_eq!(
                    err.reason(),
                    case["reason"].as_str().unwrap(),
                    "{name}: {err}"
                );
            }
            // Either answer is acceptable; evaluating must simply not panic.
            None => drop(result),
        }
    }
}

#[test]
fn vector_copy_matches_shared_when_present() {
    // On a developer machine the shared/ directory sits beside the repo; keep the committed copy in sync with it.
    let shared = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/vectors/dynamic-links.json"
    );
    let copy = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vectors/dynamic-links.json"
    );
    if let Ok(original) = std::fs::read_to_string(shared) {
        assert_eq!(
            original,
            std::fs::read_to_string(copy).unwrap(),
            "tests/vectors/dynamic-links.json is stale"
        );
    }
}
