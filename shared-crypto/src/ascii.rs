//! Finding an ASCII byte in a `str`, and trimming ASCII whitespace, for the URL and host parsing a new edge
//! isolate's first request runs.
//!
//! Why not `str::find(char)`, `rfind` or `split_once`: with a `char` pattern they go through core's `CharSearcher`
//! (its forward and reverse `next_match` and `memrchr`, about 2 KB of wasm with the copies each crate gets), and V8
//! compiles every wasm function on its first call, so a new isolate's first request would compile them for
//! searches a loop over the bytes does as well (edge-worker's BENCHMARKS.md, "Cold start"). An ASCII byte never
//! occurs inside a multi-byte UTF-8 sequence, so the index found is a char boundary and slicing there cannot panic.

use alloc::string::String;

/// The index of the first `byte` (ASCII) in `text`.
pub fn find_byte(text: &str, byte: u8) -> Option<usize> {
    debug_assert!(byte.is_ascii());
    text.bytes().position(|b| b == byte)
}

/// The index of the last `byte` (ASCII) in `text`.
pub fn rfind_byte(text: &str, byte: u8) -> Option<usize> {
    debug_assert!(byte.is_ascii());
    text.bytes().rposition(|b| b == byte)
}

/// `text` around its first `byte` (ASCII), which neither part holds; `None` without one.
pub fn split_once_byte(text: &str, byte: u8) -> Option<(&str, &str)> {
    let at = find_byte(text, byte)?;
    Some((&text[..at], &text[at + 1..]))
}

/// `text` without the `byte`s (ASCII) it ends with.
pub fn trim_end_byte(text: &str, byte: u8) -> &str {
    debug_assert!(byte.is_ascii());
    let end = text
        .bytes()
        .rposition(|b| b != byte)
        .map_or(0, |last| last + 1);
    &text[..end]
}

/// `text` without the ASCII whitespace around it, for texts whose whitespace can only be ASCII (HTTP header values,
/// configuration, validated URLs and host names). Out of line, one copy for every caller: `str::trim` tests each
/// char against Unicode's whitespace (core's `trim_matches`, 669 bytes of wasm), and `trim_ascii` inlined grows each
/// caller by about as much as this function is (edge-worker's BENCHMARKS.md, "Cold start").
#[inline(never)]
pub fn trim(text: &str) -> &str {
    text.trim_ascii()
}

/// `text` copied with ASCII letters lowercased. Out of line, one copy for every caller: `str::to_ascii_lowercase`
/// inlined is an allocation and an unrolled loop in each caller, which a new edge isolate's first request compiles
/// once per caller (a route's code or group id, the request's host; edge-worker's BENCHMARKS.md, "Cold start").
#[inline(never)]
pub fn lowercase(text: &str) -> String {
    text.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_as_str_does() {
        for text in ["", "a", "a:b:c", ":", "é:ü:", "no colon", "日本:語"] {
            assert_eq!(find_byte(text, b':'), text.find(':'), "{text}");
            assert_eq!(rfind_byte(text, b':'), text.rfind(':'), "{text}");
            assert_eq!(split_once_byte(text, b':'), text.split_once(':'), "{text}");
        }
    }

    #[test]
    fn trims_a_byte_as_str_does() {
        for text in ["", ".", "a.", "a..", ".a", "é.", "日本.."] {
            assert_eq!(
                trim_end_byte(text, b'.'),
                text.trim_end_matches('.'),
                "{text}"
            );
        }
    }

    #[test]
    fn lowercases_ascii_letters_only() {
        assert_eq!(lowercase("AbC-09.É"), "abc-09.É");
        assert_eq!(lowercase(""), "");
    }

    #[test]
    fn trims_ascii_whitespace_only() {
        assert_eq!(trim(" \t a.example \r\n"), "a.example");
        assert_eq!(trim("\u{a0}a\u{a0}"), "\u{a0}a\u{a0}");
        assert_eq!(trim(""), "");
    }
}
