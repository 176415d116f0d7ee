//! Unpadded base64url (RFC 4648, section 5) decoding, as strict as the `base64` crate's `URL_SAFE_NO_PAD` engine:
//! the URL-safe alphabet only, no `=` padding, no length of the form 4n + 1, and the last symbol's bits below the
//! last byte all zero (one text per byte string). The crate still encodes (the origin's and the tests' tokens and
//! keys); decoding is here because the edge worker decodes a token and a group key on a new isolate's first visit
//! to a dynamic link, where V8 compiles every wasm function it calls: the crate's decoder (a generic engine, chunked
//! eight symbols at a time) is 3.8 KB of wasm for this loop's few hundred bytes (BENCHMARKS.md, issue 28). The
//! tests check that both decode every text alike.

use alloc::vec::Vec;

/// A symbol's value, or [`INVALID`] for a byte that is no symbol of the alphabet.
const VALUES: [u8; 256] = {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut values = [INVALID; 256];
    let mut i = 0;
    while i < 64 {
        values[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    values
};
const INVALID: u8 = 0xff;

/// `text` decoded; `None` wherever `URL_SAFE_NO_PAD.decode(text)` gives an error.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let symbols = text.as_bytes();
    if symbols.len() % 4 == 1 {
        return None;
    }
    let mut bytes = Vec::with_capacity(symbols.len() / 4 * 3 + 2);
    let mut quads = symbols.chunks_exact(4);
    for quad in &mut quads {
        let bits = sextets(quad)?;
        bytes.extend_from_slice(&bits.to_be_bytes()[1..]);
    }
    // Two or three symbols left: one or two bytes, and 4 or 2 bits that belong to none, which must be zero.
    let rest = quads.remainder();
    if !rest.is_empty() {
        let bits = sextets(rest)? << (6 * (4 - rest.len()));
        let [_, a, b, c] = bits.to_be_bytes();
        let kept = if rest.len() == 2 { 1 } else { 2 };
        if [a, b, c][kept..].iter().any(|&byte| byte != 0) {
            return None;
        }
        bytes.extend_from_slice(&[a, b][..kept]);
    }
    Some(bytes)
}

/// The symbols' values, six bits each, the first highest; `None` if one is no symbol.
fn sextets(symbols: &[u8]) -> Option<u32> {
    let mut bits = 0u32;
    for &symbol in symbols {
        let value = VALUES[usize::from(symbol)];
        if value == INVALID {
            return None;
        }
        bits = (bits << 6) | u32::from(value);
    }
    Some(bits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use proptest::prelude::*;

    fn agrees(text: &str) {
        assert_eq!(decode(text), URL_SAFE_NO_PAD.decode(text).ok(), "{text:?}");
    }

    #[test]
    fn decodes_as_the_crate_does() {
        for text in [
            "", "A", "AA", "AB", "AAA", "AAB", "AAAA", "QQ", "QUI", "QUJD", "-_-_", "a-b_", "AA==",
            "AA=", "QQ=", "====", " AAAA", "AAAA ", "+/+/", "AAAAA", "\u{e9}AA", "AA\0A",
        ] {
            agrees(text);
        }
        assert_eq!(decode("QUJD"), Some(b"ABC".to_vec()));
        assert_eq!(decode("_-8"), Some(vec![0xff, 0xef]));
        // Nonzero bits after the last byte: another text of the same bytes ("QQ"), refused.
        assert_eq!(decode("QR"), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Every encoding decodes to its bytes.
        #[test]
        fn round_trip(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(decode(&URL_SAFE_NO_PAD.encode(&bytes)), Some(bytes));
        }

        /// Any text of symbols, padding, the standard alphabet's and other characters: the same answer.
        #[test]
        fn any_text(text in "[A-Za-z0-9_=+/ \\-é]{0,24}") {
            agrees(&text);
        }

        /// An encoding with one character changed anywhere: the same answer.
        #[test]
        fn one_character_changed(
            bytes in prop::collection::vec(any::<u8>(), 1..48),
            at in any::<prop::sample::Index>(),
            to in "[A-Za-z0-9_=+/\\-.]",
        ) {
            let mut text: Vec<char> = URL_SAFE_NO_PAD.encode(&bytes).chars().collect();
            let i = at.index(text.len());
            text[i] = to.chars().next().unwrap();
            agrees(&text.into_iter().collect::<String>());
        }
    }
}
