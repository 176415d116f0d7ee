//! The password form of a protected link (issue 25): "This link is protected", a "Password" field, a "Continue"
//! button, and what went wrong last time. Served by the edge, it loads nothing and runs no script (its CSP allows
//! only its own style, by hash); it posts to the URL it was shown at, and never names the destination.

use crate::interstitial::escape_html;

/// The page's style sheet. Its hash is in [`CONTENT_SECURITY_POLICY`]; a unit test keeps the two in step.
pub const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;min-height:100vh;display:flex;\
align-items:center;justify-content:center;background:#f6f7f9;color:#1c1e21}main{width:100%;max-width:22rem;\
padding:2rem;box-sizing:border-box}h1{font-size:1.3rem;margin:0 0 1rem}label{display:block;margin-bottom:.3rem}\
input{width:100%;box-sizing:border-box;padding:.6rem;font-size:1rem;border:1px solid #888;border-radius:.4rem}\
button{margin-top:1rem;width:100%;padding:.7rem;font-size:1rem;border:0;border-radius:.4rem;background:#1a73e8;\
color:#fff;cursor:pointer}.notice{color:#b00020;margin:0 0 1rem}";

/// `Content-Security-Policy` of the form: its own style and nothing else. `form-action` allows the page's own
/// origin (the form posts to it) and `https:`: browsers check the redirects that follow a submission against it
/// too, and a right password ends at the link's https destination.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; \
style-src 'sha256-cn0Nt8TMliahvOof2tRIb7LSSGNObw2rCq1dIanLSMY='; \
base-uri 'none'; form-action 'self' https:; frame-ancestors 'none'";

/// What the form says above the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// Nothing: the first visit.
    None,
    /// The password given was wrong.
    Wrong,
    /// Too many wrong attempts: seconds until the next is allowed.
    Wait(u64),
    /// The password could not be checked (the origin's throttle did not answer).
    Unavailable,
}

impl Notice {
    /// The page's status: `200` to ask (again), `429` while the visitor must wait, `503` when nothing can be
    /// checked.
    pub fn status(self) -> u16 {
        match self {
            Notice::None | Notice::Wrong => 200,
            Notice::Wait(_) => 429,
            Notice::Unavailable => 503,
        }
    }

    fn text(self) -> Option<String> {
        match self {
            Notice::None => None,
            Notice::Wrong => Some("Wrong password. Try again.".into()),
            Notice::Wait(secs) => {
                let minutes = secs.div_ceil(60).max(1);
                let unit = if minutes == 1 { "minute" } else { "minutes" };
                Some(format!(
                    "Too many wrong attempts. Wait {minutes} {unit} before trying again."
                ))
            }
            Notice::Unavailable => {
                Some("The password cannot be checked right now. Try again in a moment.".into())
            }
        }
    }
}

/// The page. The field's `maxlength` is 256: browsers count UTF-16 units, and a 128-character password (the
/// API's bound, in characters) can take 256 of them; the worker counts the characters.
pub fn render(notice: Notice) -> String {
    let notice = notice.text().map_or_else(String::new, |t| {
        format!("<p class=\"notice\" role=\"alert\">{}</p>", escape_html(&t))
    });
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<meta name=\"robots\" content=\"noindex,nofollow\">\
<title>This link is protected</title><style>{STYLE}</style></head>\
<body><main><h1>This link is protected</h1>{notice}\
<form method=\"post\"><label for=\"password\">Password</label>\
<input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"current-password\" required \
maxlength=\"256\" autofocus><button type=\"submit\">Continue</button></form></main></body></html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use sha2::{Digest, Sha256};

    #[test]
    fn the_policy_allows_exactly_the_style() {
        let digest = Sha256::digest(STYLE.as_bytes());
        let hash = base64::engine::general_purpose::STANDARD.encode(digest);
        assert!(
            CONTENT_SECURITY_POLICY.contains(&format!("style-src 'sha256-{hash}'")),
            "style hash: {hash}"
        );
        assert!(!CONTENT_SECURITY_POLICY.contains("script-src"));
    }

    #[test]
    fn the_form() {
        let page = render(Notice::None);
        assert!(page.contains("<h1>This link is protected</h1>"));
        assert!(page.contains("<label for=\"password\">Password</label>"));
        assert!(page.contains("<button type=\"submit\">Continue</button>"));
        assert!(
            page.contains("<form method=\"post\">"),
            "posts to where it is"
        );
        assert!(!page.contains("notice\""), "nothing to say yet");
        assert!(
            !page.contains("<script") && !page.contains("http"),
            "loads nothing"
        );
        assert!(render(Notice::Wrong).contains("Wrong password. Try again."));
        assert!(render(Notice::Wait(61)).contains("Wait 2 minutes"));
        assert!(render(Notice::Wait(5)).contains("Wait 1 minute "));
        assert!(render(Notice::Unavailable).contains("cannot be checked right now"));
        assert_eq!(Notice::None.status(), 200);
        assert_eq!(Notice::Wrong.status(), 200);
        assert_eq!(Notice::Wait(1).status(), 429);
        assert_eq!(Notice::Unavailable.status(), 503);
    }
}
