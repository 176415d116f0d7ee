//! The operating system of a visitor, from the User-Agent: a small ordered table of substrings, no regular
//! expressions (a regex engine would cost the worker's wasm more than the rest of the rules together). Several
//! systems name others in their User-Agent (Android says `Linux`, iOS says `like Mac OS X`, ChromeOS says `X11`
//! and `Linux`), so the table lists the more specific token first and the first match wins.

use crate::Os;

/// Systems, most specific token first. Case-sensitive: the vendors' spellings are fixed, and a lowercase copy
/// would cost an allocation per request. ChromeOS is `other` for the rules (no app store of its own to send to).
const SYSTEMS: &[(&str, Os)] = &[
    ("iPhone", Os::Ios),
    ("iPad", Os::Ios),
    ("iPod", Os::Ios),
    // Some iOS apps' own agents (`MyApp/1.0 (iOS 17.5)`), and Firefox/Chrome for iOS in some modes.
    ("iOS", Os::Ios),
    ("Android", Os::Android),
    ("Windows", Os::Windows),
    ("CrOS", Os::Other),
    ("Mac OS X", Os::Macos),
    ("Macintosh", Os::Macos),
    ("Linux", Os::Linux),
];

/// The operating system `user_agent` names; [`Os::Other`] when none (or an empty User-Agent). iPadOS 13+ Safari
/// presents itself as a Mac by default: such iPads are `macos`, as the User-Agent cannot tell them apart.
pub fn os_of(user_agent: &str) -> Os {
    SYSTEMS
        .iter()
        .find(|(token, _)| user_agent.contains(token))
        .map_or(Os::Other, |(_, os)| *os)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real User-Agent strings and the system each must give.
    const CASES: &[(&str, Os)] = &[
        (
            "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
            Os::Ios,
        ),
        (
            "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
            Os::Ios,
        ),
        (
            "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.81 Mobile Safari/537.36",
            Os::Android,
        ),
        (
            "Mozilla/5.0 (Linux; Android 13; SAMSUNG SM-S911B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/23.0 Chrome/115.0.0.0 Mobile Safari/537.36",
            Os::Android,
        ),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
            Os::Windows,
        ),
        (
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
            Os::Macos,
        ),
        (
            "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
            Os::Linux,
        ),
        (
            "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
            Os::Other,
        ),
        ("curl/8.5.0", Os::Other),
        ("", Os::Other),
    ];

    #[test]
    fn real_user_agents() {
        for (ua, os) in CASES {
            assert_eq!(os_of(ua), *os, "{ua}");
        }
    }
}
