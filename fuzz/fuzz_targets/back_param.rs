//! Any URL and back_param: the result is the URL before its fragment, one separator (or none),
//! the back_param without leading `?`/`&`, then the fragment.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shared_crypto::append_back_param;

fuzz_target!(|input: (&str, &str)| {
    let (url, back) = input;
    let out = append_back_param(url, back);
    let trimmed = back.trim_start_matches(['?', '&']);
    if trimmed.is_empty() {
        assert_eq!(out, url);
        return;
    }
    let cut = url.find('#').unwrap_or(url.len());
    let (base, fragment) = url.split_at(cut);
    assert!(
        out.starts_with(base) && out.ends_with(fragment),
        "{url:?} + {back:?} = {out:?}"
    );
    let middle = &out[base.len()..out.len() - fragment.len()];
    let separator = middle
        .strip_suffix(trimmed)
        .expect("back_param follows the separator");
    let expected = if base.ends_with(['?', '&']) {
        ""
    } else if base.contains('?') {
        "&"
    } else {
        "?"
    };
    assert_eq!(separator, expected, "{url:?} + {back:?} = {out:?}");
});
