//! Responses as plain data: status, headers and body, which the shell copies into a Workers `Response`.

use crate::interstitial;

/// Keeps redirects out of shared caches and makes browsers ask again: links can be paused, rules can change,
/// and each visit may count as a click.
pub const CACHE_CONTROL: &str = "private, no-store, max-age=0";

/// Destinations learn the origin of the referring page, never its path: the short link's own path (a dynamic
/// link's signature) must not leak to the destination through `Referer`.
pub const REFERRER_POLICY: &str = "strict-origin-when-cross-origin";

/// Fallbacks and interstitials are not content; search engines should not index them.
pub const X_ROBOTS_TAG: &str = "noindex, nofollow";

/// What a request ends with, fallback URLs resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Page {
    /// A redirect to a link's destination, with its status: 302 unless the link's owner chose 301, 307 or 308
    /// (issue 25's `redirect_status`; a permanent redirect would be cached by browsers and outlive a paused link,
    /// which is the owner's to accept, never the default).
    Destination(String, u16),
    /// `302` to a fallback (the domain's, the group's access fallback or the default).
    Fallback(String),
    /// `200` with the monetization interstitial.
    Interstitial {
        /// Where the page continues to.
        destination: String,
        /// Countdown length.
        seconds: u32,
    },
    /// `200` with a link's preview card ([`crate::preview`]).
    Preview {
        /// Where the page's refresh goes.
        destination: String,
        /// The card.
        preview: kv_model::Preview,
    },
    /// A protected link's password form ([`crate::password_form`]), with what went wrong last time; its status is
    /// the notice's (`200`, `429` with `Retry-After`, `503`).
    PasswordForm(crate::password_form::Notice),
    /// `303` back to the link (`location`: its path and query) after its form was posted: with the cookie that
    /// remembers a right password (`set_cookie`: a `Set-Cookie` value), or without one when the link was no longer
    /// at its form (the `GET` then answers as it does).
    SeeOther {
        /// The link's path and query, as requested.
        location: String,
        /// The cookie, after a right password.
        set_cookie: Option<String>,
    },
    /// `404`: a fallback was needed but none is configured (nor the worker's default).
    NoFallback,
    /// `405` for methods other than `GET` and `HEAD`.
    MethodNotAllowed,
}

/// A response: status, headers, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Header names and values.
    pub headers: Vec<(&'static str, String)>,
    /// The body; empty for redirects.
    pub body: String,
}

impl Reply {
    /// The value of header `name`, if set.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A JSON response (sync route), never cached.
    pub fn json(status: u16, body: String) -> Reply {
        Reply {
            status,
            headers: vec![
                ("Content-Type", "application/json".into()),
                ("Cache-Control", CACHE_CONTROL.into()),
            ],
            body,
        }
    }
}

/// A redirect to `location` with `status`, marked `noindex` (a fallback) or not: [`reply`]'s for
/// [`Page::Destination`] and [`Page::Fallback`], whatever the method. The fast path sets the same headers from
/// [`redirect_headers`] on a `Response` of its own.
pub fn redirect(location: String, status: u16, noindex: bool) -> Reply {
    // The location moved in, not copied from `redirect_headers`' borrowed one (its first pair).
    let mut headers: Vec<(&'static str, String)> = Vec::with_capacity(4);
    headers.push(("Location", location));
    headers.extend(
        redirect_headers("")[1..]
            .iter()
            .map(|&(name, value)| (name, value.to_owned())),
    );
    if noindex {
        headers.push(("X-Robots-Tag", X_ROBOTS_TAG.into()));
    }
    Reply {
        status,
        headers,
        body: String::new(),
    }
}

/// The headers of [`redirect`]'s reply to `location` when not `noindex`, borrowed: the fast path sets them on a
/// `Response` of its own without copying the constants into `String`s first.
pub fn redirect_headers(location: &str) -> [(&'static str, &str); 3] {
    // The location first: `redirect` moves its own in and takes the rest from here.
    [
        ("Location", location),
        ("Cache-Control", CACHE_CONTROL),
        ("Referrer-Policy", REFERRER_POLICY),
    ]
}

/// The response for a page. `HEAD` requests get the same status and headers with no body.
pub fn reply(page: &Page, head: bool) -> Reply {
    let text = |status: u16, body: &str, extra: Option<(&'static str, String)>| {
        let mut headers = vec![
            ("Content-Type", "text/plain; charset=utf-8".into()),
            ("Cache-Control", CACHE_CONTROL.into()),
            ("X-Robots-Tag", X_ROBOTS_TAG.into()),
        ];
        headers.extend(extra);
        Reply {
            status,
            headers,
            body: if head { String::new() } else { body.into() },
        }
    };
    // A page of our own (the interstitial, a preview card, the password form): its CSP, never framed or sniffed;
    // rendered only for `GET`.
    let html = |status: u16, csp: &'static str, render: &dyn Fn() -> String| Reply {
        status,
        headers: vec![
            ("Content-Type", "text/html; charset=utf-8".into()),
            ("Cache-Control", CACHE_CONTROL.into()),
            ("Referrer-Policy", REFERRER_POLICY.into()),
            ("X-Robots-Tag", X_ROBOTS_TAG.into()),
            ("Content-Security-Policy", csp.into()),
            ("X-Content-Type-Options", "nosniff".into()),
            ("X-Frame-Options", "DENY".into()),
        ],
        body: if head { String::new() } else { render() },
    };
    match page {
        Page::Destination(location, status) => redirect(location.clone(), *status, false),
        Page::Fallback(location) => redirect(location.clone(), 302, true),
        Page::Interstitial {
            destination,
            seconds,
        } => html(200, interstitial::CONTENT_SECURITY_POLICY, &|| {
            interstitial::render(destination, *seconds)
        }),
        Page::Preview {
            destination,
            preview,
        } => html(200, crate::preview::CONTENT_SECURITY_POLICY, &|| {
            crate::preview::render(destination, preview)
        }),
        Page::PasswordForm(notice) => {
            let mut reply = html(
                notice.status(),
                crate::password_form::CONTENT_SECURITY_POLICY,
                &|| crate::password_form::render(*notice),
            );
            if let crate::password_form::Notice::Wait(secs) = notice {
                reply.headers.push(("Retry-After", secs.to_string()));
            }
            reply
        }
        Page::SeeOther {
            location,
            set_cookie,
        } => {
            let mut reply = redirect(location.clone(), 303, true);
            if let Some(cookie) = set_cookie {
                reply.headers.push(("Set-Cookie", cookie.clone()));
            }
            reply
        }
        Page::NoFallback => text(404, "Not found\n", None),
        Page::MethodNotAllowed => text(
            405,
            "Method not allowed\n",
            Some(("Allow", "GET, HEAD".into())),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_are_302_and_private() {
        let r = reply(&Page::Destination("https://d.example/".into(), 302), false);
        assert_eq!(r.status, 302);
        assert_eq!(r.header("location"), Some("https://d.example/"));
        assert_eq!(r.header("cache-control"), Some(CACHE_CONTROL));
        assert_eq!(r.header("referrer-policy"), Some(REFERRER_POLICY));
        assert_eq!(r.header("x-robots-tag"), None);
        assert!(r.body.is_empty());

        // The edge's fast path keeps one `init` per destination for GET and HEAD alike (shell/fast.rs).
        assert_eq!(
            r,
            reply(&Page::Destination("https://d.example/".into(), 302), true)
        );

        let f = reply(&Page::Fallback("https://f.example/".into()), false);
        assert_eq!(f.status, 302);
        assert_eq!(f.header("x-robots-tag"), Some(X_ROBOTS_TAG));
    }

    #[test]
    fn interstitial_page() {
        let page = Page::Interstitial {
            destination: "https://d.example/".into(),
            seconds: 3,
        };
        let r = reply(&page, false);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("x-robots-tag"), Some(X_ROBOTS_TAG));
        assert!(r.header("content-type").unwrap().starts_with("text/html"));
        assert!(r.body.contains("href=\"https://d.example/\""));
        assert!(reply(&page, true).body.is_empty());
    }

    #[test]
    fn password_pages() {
        use crate::password_form::Notice;
        let form = reply(&Page::PasswordForm(Notice::None), false);
        assert_eq!(form.status, 200);
        assert_eq!(
            form.header("content-security-policy"),
            Some(crate::password_form::CONTENT_SECURITY_POLICY)
        );
        assert_eq!(form.header("cache-control"), Some(CACHE_CONTROL));
        assert_eq!(form.header("x-frame-options"), Some("DENY"));
        assert!(form.body.contains("This link is protected"));
        let wait = reply(&Page::PasswordForm(Notice::Wait(90)), false);
        assert_eq!((wait.status, wait.header("retry-after")), (429, Some("90")));
        assert!(
            reply(&Page::PasswordForm(Notice::Wrong), true)
                .body
                .is_empty()
        );
        let unlocked = reply(
            &Page::SeeOther {
                location: "/abc?x=1".into(),
                set_cookie: Some("sl_pw=1.x; Path=/abc".into()),
            },
            false,
        );
        assert_eq!(unlocked.status, 303);
        assert_eq!(unlocked.header("location"), Some("/abc?x=1"));
        assert_eq!(unlocked.header("set-cookie"), Some("sl_pw=1.x; Path=/abc"));
        assert_eq!(unlocked.header("cache-control"), Some(CACHE_CONTROL));
        let back = reply(
            &Page::SeeOther {
                location: "/abc".into(),
                set_cookie: None,
            },
            false,
        );
        assert_eq!((back.status, back.header("set-cookie")), (303, None));
    }

    #[test]
    fn errors() {
        assert_eq!(reply(&Page::NoFallback, false).status, 404);
        let r = reply(&Page::MethodNotAllowed, false);
        assert_eq!(r.status, 405);
        assert_eq!(r.header("allow"), Some("GET, HEAD"));
    }
}
