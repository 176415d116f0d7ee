//! The browser and operating system of a click, from the User-Agent the worker forwards (never stored: only
//! these two names are). A small ordered table of substrings, no regular expressions: many browsers name the
//! ones they build on (`Edg/…` and `SamsungBrowser/…` say `Chrome/…` and `Safari/…` too; Chrome says `Safari/…`),
//! so the table lists the more specific token first and the first match wins.

/// Browsers, most specific token first. Case-sensitive: the vendors' spellings are fixed, and a lowercase copy
/// would cost an allocation per click.
const BROWSERS: &[(&str, &str)] = &[
    // Edge: `Edg/` on desktop, `EdgA/` on Android, `EdgiOS/` on iOS, `Edge/` in the old EdgeHTML.
    ("Edg/", "edge"),
    ("EdgA/", "edge"),
    ("EdgiOS/", "edge"),
    ("Edge/", "edge"),
    ("SamsungBrowser/", "samsung"),
    ("OPR/", "opera"),
    ("OPiOS/", "opera"),
    ("Opera", "opera"),
    // Firefox on iOS is WebKit and says `Safari`; before the Chrome/Safari rows.
    ("FxiOS/", "firefox"),
    ("Firefox/", "firefox"),
    // Chrome on iOS is WebKit too.
    ("CriOS/", "chrome"),
    ("Chrome/", "chrome"),
    ("Chromium/", "chrome"),
    // Last: nearly every WebKit and Blink browser says `Safari/`.
    ("Safari/", "safari"),
];

/// Operating systems, most specific first: Android says `Linux`, iOS says `like Mac OS X`, ChromeOS says `X11`.
const SYSTEMS: &[(&str, &str)] = &[
    ("iPhone", "ios"),
    ("iPad", "ios"),
    ("iPod", "ios"),
    ("iOS", "ios"),
    ("Android", "android"),
    ("Windows", "windows"),
    ("CrOS", "chromeos"),
    ("Mac OS X", "macos"),
    ("Macintosh", "macos"),
    ("Linux", "linux"),
];

/// The first name of `table` whose token `ua` contains, else `other`.
fn first_match(table: &[(&str, &'static str)], ua: &str) -> &'static str {
    table
        .iter()
        .find(|(token, _)| ua.contains(token))
        .map_or("other", |(_, name)| name)
}

/// `chrome`, `safari`, `firefox`, `edge`, `samsung`, `opera` or `other`.
pub(crate) fn browser(ua: &str) -> &'static str {
    first_match(BROWSERS, ua)
}

/// `ios`, `android`, `windows`, `macos`, `linux`, `chromeos` or `other`.
pub(crate) fn os(ua: &str) -> &'static str {
    first_match(SYSTEMS, ua)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real User-Agent strings, with the browser and OS each must give.
    const CASES: &[(&str, &str, &str)] = &[
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
            "chrome",
            "windows",
        ),
        (
            "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.81 Mobile Safari/537.36",
            "chrome",
            "android",
        ),
        (
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
            "chrome",
            "ios",
        ),
        (
            "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
            "safari",
            "ios",
        ),
        (
            "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
            "safari",
            "ios",
        ),
        (
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
            "safari",
            "macos",
        ),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
            "firefox",
            "windows",
        ),
        (
            "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
            "firefox",
            "linux",
        ),
        (
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/132.0 Mobile/15E148 Safari/605.1.15",
            "firefox",
            "ios",
        ),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
            "edge",
            "windows",
        ),
        (
            "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36 EdgA/131.0.0.0",
            "edge",
            "android",
        ),
        (
            "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S921B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36",
            "samsung",
            "android",
        ),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36 OPR/115.0.0.0",
            "opera",
            "windows",
        ),
        (
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
            "chrome",
            "macos",
        ),
        (
            "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
            "chrome",
            "chromeos",
        ),
        ("curl/8.5.0", "other", "other"),
        ("", "other", "other"),
    ];

    #[test]
    fn classifies_real_user_agents() {
        for (ua, want_browser, want_os) in CASES {
            assert_eq!((browser(ua), os(ua)), (*want_browser, *want_os), "{ua}");
        }
    }
}
