//! What the edge knows about a visitor: country, device, language and whether it is a bot.

use kv_model::Device;

/// Cloudflare bot scores below this are "likely automated" (Cloudflare's own threshold: 1–29).
pub const BOT_SCORE_THRESHOLD: u8 = 30;

/// The facts about a visitor that group rules look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Visitor {
    /// ISO 3166-1 alpha-2 country code, uppercase: `request.cf.country`, else the `CF-IPCountry` header.
    /// `None` when neither is present, or for Cloudflare's "unknown" (`XX`) and Tor (`T1`) codes.
    pub country: Option<String>,
    /// The `User-Agent` header (empty when missing).
    pub user_agent: String,
    /// `request.cf.botManagement.score` (1–99), only present with Cloudflare Bot Management.
    pub bot_score: Option<u8>,
    /// `request.cf.botManagement.verifiedBot`: a known good bot (search engines, link previews) is still a bot.
    pub verified_bot: bool,
    /// The `Accept-Language` header, at most [`MAX_ACCEPT_LANGUAGE`] bytes; read only for a link whose rules may
    /// look at the language (empty otherwise, and when missing).
    pub accept_language: String,
    /// Whether the visitor holds a valid password cookie for the link asked for (`crate::password`): checked by the
    /// shell, only for a link with a password.
    pub unlocked: bool,
    /// `request.cf.region` (a name, `Bavaria`), at most [`kv_model::MAX_FACT_CHARS`] characters. For click reports
    /// only: no rule looks at it.
    pub region: Option<String>,
    /// `request.cf.city`, bounded like the region.
    pub city: Option<String>,
}

/// Longest `Accept-Language` kept: browsers send under 100 bytes; the first preference is all the rules read.
pub const MAX_ACCEPT_LANGUAGE: usize = 256;

impl Visitor {
    /// No facts at all, as [`Visitor::default`] gives them, in a constant (for a `static` to lend).
    pub const NONE: Visitor = Visitor {
        country: None,
        user_agent: String::new(),
        bot_score: None,
        verified_bot: false,
        accept_language: String::new(),
        unlocked: false,
        region: None,
        city: None,
    };

    /// Builds the visitor facts from the raw request values; `cf_country` wins over the header.
    pub fn new(
        cf_country: Option<&str>,
        header_country: Option<&str>,
        user_agent: Option<&str>,
        bot_score: Option<f64>,
        verified_bot: bool,
    ) -> Self {
        Visitor {
            country: cf_country
                .and_then(country_code)
                .or_else(|| header_country.and_then(country_code)),
            user_agent: user_agent.unwrap_or_default().to_owned(),
            // Scores outside 1–99 (0 means "not computed") carry no information.
            bot_score: bot_score
                .filter(|s| (1.0..=99.0).contains(s))
                .map(|s| s as u8),
            verified_bot,
            accept_language: String::new(),
            unlocked: false,
            region: None,
            city: None,
        }
    }

    /// The visitor with its `Accept-Language` (cut at [`MAX_ACCEPT_LANGUAGE`] bytes, at a character boundary).
    pub fn with_accept_language(mut self, header: Option<&str>) -> Self {
        let header = header.unwrap_or_default();
        let mut end = header.len().min(MAX_ACCEPT_LANGUAGE);
        while !header.is_char_boundary(end) {
            end -= 1;
        }
        self.accept_language = header[..end].to_owned();
        self
    }

    /// The visitor with its region and city, for click reports ([`place`] bounds them).
    pub fn with_place(mut self, region: Option<&str>, city: Option<&str>) -> Self {
        self.region = place(region);
        self.city = place(city);
        self
    }

    /// Whether the visitor is a bot: a verified bot, a low Cloudflare bot score, or a bot-like User-Agent.
    pub fn is_bot(&self) -> bool {
        self.verified_bot
            || self.bot_score.is_some_and(|s| s < BOT_SCORE_THRESHOLD)
            || is_bot_user_agent(&self.user_agent)
            // Link-preview crawlers whose agents name no bot (Mastodon's `http.rb … (Mastodon/4.x)`, Bluesky's
            // `Cardyb`): a group that blocks bots blocks them, and they are never counted nor shown an interstitial.
            || crate::preview::is_preview_crawler(&self.user_agent)
    }
}

/// The kind of device a User-Agent names (click analytics and smart links' `device` rules both read it, so the
/// two agree about a visitor). iPadOS 13+ Safari presents itself as a Mac by default, so such iPads count as desktop:
/// the User-Agent cannot tell them apart.
pub fn device(user_agent: &str) -> Device {
    let ua = user_agent.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| ua.contains(n));
    let android = ua.contains("android");
    if has(&["ipad", "tablet", "kindle", "silk/", "playbook"])
        || (android && !ua.contains("mobile"))
    {
        Device::Tablet
    } else if android
        || has(&[
            "iphone",
            "ipod",
            "mobile",
            "windows phone",
            "blackberry",
            "opera mini",
        ])
    {
        Device::Mobile
    } else if has(&["smart-tv", "smarttv", "playstation", "xbox", "nintendo"]) {
        Device::Other
    } else if has(&[
        "windows nt",
        "macintosh",
        "mac os x",
        "x11",
        "linux",
        "cros",
    ]) {
        Device::Desktop
    } else {
        Device::Other
    }
}

/// A region's or city's name: trimmed, at most [`kv_model::MAX_FACT_CHARS`] characters; `None` when empty.
fn place(raw: Option<&str>) -> Option<String> {
    let name = kv_model::truncate_chars(raw?.trim(), kv_model::MAX_FACT_CHARS).trim_end();
    (!name.is_empty()).then(|| name.to_owned())
}

/// A two-letter country code, uppercased; `XX` (unknown) and `T1` (Tor) count as no country.
fn country_code(raw: &str) -> Option<String> {
    let code = raw.trim();
    let valid = code.len() == 2 && code.bytes().all(|b| b.is_ascii_alphanumeric());
    let code = code.to_ascii_uppercase();
    (valid && code != "XX" && code != "T1").then_some(code)
}

/// Lowercase substrings that mark a User-Agent as automated. Grouped by kind; matched anywhere in the lowercased
/// User-Agent. Generic words are anchored (`bot/`, `bot;`) where a bare word would hit real phones (`CUBOT NOTE 20`).
const BOT_PATTERNS: &[&str] = &[
    // Crawlers and generic markers.
    "bot/",
    "bot;",
    "-bot",
    "_bot",
    "crawler",
    "crawling",
    "spider",
    "slurp",
    "archiver",
    "mediapartners-google",
    "adsbot",
    "feedfetcher",
    "bingpreview",
    "yandex",
    "baiduspider",
    "petalbot",
    "semrush",
    "ahrefs",
    "mj12bot",
    "dotbot",
    "bytespider",
    "gptbot",
    "ccbot",
    "claudebot",
    "perplexity",
    "amazonbot",
    "applebot",
    // Link-preview fetchers.
    "facebookexternalhit",
    "facebookcatalog",
    "meta-externalagent",
    "twitterbot",
    "slackbot",
    "slack-imgproxy",
    "discordbot",
    "telegrambot",
    "whatsapp",
    "linkedinbot",
    "skypeuripreview",
    "pinterest",
    "redditbot",
    "embedly",
    "vkshare",
    "viber",
    "snapchat",
    "iframely",
    "google-pagerenderer",
    "outbrain",
    "quora link preview",
    "bitlybot",
    "tumblr",
    "mattermost",
    "rocket.chat",
    "zoominfobot",
    "preview",
    // HTTP libraries and command-line clients.
    "curl/",
    "wget/",
    "python-requests",
    "python-urllib",
    "aiohttp",
    "httpx",
    "urllib",
    "go-http-client",
    "java/",
    "okhttp",
    "apache-httpclient",
    "jakarta commons",
    "libwww-perl",
    "lwp::",
    "node-fetch",
    "undici",
    "axios/",
    "got (",
    "reqwest",
    "guzzlehttp",
    "ruby",
    "faraday",
    "httpie",
    "postmanruntime",
    "insomnia",
    "powershell",
    "winhttp",
    "libcurl",
    "scrapy",
    "http_request",
    "dart:io",
    "restsharp",
    "php/",
    // Headless and automated browsers.
    "headlesschrome",
    "headless",
    "phantomjs",
    "puppeteer",
    "playwright",
    "selenium",
    "webdriver",
    "electron/",
    "lighthouse",
    "chrome-lighthouse",
    "pagespeed",
    "gtmetrix",
    "pingdom",
    "uptimerobot",
    "wkhtmlto",
    "prerender",
    "splash",
];

/// Whether a User-Agent looks automated. An empty or missing User-Agent counts as a bot: browsers always send one.
pub fn is_bot_user_agent(user_agent: &str) -> bool {
    let ua = user_agent.trim();
    if ua.is_empty() {
        return true;
    }
    let ua = ua.to_ascii_lowercase();
    BOT_PATTERNS.iter().any(|p| ua.contains(p))
}

/// Whether `country` passes a group's allow and block lists (codes compared case-insensitively).
///
/// A non-empty allow list admits only the listed countries, so a visitor whose country is unknown is refused;
/// the block list refuses the listed countries.
pub fn country_allowed(country: Option<&str>, allow: &[String], block: &[String]) -> bool {
    let listed = |list: &[String], c: &str| list.iter().any(|l| l.trim().eq_ignore_ascii_case(c));
    if !allow.is_empty() && !country.is_some_and(|c| listed(allow, c)) {
        return false;
    }
    !country.is_some_and(|c| listed(block, c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_is_the_default() {
        assert_eq!(Visitor::NONE, Visitor::default());
    }

    #[test]
    fn preview_crawlers_that_name_no_bot_are_bots() {
        for ua in [
            "http.rb/5.1.1 (Mastodon/4.2.10; +https://mastodon.social/)",
            "Mozilla/5.0 (compatible; Bluesky Cardyb/1.1; +mailto:support@bsky.app)",
        ] {
            assert!(
                !is_bot_user_agent(ua),
                "not by the bot patterns alone: {ua}"
            );
            assert!(
                Visitor::new(None, None, Some(ua), None, false).is_bot(),
                "{ua}"
            );
        }
    }

    const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) \
                          Chrome/126.0.0.0 Safari/537.36";
    const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 \
                          (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
    const CUBOT: &str = "Mozilla/5.0 (Linux; Android 9; CUBOT_X19) AppleWebKit/537.36 (KHTML, like Gecko) \
                         Chrome/120.0.0.0 Mobile Safari/537.36";
    const CUBOT_NOTE: &str = "Mozilla/5.0 (Linux; Android 10; CUBOT NOTE 20) AppleWebKit/537.36 (KHTML, like Gecko) \
                              Chrome/120.0.0.0 Mobile Safari/537.36";
    const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

    #[test]
    fn browsers_are_not_bots() {
        for ua in [CHROME, IPHONE, CUBOT, CUBOT_NOTE, FIREFOX] {
            assert!(!is_bot_user_agent(ua), "{ua}");
        }
    }

    #[test]
    fn bots() {
        for ua in [
            "",
            "   ",
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
            "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
            "Twitterbot/1.0",
            "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
            "WhatsApp/2.23.20.0",
            "TelegramBot (like TwitterBot)",
            "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
            "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
            "curl/8.5.0",
            "Wget/1.21.4",
            "python-requests/2.32.3",
            "Go-http-client/1.1",
            "okhttp/4.12.0",
            "node-fetch/1.0 (+https://github.com/bitinn/node-fetch)",
            "axios/1.7.2",
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/126.0.0.0 \
             Safari/537.36",
            "Mozilla/5.0 (Unknown; Linux x86_64) AppleWebKit/538.1 (KHTML, like Gecko) PhantomJS/2.1.1 \
             Safari/538.1",
        ] {
            assert!(is_bot_user_agent(ua), "{ua}");
        }
    }

    #[test]
    fn bot_score_and_verified_bots() {
        let human = Visitor::new(None, None, Some(CHROME), Some(99.0), false);
        assert!(!human.is_bot());
        assert!(Visitor::new(None, None, Some(CHROME), Some(29.0), false).is_bot());
        assert!(!Visitor::new(None, None, Some(CHROME), Some(30.0), false).is_bot());
        assert!(
            !Visitor::new(None, None, Some(CHROME), Some(0.0), false).is_bot(),
            "0 = not scored"
        );
        assert!(Visitor::new(None, None, Some(CHROME), None, true).is_bot());
        assert!(Visitor::new(None, None, None, None, false).is_bot());
    }

    #[test]
    fn country_sources() {
        let v = |cf, header| Visitor::new(cf, header, Some(CHROME), None, false).country;
        assert_eq!(v(Some("DE"), Some("US")).as_deref(), Some("DE"));
        assert_eq!(v(None, Some("us")).as_deref(), Some("US"));
        assert_eq!(v(Some("XX"), Some("FR")).as_deref(), Some("FR"));
        assert_eq!(v(Some("T1"), None), None);
        assert_eq!(v(Some("USA"), None), None);
        assert_eq!(v(None, None), None);
    }

    #[test]
    fn country_rules() {
        let list = |codes: &[&str]| codes.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        let (none, us_de, ru) = (list(&[]), list(&["US", "de"]), list(&["RU"]));
        assert!(country_allowed(None, &none, &none));
        assert!(country_allowed(Some("FR"), &none, &ru));
        assert!(!country_allowed(Some("RU"), &none, &ru));
        assert!(country_allowed(None, &none, &ru));
        assert!(country_allowed(Some("DE"), &us_de, &ru));
        assert!(!country_allowed(Some("FR"), &us_de, &ru));
        assert!(!country_allowed(None, &us_de, &none));
        assert!(
            !country_allowed(Some("US"), &us_de, &list(&["us"])),
            "block wins"
        );
    }

    #[test]
    fn places_are_trimmed_and_bounded() {
        let v = Visitor::default().with_place(Some(" Bavaria "), Some(" "));
        assert_eq!((v.region.as_deref(), v.city), (Some("Bavaria"), None));
        let long = "ü".repeat(150);
        assert_eq!(
            Visitor::default()
                .with_place(None, Some(&long))
                .city
                .map(|c| c.chars().count()),
            Some(100)
        );
    }
}
