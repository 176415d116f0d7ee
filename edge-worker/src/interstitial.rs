//! The monetization interstitial: a page that counts down, then continues to the destination.
//!
//! It works without JavaScript: the continue link is a plain `<a href>` from the start, and a
//! `<meta http-equiv="refresh">` moves on when the countdown ends. The script only updates the number and
//! navigates at zero. The destination appears only in HTML attributes and text, escaped; the script reads it from
//! the link, so no URL is ever written into JavaScript. The page's CSP allows exactly this script and style, by hash.

/// The countdown script. Its hash is in [`CONTENT_SECURITY_POLICY`]; a unit test keeps the two in step.
pub const SCRIPT: &str = "(function(){var s=document.getElementById(\"s\"),a=document.getElementById(\"go\"),\
n=parseInt(s.textContent,10);var t=setInterval(function(){n-=1;if(n<=0){clearInterval(t);s.textContent=\"0\";\
location.replace(a.href);}else{s.textContent=String(n);}},1000);})();";

/// The page's style sheet. Its hash is in [`CONTENT_SECURITY_POLICY`].
pub const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;min-height:100vh;display:flex;\
align-items:center;justify-content:center;background:#f6f7f9;color:#1c1e21}main{max-width:36rem;padding:2rem;\
text-align:center}.dest{word-break:break-all;color:#555}a{display:inline-block;margin-top:1rem;padding:.7rem 1.4rem;\
background:#1a73e8;color:#fff;border-radius:.4rem;text-decoration:none}";

/// `Content-Security-Policy` of the interstitial: nothing but the page's own script and style.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; \
script-src 'sha256-VWuTsuKjyBBmMoSK2sZkgHUUBBB1Co1gXv9oD5P+LxE='; \
style-src 'sha256-MxdVlLbO6QGLYeK6Q3lyzW9fL/C3JaQr0Oqmz4qVFT8='; \
base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Renders the page for `destination` (a checked `Location` value) and a countdown of `seconds`.
pub fn render(destination: &str, seconds: u32) -> String {
    let href = escape_html(destination);
    let shown = escape_html(display_text(destination));
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<meta name=\"robots\" content=\"noindex,nofollow\">\
<meta name=\"referrer\" content=\"strict-origin-when-cross-origin\">\
<meta http-equiv=\"refresh\" content=\"{seconds};url={href}\">\
<title>Redirecting…</title><style>{STYLE}</style></head>\
<body><main><p>You are leaving for</p><p class=\"dest\">{shown}</p>\
<p>Continuing in <span id=\"s\">{seconds}</span> seconds.</p>\
<p><a id=\"go\" href=\"{href}\" rel=\"nofollow\">Continue</a></p></main>\
<script>{SCRIPT}</script></body></html>\n"
    )
}

/// The destination as shown to the visitor: long URLs are cut (on a character boundary) to keep the page short.
fn display_text(destination: &str) -> &str {
    const SHOWN: usize = 200;
    match destination.char_indices().nth(SHOWN) {
        Some((cut, _)) => &destination[..cut],
        None => destination,
    }
}

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use sha2::{Digest, Sha256};

    fn csp_hash(source: &str) -> String {
        let digest = Sha256::digest(source.as_bytes());
        format!(
            "'sha256-{}'",
            base64::engine::general_purpose::STANDARD.encode(digest)
        )
    }

    #[test]
    fn csp_hashes_match_the_inline_code() {
        assert!(CONTENT_SECURITY_POLICY.contains(&format!("script-src {};", csp_hash(SCRIPT))));
        assert!(CONTENT_SECURITY_POLICY.contains(&format!("style-src {};", csp_hash(STYLE))));
    }

    #[test]
    fn destination_is_escaped() {
        let dest = "https://dest.example/?a=1&b=\"x\"'<script>alert(1)</script>";
        let page = render(dest, 5);
        assert!(!page.contains("<script>alert"));
        assert!(!page.contains("\"x\""));
        let escaped = "https://dest.example/?a=1&amp;b=&quot;x&quot;&#39;&lt;script&gt;alert(1)&lt;/script&gt;";
        assert!(page.contains(&format!("href=\"{escaped}\"")));
        assert!(page.contains(&format!("content=\"5;url={escaped}\"")));
        // The only script is ours.
        assert_eq!(page.matches("<script>").count(), 1);
        assert!(page.contains(&format!("<script>{SCRIPT}</script>")));
    }

    #[test]
    fn countdown_and_link() {
        let page = render("https://dest.example/x", 7);
        assert!(page.contains("<span id=\"s\">7</span>"));
        assert!(page.contains("<a id=\"go\" href=\"https://dest.example/x\""));
        assert!(page.contains("content=\"7;url=https://dest.example/x\""));
        assert!(page.contains("noindex"));
    }

    #[test]
    fn long_destinations_are_cut_for_display_only() {
        let dest = format!("https://dest.example/{}", "é".repeat(300));
        let page = render(&dest, 1);
        assert!(page.contains(&format!("href=\"{dest}\"")));
        assert!(page.contains(&format!(">{}</p>", display_text(&dest))));
        assert_eq!(display_text(&dest).chars().count(), 200);
    }
}
