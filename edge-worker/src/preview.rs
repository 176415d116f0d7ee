//! Preview cards (issue 25): a link-preview crawler (Slackbot, Twitterbot, facebookexternalhit, …) asking for a link
//! that has `og_title`, `og_description` or `og_image` gets a small HTML page carrying them as Open Graph and Twitter
//! card tags, with a `<meta http-equiv="refresh">` to the destination, instead of the redirect: chat apps then show
//! the card the link's owner chose rather than whatever the destination's page says. Every value appears only in
//! quoted attributes and text, escaped; the page loads nothing (its CSP allows nothing) and runs no script.

use kv_model::Preview;

use crate::interstitial::escape_html;

/// `Content-Security-Policy` of the preview page: it needs nothing, so it may load and run nothing.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Lowercase tokens of the User-Agents of link-preview crawlers (chat apps, social networks, unfurlers). Matched
/// anywhere in the lowercased User-Agent. Search engines' crawlers are not here: they index, they do not unfurl.
/// Nor apps whose in-app browsers name themselves in a phone's User-Agent (Snapchat, Viber): their users are people,
/// who must get the redirect. Every crawler here is a bot too ([`crate::visitor::Visitor::is_bot`]).
const PREVIEW_CRAWLERS: &[&str] = &[
    "slackbot",
    "slack-imgproxy",
    "twitterbot",
    "facebookexternalhit",
    "facebookcatalog",
    "linkedinbot",
    "whatsapp",
    "discordbot",
    "telegrambot",
    "skypeuripreview",
    "pinterestbot",
    "redditbot",
    "embedly",
    "iframely",
    "vkshare",
    "mastodon",
    "bluesky",
    "cardyb",
];

/// Whether `user_agent` is a link-preview crawler's.
pub fn is_preview_crawler(user_agent: &str) -> bool {
    let ua = user_agent.to_ascii_lowercase();
    PREVIEW_CRAWLERS.iter().any(|token| ua.contains(token))
}

/// The preview page for `destination` (a checked `Location` value). `preview.image` must already be checked (a
/// usable URL whose host is not on the blocklist), or left out.
pub fn render(destination: &str, preview: &Preview) -> String {
    let href = escape_html(destination);
    let mut meta = String::new();
    let mut tag = |attribute: &str, name: &str, value: &str| {
        meta.push_str("<meta ");
        meta.push_str(attribute);
        meta.push_str("=\"");
        meta.push_str(name);
        meta.push_str("\" content=\"");
        meta.push_str(&escape_html(value));
        meta.push_str("\">");
    };
    if let Some(title) = &preview.title {
        tag("property", "og:title", title);
        tag("name", "twitter:title", title);
    }
    if let Some(description) = &preview.description {
        tag("property", "og:description", description);
        tag("name", "twitter:description", description);
    }
    let card = match &preview.image {
        Some(image) => {
            tag("property", "og:image", image);
            tag("name", "twitter:image", image);
            "summary_large_image"
        }
        None => "summary",
    };
    tag("property", "og:type", "website");
    tag("name", "twitter:card", card);
    let title = escape_html(preview.title.as_deref().unwrap_or_default());
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"robots\" content=\"noindex,nofollow\">{meta}\
<meta http-equiv=\"refresh\" content=\"0;url={href}\">\
<title>{title}</title></head>\
<body><p><a href=\"{href}\" rel=\"nofollow\">Continue</a></p></body></html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crawlers_and_browsers() {
        for ua in [
            "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
            "Twitterbot/1.0",
            "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
            "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
            "WhatsApp/2.23.20.0",
            "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
            "TelegramBot (like TwitterBot)",
            "http.rb/5.1.1 (Mastodon/4.2.10; +https://mastodon.social/)",
            "Mozilla/5.0 (compatible; Bluesky Cardyb/1.1; +mailto:support@bsky.app)",
        ] {
            assert!(is_preview_crawler(ua), "{ua}");
        }
        for ua in [
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            // Snapchat's in-app browser: a person on a phone.
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Snapchat/13.2.0.43 (like Safari/8618.2.12.10.6)",
            "",
        ] {
            assert!(!is_preview_crawler(ua), "{ua}");
        }
    }

    #[test]
    fn the_page_escapes_every_value() {
        let page = render(
            "https://dest.example/?a=1&b=\"2\"",
            &Preview {
                title: Some("Sale \"now\" <script>alert(1)</script>".into()),
                description: Some("50% off & more".into()),
                image: Some("https://img.example/card.png?x=1&y=2".into()),
            },
        );
        assert!(page.contains(
            "<meta property=\"og:title\" content=\"Sale &quot;now&quot; &lt;script&gt;alert(1)&lt;/script&gt;\">"
        ));
        assert!(page.contains("<meta property=\"og:description\" content=\"50% off &amp; more\">"));
        assert!(page.contains(
            "<meta property=\"og:image\" content=\"https://img.example/card.png?x=1&amp;y=2\">"
        ));
        assert!(page.contains("<meta name=\"twitter:card\" content=\"summary_large_image\">"));
        assert!(page.contains(
            "<meta http-equiv=\"refresh\" content=\"0;url=https://dest.example/?a=1&amp;b=&quot;2&quot;\">"
        ));
        assert!(!page.contains("<script>"), "no script, escaped or not");
        assert!(!page.contains("<img"), "nothing loaded");
    }

    #[test]
    fn a_card_without_an_image_is_a_summary() {
        let page = render(
            "https://dest.example/",
            &Preview {
                title: Some("T".into()),
                description: None,
                image: None,
            },
        );
        assert!(page.contains("<meta name=\"twitter:card\" content=\"summary\">"));
        assert!(!page.contains("og:image") && !page.contains("og:description"));
    }
}
