//! A persistent link's `forward_query`: the visitor's query string appended to the destination, so parameters put
//! on a short link (`/promo?utm_source=mail`) reach the landing page.
//!
//! Persistent links only: a dynamic link's destination and `back_param` are signed by the client, and the worker
//! never adds to what was signed.
//!
//! The visitor's parameters are kept as the visitor sent them (their raw text, not decoded and re-encoded), so
//! the destination receives exactly what a browser put in the short link. Names are decoded only to compare them
//! with the destination's own (`form_urlencoded`, already a dependency for the dynamic route's `signature`);
//! joining uses shared-crypto's [`append_back_param`], the rule dynamic links already follow (separator `?` or
//! `&`, before any `#fragment`). Not the `url` crate: its IDNA tables would add about 100 KB to the wasm, and
//! nothing here needs a full URL parser.

use std::borrow::Cow;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use shared_crypto::{MAX_URL_LEN, append_back_param};

/// What the visitor's query may not carry into a `Location` header as it is: controls, space and non-ASCII
/// (percent-encoded by the encoder itself), and `#`, which would start a fragment. The Workers runtime hands us a
/// URL it has already serialized, whose query has none of these; encoding them anyway keeps the header valid
/// whatever the runtime passes.
const NOT_IN_LOCATION: &AsciiSet = &CONTROLS.add(b' ').add(b'#');

/// `destination` (a value [`crate::decision::location`] returned) with the visitor's `query` (raw, without the
/// leading `?`) appended.
///
/// - An empty query, or one whose every parameter clashes, leaves `destination` unchanged.
/// - The destination's own parameters win: a visitor parameter whose (decoded) name already appears in the
///   destination's query is dropped, so a link's fixed `id=5` cannot be overridden from the address bar.
/// - **Decision:** when the result would be longer than [`MAX_URL_LEN`] (2048) characters, the destination is
///   returned without the visitor's query. The link itself still works (a fallback would punish the visitor for
///   extras they may not even know they carry), 2048 is the limit every destination is held to at the origin and
///   for dynamic links, and longer URLs are refused by some browsers and servers. All or nothing: keeping only the
///   parameters that fit would forward an arbitrary subset.
#[inline(never)] // rare: out of the decision's compiled body (`smart::chosen` says why)
pub fn forward_query(destination: &str, query: &str) -> String {
    // A leading `?` (from `/code??a=1`) would be stripped by `append_back_param`; strip it first, so the name the
    // clash test sees is the name the destination receives.
    let query = query.trim_start_matches('?');
    if query.is_empty() {
        return destination.to_owned();
    }
    let before_fragment = destination.split('#').next().unwrap_or_default();
    let own_query = before_fragment
        .split_once('?')
        .map_or("", |(_, query)| query);
    let own_names: Vec<Cow<'_, str>> = form_urlencoded::parse(own_query.as_bytes())
        .map(|(name, _)| name)
        .collect();
    let kept: Vec<&str> = query
        .split('&')
        .filter(|param| {
            form_urlencoded::parse(param.as_bytes())
                .next()
                .is_some_and(|(name, _)| !own_names.contains(&name))
        })
        .collect();
    if kept.is_empty() {
        return destination.to_owned();
    }
    let forwarded = utf8_percent_encode(&kept.join("&"), NOT_IN_LOCATION).to_string();
    let url = append_back_param(destination, &forwarded);
    // Both parts are ASCII (a checked `Location` value and an encoded query), so bytes are characters.
    if url.len() > MAX_URL_LEN {
        destination.to_owned()
    } else {
        url
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_query_leaves_the_destination() {
        for query in ["", "?", "&", "&&"] {
            assert_eq!(
                forward_query("https://d.example/a?x=1#f", query),
                "https://d.example/a?x=1#f",
                "{query:?}"
            );
        }
    }

    #[test]
    fn separator_is_question_mark_or_ampersand() {
        assert_eq!(
            forward_query("https://d.example/a", "utm=x"),
            "https://d.example/a?utm=x"
        );
        assert_eq!(
            forward_query("https://d.example", "utm=x&b"),
            "https://d.example?utm=x&b"
        );
        assert_eq!(
            forward_query("https://d.example/a?x=1", "utm=x"),
            "https://d.example/a?x=1&utm=x"
        );
        assert_eq!(
            forward_query("https://d.example/a?", "utm=x"),
            "https://d.example/a?utm=x",
            "an empty query needs no separator"
        );
        assert_eq!(
            forward_query("https://d.example/a?x=1&", "utm=x"),
            "https://d.example/a?x=1&utm=x"
        );
    }

    #[test]
    fn the_query_goes_before_the_fragment() {
        assert_eq!(
            forward_query("https://d.example/a#top", "utm=x"),
            "https://d.example/a?utm=x#top"
        );
        assert_eq!(
            forward_query("https://d.example/a?x=1#top?y=2", "utm=x&y=3"),
            "https://d.example/a?x=1&utm=x&y=3#top?y=2",
            "`y` in the fragment is not a parameter of the destination"
        );
    }

    #[test]
    fn the_destination_wins_a_clash() {
        assert_eq!(
            forward_query("https://d.example/a?id=5&ref=me", "id=6&utm=x&ref&id=7"),
            "https://d.example/a?id=5&ref=me&utm=x"
        );
        assert_eq!(
            forward_query("https://d.example/a?a%20b=1", "a+b=2&c=3"),
            "https://d.example/a?a%20b=1&c=3",
            "names are compared decoded"
        );
        assert_eq!(
            forward_query("https://d.example/a?id=5", "id=6&&id=7"),
            "https://d.example/a?id=5",
            "every parameter clashes"
        );
        assert_eq!(
            forward_query("https://d.example/a?id=5", "?id=6"),
            "https://d.example/a?id=5",
            "a leading `?` does not hide a clash"
        );
        assert_eq!(
            forward_query("https://d.example/a?id=5", "ID=6"),
            "https://d.example/a?id=5&ID=6",
            "names are case-sensitive"
        );
    }

    #[test]
    fn the_visitor_query_is_kept_raw_but_header_safe() {
        assert_eq!(
            forward_query("https://d.example/", "q=a%2Bb+c&e=%C3%A9"),
            "https://d.example/?q=a%2Bb+c&e=%C3%A9"
        );
        assert_eq!(
            forward_query("https://d.example/", "q=a b#c&é=\u{7f}"),
            "https://d.example/?q=a%20b%23c&%C3%A9=%7F"
        );
    }

    #[test]
    fn over_the_limit_the_visitor_query_is_dropped() {
        let destination = format!("https://d.example/{}", "a".repeat(2000));
        let fits = format!("q={}", "b".repeat(MAX_URL_LEN - destination.len() - 3));
        let url = forward_query(&destination, &fits);
        assert_eq!(url.len(), MAX_URL_LEN);
        assert_eq!(url, format!("{destination}?{fits}"));
        assert_eq!(
            forward_query(&destination, &format!("{fits}b")),
            destination,
            "one character over"
        );
    }
}
