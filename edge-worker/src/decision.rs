//! The redirect decision: a plain function of the request facts, the KV records and the time.
//!
//! The shell reads the records (through the isolate cache), calls [`decide_persistent`] or [`decide_dynamic`],
//! resolves a fallback with [`domain_fallback`] only when the outcome needs one (so a hot link never reads its
//! domain record nor checks a fallback against the blocklist), and turns the result into a response with
//! [`crate::reply`]. No fallback whose host is on the blocklist is ever used ([`usable_fallback`]): the group's
//! falls through to the domain's, the domain's to the default, and with none left the visitor gets a `404`.

use kv_model::{DomainRecord, GroupRecord, GroupSettings, LinkRecord, Preview};
use std::cell::{Cell, OnceCell, RefCell};

use shared_crypto::{
    Blocklist, GroupKey, KEY_LEN, Payload, Sealed, TokenCipher, TokenError, extract_host,
};
use subtle::ConstantTimeEq;

use crate::bounded::BoundedMap;
use crate::forward_query::forward_query;
use crate::preview;
use crate::smart;
use crate::visitor::{Visitor, country_allowed};

/// Longest interstitial countdown honoured, whatever the group says: visitors should not wait minutes.
pub const MAX_INTERSTITIAL_SECONDS: u32 = 60;

/// Bytes (estimated: token, payload, overhead) the opened-token memo may hold in an isolate, all groups together.
/// Tokens are as long as a request allows (a 2,048-character destination with a long `back_param` makes one of
/// 15 KB), and an isolate may hold thousands of groups, so a bound per group would not bound the isolate (it had
/// 256 tokens per group: 15 KB × 256 × thousands of groups is past the isolate's 128 MB). 4 MiB keeps a few
/// hundred of the largest tokens, and thousands of usual ones; past it the oldest go, and a token opened again
/// costs one decryption.
pub const TOKEN_MEMO_BUDGET_BYTES: usize = 4 * 1024 * 1024;

/// A token a group opened, in the isolate's memo.
#[derive(Debug)]
struct Opened {
    /// [`Group::serial`] of the group that opened it: only that group may use the payload (another group, or a
    /// newer record of the same group, opens the token itself).
    group: u64,
    payload: Payload,
}

thread_local! {
    /// The opened tokens of every group of the isolate, by token, within [`TOKEN_MEMO_BUDGET_BYTES`]. One map for
    /// the isolate rather than one per group, so the budget holds whatever the number of groups; a record
    /// replaced (a reload, a rotated key) leaves its entries to age out. Tokens that failed to open are not kept:
    /// anyone can make those, so they could only crowd out the real ones.
    static OPENED: RefCell<BoundedMap> = RefCell::new(BoundedMap::new(TOKEN_MEMO_BUDGET_BYTES));
    /// The serial of the last [`Group`] made.
    static LAST_SERIAL: Cell<u64> = const { Cell::new(0) };
    /// Whether `OPENED` was ever written: until then a lookup finds nothing without touching it, so that a new
    /// isolate's first visit compiles neither the map's creation nor its lookup (BENCHMARKS.md, issue 28).
    static MEMO_WRITTEN: Cell<bool> = const { Cell::new(false) };
}

/// The memo's entry for `token` opened by the record with `serial`, through `read`; `None` before the memo's first
/// write.
fn memo_lookup<R>(token: &str, serial: u64, read: impl FnOnce(&Opened) -> R) -> Option<R> {
    if !MEMO_WRITTEN.with(Cell::get) {
        return None;
    }
    OPENED.with(|m| {
        m.borrow()
            .get::<Opened>(token)
            .filter(|o| o.group == serial)
            .map(read)
    })
}

/// The estimated bytes the opened-token memo holds in this isolate (at most [`TOKEN_MEMO_BUDGET_BYTES`]).
pub fn token_memo_bytes() -> usize {
    OPENED.with(|m| m.borrow().bytes())
}

/// A token's payload from its plaintext: by the scanner of the shape the origin and the snippets write
/// ([`crate::plain_records::plain_payload`]), else by serde_json, which gives the same payload or the error.
fn payload_of(plaintext: &[u8]) -> Result<Payload, TokenError> {
    match std::str::from_utf8(plaintext) {
        Ok(text) => payload_of_text(text),
        Err(_) => Ok(Payload::from_json(plaintext)?),
    }
}

/// [`payload_of`] for a plaintext already known to be UTF-8 text (WebCrypto's, decoded strictly by the entry
/// module): no UTF-8 check of its own, which a new isolate's first visit to a dynamic link would compile for it.
fn payload_of_text(plaintext: &str) -> Result<Payload, TokenError> {
    match crate::plain_records::plain_payload(plaintext) {
        Some(payload) => Ok(payload),
        None => Ok(Payload::from_json(plaintext.as_bytes())?),
    }
}

/// A group ready to evaluate tokens: the cipher is built once per cached record, not per request, and the tokens
/// it opened are kept with their payloads (in the isolate's memo, `OPENED`), so the many visitors of one
/// campaign's link cost one decryption per isolate while the record is cached (its TTL), not one each. Only the
/// decryption is kept: expiry, destination rules, the blocklist and the group's rules are checked on every
/// request, as a token's fate can change with the clock and the blocklist. A new key comes as a new record, hence
/// a new `Group` with a serial of its own, which none of the memo's entries carries.
#[derive(Debug, Clone)]
pub struct Group {
    /// The group key (its `Debug` is redacted).
    key: GroupKey,
    /// The AES-256-GCM cipher under the key, built when this group first decrypts a token itself: a new isolate's
    /// first visit opens its token with WebCrypto ([`Group::opened_payload`]), and compiles no key schedule.
    cipher: OnceCell<TokenCipher>,
    /// The group's settings.
    pub settings: GroupSettings,
    /// The hosts of its account's enabled custom domains, as its record names them
    /// ([`GroupRecord::enabled_hosts`]; [`crate::named_hosts`]).
    enabled_hosts: Vec<String>,
    /// Which memo entries are this record's (a clone shares them: same key).
    serial: u64,
}

impl Group {
    /// The group of a KV record; `None` when its key is not a valid base64url 32-byte key (treated as missing).
    pub fn from_record(record: GroupRecord) -> Option<Group> {
        let key = GroupKey::from_base64url(&record.key).ok()?;
        let serial = LAST_SERIAL.with(|s| {
            s.set(s.get() + 1);
            s.get()
        });
        Some(Group {
            key,
            cipher: OnceCell::new(),
            settings: record.settings,
            enabled_hosts: record.enabled_hosts,
            serial,
        })
    }

    /// Whether the group's record names `host` as one of its account's enabled custom domains.
    pub fn names_host(&self, host: &str) -> bool {
        kv_model::enabled_host(&self.enabled_hosts, host)
    }

    /// The redirect URL of `token` at `now_seconds`, as [`TokenCipher::evaluate`] gives it, decrypting the token
    /// only the first time this group sees it (while the memo keeps it).
    pub fn evaluate<B: Blocklist + ?Sized>(
        &self,
        token: &str,
        now_seconds: i64,
        blocklist: &B,
    ) -> Result<String, TokenError> {
        let seen = memo_lookup(token, self.serial, |o| {
            o.payload.redirect_url(now_seconds, blocklist)
        });
        if let Some(redirect) = seen {
            return redirect;
        }
        let sealed = Sealed::parse(token)?;
        let plaintext = self
            .cipher
            .get_or_init(|| TokenCipher::new(&self.key))
            .open_sealed(sealed)?;
        let payload = payload_of(&plaintext)?;
        let redirect = payload.redirect_url(now_seconds, blocklist);
        self.keep_opened(token, payload);
        redirect
    }

    /// What another implementation of AES-GCM needs to open `token` under this record's key (WebCrypto's, on a
    /// visit through the first-visit path: `shell::fast`): the key (32 bytes), the IV (12), then the ciphertext and
    /// its tag. `None` for a token that does not decode, which [`Group::evaluate`] refuses before any decryption.
    pub fn sealed_for(&self, token: &str) -> Option<Vec<u8>> {
        let sealed = Sealed::parse(token).ok()?;
        let (iv, data) = (sealed.iv(), sealed.ciphertext_and_tag());
        let mut bytes = Vec::with_capacity(KEY_LEN + iv.len() + data.len());
        bytes.extend_from_slice(self.key.as_bytes());
        bytes.extend_from_slice(iv);
        bytes.extend_from_slice(data);
        Some(bytes)
    }

    /// The payload of `plaintext` (UTF-8 text), which another implementation of AES-GCM opened from `sealed`, as this record's
    /// opening of `token`: only when `sealed` is what [`Group::sealed_for`] gives for `token` under this record's
    /// key (the key compared in constant time). What was opened under another key (the group's record replaced
    /// while WebCrypto worked, a rotated key) or from another token gives `None`, as does a plaintext whose payload
    /// does not read: [`Group::evaluate`] then opens the token itself, and gives the answer it gives any such token.
    /// Not kept in the memo: [`Group::keep_opened`] does that, after the response on a first visit.
    pub fn opened_payload(&self, token: &str, sealed: &[u8], plaintext: &str) -> Option<Payload> {
        let expected = self.sealed_for(token)?;
        if sealed.len() != expected.len() {
            return None;
        }
        // The key in constant time; the IV, ciphertext and tag are the visitor's own token.
        let ((key, rest), (expected_key, expected_rest)) =
            (sealed.split_at(KEY_LEN), expected.split_at(KEY_LEN));
        let same_key: bool = key.ct_eq(expected_key).into();
        if !(same_key && rest == expected_rest) {
            return None;
        }
        payload_of_text(plaintext).ok()
    }

    /// Keeps `payload` in the memo as this record's opening of `token`, so that [`Group::evaluate`] decrypts it no
    /// more. Only for a payload this record opened: [`Group::evaluate`]'s own, or [`Group::opened_payload`]'s.
    pub fn keep_opened(&self, token: &str, payload: Payload) {
        let bytes = std::mem::size_of::<Opened>()
            + payload.destination_url.len()
            + payload.back_param.as_ref().map_or(0, String::len);
        MEMO_WRITTEN.with(|w| w.set(true));
        OPENED.with(|m| {
            m.borrow_mut().insert(
                token,
                Opened {
                    group: self.serial,
                    payload,
                },
                bytes,
            )
        });
    }

    /// The expiry (`expires_at`, UNIX seconds) of a token this group has opened: `Some(None)` for one that does
    /// not expire, `None` for a token not in the memo.
    pub fn opened_expiry(&self, token: &str) -> Option<Option<i64>> {
        memo_lookup(token, self.serial, |o| o.payload.expires_at)
    }

    /// Tokens of this group in the memo (for tests).
    pub fn opened_tokens(&self) -> usize {
        OPENED.with(|m| {
            m.borrow()
                .values::<Opened>()
                .filter(|o| o.group == self.serial)
                .count()
        })
    }

    /// An estimate of the bytes this record holds (the cipher's key schedule, the settings, the hosts it names), for
    /// the bounded maps that keep groups.
    pub fn approx_bytes(&self) -> usize {
        let s = &self.settings;
        // The lists' strings in one loop: a loop per list is code in every caller it is inlined into.
        let lists = [
            &s.access.allow_countries,
            &s.access.block_countries,
            &self.enabled_hosts,
        ];
        let strings: usize = lists
            .iter()
            .flat_map(|v| v.iter())
            .map(|c| c.len() + 24)
            .sum();
        std::mem::size_of::<Group>()
            + strings
            + s.access.fallback_url.as_ref().map_or(0, String::len)
    }
}

/// Why a visitor is sent to the domain's fallback. Logged, never shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackReason {
    /// `/` or a path that cannot be a link.
    NotALink,
    /// No (valid) link record for the code on this host.
    UnknownLink,
    /// The link is paused (`is_active: false`).
    Paused,
    /// The link's `expires_at` has passed.
    Expired,
    /// The link's `long_url` cannot be put in a `Location` header, or its host cannot be read (so it cannot be
    /// checked against the blocklist).
    BadDestination,
    /// The link's destination host (or a parent domain) is on the blocklist. Not [`Outcome::Blocked`], which is
    /// the group's access rules refusing the visitor; a dynamic link's blocked destination is
    /// `Token("destination")`, as shared-crypto reports it.
    BlockedDestination,
    /// Dynamic links are served only on known, enabled domains.
    DomainNotServing,
    /// The dynamic link has no `signature` parameter.
    MissingSignature,
    /// No (valid) record for the group, e.g. a deleted group.
    UnknownGroup,
    /// The token was rejected; the string is [`shared_crypto::TokenError::reason`].
    Token(&'static str),
    /// A record the decision must check could not be read (a KV error, or the origin failing to give a link's group
    /// KV lacks) and the isolate holds no earlier copy of it: a persistent link's group (its access rules, interstitial and analytics would be skipped), or the
    /// blocklist for a dynamic link (whose destination nobody else checked). Safer to send the visitor nowhere
    /// than past a check.
    Unavailable,
}

/// A persistent link's group, as the isolate could read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkGroup<'a> {
    /// The group's settings (fresh, or the last good copy when a read failed): its rules apply.
    Rules(&'a GroupSettings),
    /// KV has no usable record for the group (a successful read), nor the origin: the link redirects without rules.
    Absent,
    /// The group's record could not be read (from KV, or from the origin when KV lacks it) and the isolate has no
    /// earlier copy: the visitor gets the fallback
    /// rather than a redirect past rules that may exist.
    Unavailable,
}

impl<'a> From<Option<&'a GroupSettings>> for LinkGroup<'a> {
    /// A record that was read: its settings, or none.
    fn from(settings: Option<&'a GroupSettings>) -> Self {
        settings.map_or(LinkGroup::Absent, LinkGroup::Rules)
    }
}

/// Where a request ends, before fallback URLs are resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `302` to the destination.
    Destination(String),
    /// The monetization interstitial, which continues to the destination.
    Interstitial {
        /// Where the page continues to.
        destination: String,
        /// Countdown length, 1 to [`MAX_INTERSTITIAL_SECONDS`].
        seconds: u32,
    },
    /// Refused by the group's access rules: `302` to `access_fallback` when usable, else the domain's fallback.
    Blocked {
        /// The group's `access.fallback_url`, already checked by [`usable_fallback`] (a usable URL whose host is
        /// not on the blocklist).
        access_fallback: Option<String>,
    },
    /// `302` to the domain's fallback.
    Fallback(FallbackReason),
    /// `200` with the link's preview card, for a link-preview crawler ([`crate::preview`]); never a click.
    Preview {
        /// Where the page's refresh goes (the destination the crawler would have been redirected to).
        destination: String,
        /// The card, its image already checked ([`usable_fallback`]) or left out.
        preview: Preview,
    },
    /// `200` with the link's password form ([`crate::password_form`]): the link has a password and the visitor
    /// holds no cookie for it. Never a click.
    Locked,
}

/// An outcome and what analytics should know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Where the request ends.
    pub outcome: Outcome,
    /// The group's `analytics.enabled`; [`crate::analytics::counts`] decides from it whether a click is recorded.
    /// False for an expired link's `expired_url`: a visit to an expired link is not a click of it.
    pub analytics: bool,
    /// The redirect's status for [`Outcome::Destination`]: the link's `redirect_status` (persistent links), else
    /// 302.
    pub status: u16,
}

impl Decision {
    fn fallback(reason: FallbackReason) -> Decision {
        Decision {
            outcome: Outcome::Fallback(reason),
            analytics: false,
            status: 302,
        }
    }
}

/// `GET /<code>`: an active link redirects (through its group's rules when the group record exists), with the
/// visitor's `query` appended when the link forwards it ([`forward_query`]); a missing, paused or expired link,
/// or one whose destination is blocklisted, falls back.
///
/// The link's own state comes first (missing, paused, expired, unusable or blocked destination): such a link
/// leads nowhere, so the group's rules (country, bots, interstitial) are never reached and nothing is counted.
/// `now_ms` is UNIX milliseconds, as `expires_at` is.
///
/// A missing group record does not break a persistent link: it redirects without rules; a group that could not be
/// read at all ([`LinkGroup::Unavailable`]) falls back instead. Persistent links do not depend on the domain
/// record either (disabling a domain stops new links, not old ones). The blocklist does stop them: a domain
/// blocked after its links were created must stop being a destination at once, without waiting for every link to
/// it to be paused. `blocklist` is `None` when it could not be read and the isolate never read one: the origin
/// checked the destination against the blocklist when the link was created or edited, so the link redirects.
/// `query` is the visitor's query string (without `?`), given when the link forwards it or its rules may read it;
/// it is appended to the destination only when the link forwards it.
pub fn decide_persistent<B: Blocklist + ?Sized>(
    link: Option<&LinkRecord>,
    group: LinkGroup<'_>,
    blocklist: Option<&B>,
    visitor: &Visitor,
    query: Option<&str>,
    now_ms: i64,
) -> Decision {
    let Some(link) = link else {
        return Decision::fallback(FallbackReason::UnknownLink);
    };
    if !link.is_active {
        return Decision::fallback(FallbackReason::Paused);
    }
    if link.expired(now_ms) {
        return expired(link, blocklist);
    }
    // The link's rules choose among its destinations (issue 25); every check below applies to the one chosen. Not
    // for a visitor still at a password's form: the rules come after the password, and what they would choose
    // (even whether it is blocked) is none of that visitor's business.
    let locked = link.password_hash.is_some() && !visitor.unlocked;
    let chosen = if locked {
        link.long_url.as_str()
    } else {
        smart::destination(link, visitor, query, now_ms)
    };
    let Some(destination) = location(chosen) else {
        return Decision::fallback(FallbackReason::BadDestination);
    };
    // The host as the dynamic path reads it (shared-crypto), matched as the dynamic path matches it.
    match extract_host(&destination) {
        Ok(host) if blocklist.is_some_and(|b| b.is_blocked(host)) => {
            return Decision::fallback(FallbackReason::BlockedDestination);
        }
        Ok(_) => {}
        Err(_) => return Decision::fallback(FallbackReason::BadDestination),
    }
    let group = match group {
        LinkGroup::Rules(settings) => Some(settings),
        LinkGroup::Absent => None,
        LinkGroup::Unavailable => return Decision::fallback(FallbackReason::Unavailable),
    };
    let destination = match query {
        Some(query) if link.forward_query => forward_query(&destination, query),
        _ => destination,
    };
    let mut decision = apply_group_rules(destination, group, visitor, blocklist);
    decision.status = smart::redirect_status(link);
    // Then the password: a visitor the group lets through gets the form, never the destination (nor a card naming
    // it), until they hold the link's cookie. Not a click.
    if locked
        && matches!(
            decision.outcome,
            Outcome::Destination(_) | Outcome::Interstitial { .. }
        )
    {
        decision.outcome = Outcome::Locked;
        decision.analytics = false;
        return decision;
    }
    // A crawler the group lets through gets the link's card instead of the redirect. Not for a link with a
    // password: its card would be shown to whoever pastes it, and the page names the destination.
    if let (Some(card), Outcome::Destination(destination)) = (&link.preview, &decision.outcome)
        && link.password_hash.is_none()
        && preview::is_preview_crawler(&visitor.user_agent)
    {
        decision.outcome = preview_card(card, destination, blocklist);
    }
    decision
}

/// The link's preview card for a crawler, its image checked as a fallback URL is.
#[inline(never)] // rare: out of the decision's compiled body (`smart::chosen` says why)
fn preview_card<B: Blocklist + ?Sized>(
    card: &Preview,
    destination: &str,
    blocklist: Option<&B>,
) -> Outcome {
    Outcome::Preview {
        destination: destination.to_owned(),
        preview: Preview {
            image: usable_fallback(card.image.as_deref(), blocklist),
            ..card.clone()
        },
    }
}

/// An expired link (its `expires_at` passed, or its click limit reached): its `expired_url` when usable (an
/// `http(s)` URL whose host is not on the blocklist, checked now as every destination is), else the domain's
/// fallback. Not through the group's rules, as a fallback is not, and never counted as a click of the link.
#[inline(never)] // rare: out of the decision's compiled body (`smart::chosen` says why)
fn expired<B: Blocklist + ?Sized>(link: &LinkRecord, blocklist: Option<&B>) -> Decision {
    match usable_fallback(link.expired_url.as_deref(), blocklist) {
        Some(url) => Decision {
            outcome: Outcome::Destination(url),
            analytics: false,
            status: 302,
        },
        None => Decision::fallback(FallbackReason::Expired),
    }
}

/// `GET /e/<group_id>?signature=<token>`, in spec 4.5's order: an enabled domain, the token decrypted with the
/// group key, the destination and expiry rules (with `back_param` appended, by shared-crypto), then the group's
/// access rules and monetization. `blocklist` is `None` when it could not be read and the isolate never read one:
/// a dynamic link's destination is the client's, checked by nobody else, so it falls back.
///
/// Out of line, as is [`decide_dynamic_opened`]: the fast path calls one or the other, and a new isolate's first
/// visit, which calls the second, compiles only that one (V8 compiles a wasm function whole on its first call).
#[inline(never)]
pub fn decide_dynamic<B: Blocklist + ?Sized>(
    domain: Option<&DomainRecord>,
    group: Option<&Group>,
    token: Option<&str>,
    blocklist: Option<&B>,
    visitor: &Visitor,
    now_seconds: i64,
) -> Decision {
    dynamic_by(
        domain,
        group,
        token,
        blocklist,
        visitor,
        |group, token, blocklist| group.evaluate(token, now_seconds, blocklist),
    )
}

/// [`decide_dynamic`] for a token whose `payload` is already opened: WebCrypto's on a first visit, checked as this
/// group's opening of `token` ([`Group::opened_payload`]). The same decision, without the memo: a new isolate's
/// first visit compiles neither its write nor Rust's AES-GCM before the answer (the memo is written after it).
#[inline(never)]
pub fn decide_dynamic_opened<B: Blocklist + ?Sized>(
    domain: Option<&DomainRecord>,
    group: Option<&Group>,
    token: &str,
    payload: &Payload,
    blocklist: Option<&B>,
    visitor: &Visitor,
    now_seconds: i64,
) -> Decision {
    dynamic_by(
        domain,
        group,
        Some(token),
        blocklist,
        visitor,
        |_, _, blocklist| payload.redirect_url(now_seconds, blocklist),
    )
}

/// [`decide_dynamic`]'s order, with the token's redirect URL from `redirect_of`.
fn dynamic_by<B: Blocklist + ?Sized>(
    domain: Option<&DomainRecord>,
    group: Option<&Group>,
    token: Option<&str>,
    blocklist: Option<&B>,
    visitor: &Visitor,
    redirect_of: impl FnOnce(&Group, &str, &B) -> Result<String, TokenError>,
) -> Decision {
    if !domain.is_some_and(|d| d.enabled) {
        return Decision::fallback(FallbackReason::DomainNotServing);
    }
    let Some(token) = token else {
        return Decision::fallback(FallbackReason::MissingSignature);
    };
    let Some(group) = group else {
        return Decision::fallback(FallbackReason::UnknownGroup);
    };
    let Some(blocklist) = blocklist else {
        return Decision::fallback(FallbackReason::Unavailable);
    };
    let redirect = match redirect_of(group, token, blocklist) {
        Ok(url) => url,
        Err(e) => return Decision::fallback(FallbackReason::Token(e.reason())),
    };
    // shared-crypto has checked the URL (https, no control characters, ≤ 2048 characters); `location` only
    // percent-encodes what a header cannot carry (non-ASCII, spaces).
    let Some(destination) = location(&redirect) else {
        return Decision::fallback(FallbackReason::Token("destination"));
    };
    apply_group_rules(destination, Some(&group.settings), visitor, Some(blocklist))
}

/// Until when (UNIX ms) a redirect decided from cached records stays the answer to the same request: the earliest
/// of `records_until` (when the first of its records stops being a plain cache hit) and the link's or token's
/// expiry (`expires_at_ms`; a redirect is expired from that instant on). Nothing but the clock and those records
/// goes into such an answer, so until then the entry module (`edge-worker/js/entry.js`) may give it again without
/// asking; a change to any record makes it forget every answer. 0 (never) for an expiry before the epoch.
pub fn answer_until(records_until: u64, expires_at_ms: Option<i64>) -> u64 {
    match expires_at_ms {
        Some(at) => records_until.min(u64::try_from(at).unwrap_or(0)),
        None => records_until,
    }
}

/// Whether a group's rules or its analytics look at the visitor at all. When they do not, the shell skips reading
/// the country, User-Agent and `request.cf` (each a call out of wasm) and passes [`Visitor::default`]. Analytics
/// needs the visitor to leave bots out and to record country and device.
pub fn needs_visitor(settings: Option<&GroupSettings>) -> bool {
    settings.is_some_and(|s| {
        let a = &s.access;
        !a.allow_countries.is_empty()
            || !a.block_countries.is_empty()
            || a.block_bots
            || s.monetization.is_some()
            || s.analytics.enabled
    })
}

/// Access rules, then monetization. Bots never see the interstitial: they either are blocked or go straight on. A
/// blocked visitor's `access.fallback_url` is kept only when [`usable_fallback`] under `blocklist`.
fn apply_group_rules<B: Blocklist + ?Sized>(
    destination: String,
    settings: Option<&GroupSettings>,
    visitor: &Visitor,
    blocklist: Option<&B>,
) -> Decision {
    let Some(settings) = settings else {
        return Decision {
            outcome: Outcome::Destination(destination),
            analytics: false,
            status: 302,
        };
    };
    let access = &settings.access;
    // Each test only when a rule asks for it: a group without rules (most) then runs no User-Agent patterns and no
    // country lists, code a new isolate's first request would otherwise compile (BENCHMARKS.md, "Cold start").
    let bot = || visitor.is_bot();
    let countries = !access.allow_countries.is_empty() || !access.block_countries.is_empty();
    let allowed = (!countries
        || country_allowed(
            visitor.country.as_deref(),
            &access.allow_countries,
            &access.block_countries,
        ))
        && !(access.block_bots && bot());
    let outcome = if !allowed {
        Outcome::Blocked {
            access_fallback: usable_fallback(access.fallback_url.as_deref(), blocklist),
        }
    } else {
        match &settings.monetization {
            Some(m) if m.interstitial_seconds > 0 && !bot() => Outcome::Interstitial {
                destination,
                seconds: m.interstitial_seconds.min(MAX_INTERSTITIAL_SECONDS),
            },
            _ => Outcome::Destination(destination),
        }
    };
    Decision {
        outcome,
        analytics: settings.analytics.enabled,
        status: 302,
    }
}

/// The domain's fallback URL: its own `fallback_url`, else the worker's default (`DEFAULT_FALLBACK_URL`), each only
/// when [`usable_fallback`] under `blocklist`. `None` when neither is (the visitor gets a `404`).
pub fn domain_fallback<B: Blocklist + ?Sized>(
    domain: Option<&DomainRecord>,
    default: Option<&str>,
    blocklist: Option<&B>,
) -> Option<String> {
    usable_fallback(domain.and_then(|d| d.fallback_url.as_deref()), blocklist)
        .or_else(|| usable_fallback(default, blocklist))
}

/// `url` as a fallback's `Location` ([`location`]), unless its host (or a parent domain) is on the blocklist, or its
/// host cannot be read to check it: the edge never redirects to a blocked host, from any path. The origin refuses a
/// blocked fallback when it is saved; this catches a domain blocked since, and records written before.
/// `blocklist` is `None` when no blocklist was ever read in this isolate: fallbacks are then used as they are,
/// since the origin checked them when they were saved (as a persistent link's destination, [`decide_persistent`]).
/// Never on the hot path: only a visitor already going to a fallback gets here.
pub fn usable_fallback<B: Blocklist + ?Sized>(
    url: Option<&str>,
    blocklist: Option<&B>,
) -> Option<String> {
    let url = location(url?)?;
    let blocked =
        blocklist.is_some_and(|b| extract_host(&url).map_or(true, |host| b.is_blocked(host)));
    (!blocked).then_some(url)
}

/// `url` as a `Location` header value, or `None` when it is not an absolute `http(s)` URL.
///
/// ASCII whitespace around it is dropped. Bytes a header cannot carry (controls, space, non-ASCII) are
/// percent-encoded, as a browser would encode them when following the link; everything else is kept exactly, so
/// signed destinations are not rewritten.
pub fn location(url: &str) -> Option<String> {
    let url = shared_crypto::ascii::trim(url);
    let bytes = url.as_bytes();
    if bytes.len() > 8 * 1024 {
        return None;
    }
    // By bytes, as `scheme_len` reads the scheme: the iterator over both schemes with `eq_ignore_ascii_case` that
    // this replaced unrolled into about 0.4 KB more of a function every first visit compiles (BENCHMARKS.md, issue
    // 28). The host must not be empty (`https:///x`): the byte after the scheme is read from the input, which the
    // copy below keeps as it is or, for a byte a header cannot carry, turns into `%`, never into `/`, `?` or `#`.
    let after_scheme = bytes.get(scheme_len(bytes)?);
    if matches!(after_scheme, None | Some(b'/' | b'?' | b'#')) {
        return None;
    }
    // Most destinations have nothing to encode: copied whole, with the encoding out of line (a new isolate's first
    // answer then compiles only the check).
    Some(if bytes.iter().all(|b| (0x21..=0x7e).contains(b)) {
        url.to_owned()
    } else {
        percent_encoded(url)
    })
}

/// The length of `url`'s scheme with its `://` when it is `http` or `https`, in any letter case.
fn scheme_len(url: &[u8]) -> Option<usize> {
    let s = usize::from(url.get(4).is_some_and(|b| b.eq_ignore_ascii_case(&b's')));
    let http = url
        .get(..4)
        .is_some_and(|h| h.eq_ignore_ascii_case(b"http"));
    (http && url.get(4 + s..7 + s) == Some(&b"://"[..])).then_some(7 + s)
}

/// `url` with every byte a header cannot carry (controls, space, non-ASCII) percent-encoded ([`location`]).
#[inline(never)]
fn percent_encoded(url: &str) -> String {
    let mut out = String::with_capacity(url.len() + 16);
    for &b in url.as_bytes() {
        if (0x21..=0x7e).contains(&b) {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
    }
    out
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

#[cfg(test)]
mod tests {
    use super::*;
    use kv_model::{AccessRules, Analytics, Monetization};
    use shared_crypto::DomainBlocklist;

    const NOW: i64 = 1_800_000_000;
    const NOW_MS: i64 = NOW * 1000;
    const CHROME: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 \
                          Safari/537.36";

    fn human(country: &str) -> Visitor {
        Visitor::new(None, Some(country), Some(CHROME), None, false)
    }

    fn bot(country: &str) -> Visitor {
        Visitor::new(None, Some(country), Some("Twitterbot/1.0"), None, false)
    }

    fn key() -> GroupKey {
        GroupKey::from_bytes([5; 32])
    }

    fn group(settings: GroupSettings) -> Group {
        Group::from_record(GroupRecord::new(key().to_base64url(), settings)).unwrap()
    }

    fn token(payload: &Payload) -> String {
        TokenCipher::new(&key()).seal(payload, [1; 12])
    }

    fn rules() -> GroupSettings {
        GroupSettings {
            access: AccessRules {
                allow_countries: vec![],
                block_countries: vec!["RU".into()],
                block_bots: true,
                fallback_url: Some("https://example.com/blocked".into()),
            },
            monetization: None,
            analytics: Analytics { enabled: true },
        }
    }

    fn enabled() -> DomainRecord {
        DomainRecord::new(true, Some("https://fallback.example/".into()))
    }

    fn blocklist() -> DomainBlocklist {
        ["evil.example"].into_iter().collect()
    }

    fn dynamic(group: &Group, token: &str, visitor: &Visitor) -> Outcome {
        decide_dynamic(
            Some(&enabled()),
            Some(group),
            Some(token),
            Some(&blocklist()),
            visitor,
            NOW,
        )
        .outcome
    }

    /// `decide_persistent` at [`NOW`], with [`blocklist`].
    fn persistent(
        link: &LinkRecord,
        settings: Option<&GroupSettings>,
        visitor: &Visitor,
        query: Option<&str>,
    ) -> Decision {
        decide_persistent(
            Some(link),
            settings.into(),
            Some(&blocklist()),
            visitor,
            query,
            NOW_MS,
        )
    }

    /// A link whose rules send German speakers elsewhere, and one rule to a blocked host.
    fn smart_link() -> LinkRecord {
        let mut link = LinkRecord::new("https://dest.example/", "g", true);
        link.rules = vec![
            link_rules::Rule {
                when: link_rules::Conditions {
                    language: vec!["de".into()],
                    ..link_rules::Conditions::default()
                },
                to: "https://de.example/".into(),
            },
            link_rules::Rule {
                when: link_rules::Conditions {
                    country: vec!["FR".into()],
                    ..link_rules::Conditions::default()
                },
                to: "https://evil.example/fr".into(),
            },
        ];
        link.redirect_status = Some(308);
        link
    }

    #[test]
    fn smart_links_rules_status_and_checks() {
        let link = smart_link();
        let german = human("US").with_accept_language(Some("de-DE,de;q=0.9"));
        let d = persistent(&link, Some(&rules()), &german, Some("x=1"));
        assert_eq!(
            d.outcome,
            Outcome::Destination("https://de.example/?x=1".into())
        );
        assert_eq!((d.status, d.analytics), (308, true), "counted as any click");
        // The chosen destination is checked against the blocklist like any other.
        assert_eq!(
            persistent(&link, Some(&rules()), &human("FR"), None).outcome,
            Outcome::Fallback(FallbackReason::BlockedDestination)
        );
        // The group's access rules come first: a blocked visitor never reaches a link rule.
        let blocked = human("RU").with_accept_language(Some("de"));
        assert_eq!(
            persistent(&link, Some(&rules()), &blocked, None).outcome,
            Outcome::Blocked {
                access_fallback: Some("https://example.com/blocked".into())
            }
        );
        // Nobody matching: the link's own destination, with its status.
        let d = persistent(&link, None, &human("US"), None);
        assert_eq!(
            (d.outcome, d.status),
            (Outcome::Destination("https://dest.example/".into()), 308)
        );
        // Fallbacks stay 302s.
        let mut paused = smart_link();
        paused.is_active = false;
        assert_eq!(persistent(&paused, None, &german, None).status, 302);
    }

    #[test]
    fn preview_cards_for_crawlers_only() {
        let mut link = LinkRecord::new("https://dest.example/", "g", true);
        link.preview = Some(Preview {
            title: Some("Card".into()),
            description: None,
            image: Some("https://evil.example/i.png".into()),
        });
        let slack = Visitor::new(
            None,
            Some("US"),
            Some("Slackbot-LinkExpanding 1.0"),
            None,
            false,
        );
        let d = persistent(&link, None, &slack, Some("x=1"));
        assert_eq!(
            d.outcome,
            Outcome::Preview {
                destination: "https://dest.example/?x=1".into(),
                preview: Preview {
                    title: Some("Card".into()),
                    description: None,
                    image: None,
                },
            },
            "a blocked image is left out"
        );
        assert!(
            !crate::analytics::counts(&d, false, &slack),
            "never a click"
        );
        // Browsers get the redirect; a group that blocks bots blocks the crawler first.
        assert_eq!(
            persistent(&link, None, &human("US"), None).outcome,
            Outcome::Destination("https://dest.example/".into())
        );
        assert!(matches!(
            persistent(&link, Some(&rules()), &slack, None).outcome,
            Outcome::Blocked { .. }
        ));
        // A link with a password never shows its card: crawlers get the form, as people do.
        link.password_hash = Some("pbkdf2-sha256$1$AAAA$AAAA".into());
        for visitor in [&slack, &human("US")] {
            assert_eq!(
                persistent(&link, None, visitor, None).outcome,
                Outcome::Locked
            );
        }
        let unlocked_crawler = Visitor {
            unlocked: true,
            ..slack.clone()
        };
        assert_eq!(
            persistent(&link, None, &unlocked_crawler, None).outcome,
            Outcome::Destination("https://dest.example/".into()),
            "no card for a password link, even past its form"
        );
    }

    #[test]
    fn a_password_comes_after_the_group_and_before_the_rules() {
        let mut link = smart_link();
        link.password_hash = Some("pbkdf2-sha256$1$AAAA$AAAA".into());
        let group = rules();
        // Blocked by the group: never sees the form.
        assert!(matches!(
            persistent(&link, Some(&group), &human("RU"), None).outcome,
            Outcome::Blocked { .. }
        ));
        // Let through: the form, not counted, whatever the rules would choose.
        let d = persistent(&link, Some(&group), &human("US"), Some("x=1"));
        assert_eq!(d.outcome, Outcome::Locked);
        assert!(!crate::analytics::counts(&d, false, &human("US")));
        // A visitor whose rule leads to a blocked destination learns nothing of it before the password: the form.
        assert_eq!(
            persistent(&link, Some(&group), &human("FR"), None).outcome,
            Outcome::Locked
        );
        let unlocked_fr = Visitor {
            unlocked: true,
            ..human("FR")
        };
        assert_eq!(
            persistent(&link, Some(&group), &unlocked_fr, None).outcome,
            Outcome::Fallback(FallbackReason::BlockedDestination)
        );
        // With the cookie: the rules' destination, counted as any click.
        let unlocked = Visitor {
            unlocked: true,
            ..human("US")
        };
        let d = persistent(&link, Some(&group), &unlocked, Some("x=1"));
        assert_eq!(
            d.outcome,
            Outcome::Destination("https://dest.example/?x=1".into())
        );
        assert!(crate::analytics::counts(&d, false, &unlocked));
        // An expired protected link goes to its expired_url without asking: it leads nowhere the password guards.
        link.expires_at = Some(NOW_MS);
        link.expired_url = Some("https://sold-out.example/".into());
        assert_eq!(
            persistent(&link, Some(&group), &human("US"), None).outcome,
            Outcome::Destination("https://sold-out.example/".into())
        );
    }

    #[test]
    fn expired_links_go_to_their_expired_url() {
        let mut link = smart_link();
        link.expires_at = Some(NOW_MS);
        link.expired_url = Some("https://sold-out.example/page".into());
        let d = persistent(&link, Some(&rules()), &human("US"), Some("x=1"));
        assert_eq!(
            d.outcome,
            Outcome::Destination("https://sold-out.example/page".into()),
            "no query forwarded, no rule applied"
        );
        assert_eq!(
            (d.status, d.analytics),
            (302, false),
            "a temporary redirect, not a click"
        );
        // Published as expired by its click limit (expires_at 0): the same.
        link.expires_at = Some(0);
        assert_eq!(
            persistent(&link, None, &human("US"), None).outcome,
            Outcome::Destination("https://sold-out.example/page".into())
        );
        // A blocked or unusable expired_url: the domain's fallback, as without one.
        for bad in ["https://evil.example/x", "javascript:alert(1)"] {
            link.expired_url = Some(bad.into());
            assert_eq!(
                persistent(&link, None, &human("US"), None).outcome,
                Outcome::Fallback(FallbackReason::Expired)
            );
        }
        link.expired_url = None;
        assert_eq!(
            persistent(&link, None, &human("US"), None).outcome,
            Outcome::Fallback(FallbackReason::Expired)
        );
    }

    #[test]
    fn persistent_links() {
        let link = LinkRecord::new("https://dest.example/a?b=1", "g", true);
        let d = persistent(&link, None, &human("US"), None);
        assert_eq!(
            d.outcome,
            Outcome::Destination("https://dest.example/a?b=1".into())
        );
        assert!(!d.analytics);
        let paused = LinkRecord::new("https://dest.example/", "g", false);
        assert_eq!(
            persistent(&paused, None, &human("US"), None).outcome,
            Outcome::Fallback(FallbackReason::Paused)
        );
        assert_eq!(
            decide_persistent(
                None,
                LinkGroup::Absent,
                Some(&blocklist()),
                &human("US"),
                None,
                NOW_MS
            )
            .outcome,
            Outcome::Fallback(FallbackReason::UnknownLink)
        );
        for bad in [
            "javascript:alert(1)",
            "https://ex\u{e4}mple.example/",
            "https://a.example:99999/",
        ] {
            let bad = LinkRecord::new(bad, "g", true);
            assert_eq!(
                persistent(&bad, None, &human("US"), None).outcome,
                Outcome::Fallback(FallbackReason::BadDestination),
                "{}",
                bad.long_url
            );
        }
    }

    #[test]
    fn persistent_links_follow_group_rules() {
        let link = LinkRecord::new("https://dest.example/", "g", true);
        let settings = rules();
        let d = persistent(&link, Some(&settings), &human("RU"), None);
        assert_eq!(
            d.outcome,
            Outcome::Blocked {
                access_fallback: Some("https://example.com/blocked".into())
            }
        );
        assert!(d.analytics);
        assert_eq!(
            persistent(&link, Some(&settings), &human("DE"), None).outcome,
            Outcome::Destination("https://dest.example/".into())
        );
    }

    #[test]
    fn expired_links_fall_back() {
        let mut link = LinkRecord::new("https://dest.example/", "g", true);
        link.expires_at = Some(NOW_MS);
        assert_eq!(
            persistent(&link, None, &human("US"), None).outcome,
            Outcome::Fallback(FallbackReason::Expired),
            "expires_at = now"
        );
        link.expires_at = Some(NOW_MS + 1);
        assert_eq!(
            persistent(&link, None, &human("US"), None).outcome,
            Outcome::Destination("https://dest.example/".into()),
            "one millisecond before"
        );
        // Expiry comes before the group's rules: a visitor they would block still just meets the fallback, and
        // nothing is counted.
        link.expires_at = Some(NOW_MS - 1);
        let d = persistent(&link, Some(&rules()), &human("RU"), None);
        assert_eq!(d.outcome, Outcome::Fallback(FallbackReason::Expired));
        assert!(!d.analytics);
        // Paused first: a paused link is paused, whatever its expiry.
        link.is_active = false;
        assert_eq!(
            persistent(&link, None, &human("US"), None).outcome,
            Outcome::Fallback(FallbackReason::Paused)
        );
    }

    #[test]
    fn a_group_opens_each_token_once_and_checks_it_every_time() {
        let g = group(GroupSettings::default());
        let expiring = token(&Payload {
            destination_url: "https://dest.example/campaign".into(),
            back_param: None,
            expires_at: Some(NOW + 60),
        });
        let none = DomainBlocklist::default();
        assert_eq!(
            g.evaluate(&expiring, NOW, &none).as_deref(),
            Ok("https://dest.example/campaign")
        );
        assert_eq!(g.opened_tokens(), 1);
        assert_eq!(g.opened_expiry(&expiring), Some(Some(NOW + 60)));
        assert_eq!(g.opened_expiry("never-seen"), None);
        // From the memo: the same answer, and no second entry.
        assert_eq!(
            g.evaluate(&expiring, NOW + 1, &none).as_deref(),
            Ok("https://dest.example/campaign")
        );
        assert_eq!(g.opened_tokens(), 1);
        // Expiry and the blocklist are still checked on a memo hit.
        assert!(matches!(
            g.evaluate(&expiring, NOW + 61, &none),
            Err(TokenError::Expired { .. })
        ));
        let blocked: DomainBlocklist = ["dest.example"].into_iter().collect();
        assert!(g.evaluate(&expiring, NOW, &blocked).is_err());
        // Tokens that do not open are not kept; another key's group has a memo of its own.
        assert!(g.evaluate("not-a-token", NOW, &none).is_err());
        let mut tampered = expiring.clone();
        tampered.pop();
        tampered.push(if expiring.ends_with('A') { 'B' } else { 'A' });
        assert!(g.evaluate(&tampered, NOW, &none).is_err());
        assert_eq!(g.opened_tokens(), 1);
        let other = Group::from_record(GroupRecord::new(
            GroupKey::from_bytes([6; 32]).to_base64url(),
            GroupSettings::default(),
        ))
        .unwrap();
        assert!(
            other.evaluate(&expiring, NOW, &none).is_err(),
            "another key cannot open it"
        );
        assert_eq!(other.opened_tokens(), 0);
    }

    /// What another AES-GCM opened (WebCrypto's, on a first visit) is the group's own opening, when it was opened from
    /// what `sealed_for` gives for that token under that record's key: its payload decides, and, kept, evaluate uses
    /// it; anything else gives no payload (evaluate then opens the token itself).
    #[test]
    fn a_token_opened_elsewhere_is_the_groups_opening() {
        let g = group(GroupSettings::default());
        let none = DomainBlocklist::default();
        let t = token(&Payload::new("https://dest.example/a"));
        let sealed = g.sealed_for(&t).unwrap();
        assert_eq!(&sealed[..32], key().as_bytes());
        assert_eq!(sealed.len(), 32 + raw_len(&t) - 1);
        assert_eq!(g.sealed_for("not-a-token"), None);
        let b = r#"{"destination_url":"https://dest.example/b","expires_at":null}"#;
        // Opened under another record's key (the group's record replaced, its key rotated, while WebCrypto worked).
        let rotated = Group::from_record(GroupRecord::new(
            GroupKey::from_bytes([6; 32]).to_base64url(),
            GroupSettings::default(),
        ))
        .unwrap();
        assert_eq!(
            g.opened_payload(&t, &rotated.sealed_for(&t).unwrap(), b),
            None
        );
        // Another token's bytes, a cut or a longer copy, a payload that does not read: no payload.
        let other = token(&Payload::new("https://dest.example/other"));
        assert_eq!(
            g.opened_payload(&t, &g.sealed_for(&other).unwrap(), b),
            None
        );
        assert_eq!(g.opened_payload(&t, &sealed[..sealed.len() - 1], b), None);
        assert_eq!(g.opened_payload(&t, &[&sealed[..], &[0]].concat(), b), None);
        let not_json = "{\"destination_url\":\"not json";
        assert_eq!(g.opened_payload(&t, &sealed, not_json), None);
        assert_eq!(g.opened_payload("not-a-token", &sealed, b), None);
        // Taken as given, and not kept until told.
        let payload = g.opened_payload(&t, &sealed, b).unwrap();
        assert_eq!(payload.destination_url, "https://dest.example/b");
        assert_eq!(g.opened_tokens(), 0);
        g.keep_opened(&t, payload);
        assert_eq!(g.opened_tokens(), 1);
        assert_eq!(g.opened_expiry(&t), Some(None));
        // The memo's payload, not the token's own, is what evaluate reads from now on.
        assert_eq!(
            g.evaluate(&t, NOW, &none).as_deref(),
            Ok("https://dest.example/b")
        );
        // Kept under this record of the group only: a new record with the same key opens the token itself.
        let reloaded = group(GroupSettings::default());
        assert_eq!(reloaded.opened_expiry(&t), None);
        assert_eq!(
            reloaded.evaluate(&t, NOW, &none).as_deref(),
            Ok("https://dest.example/a")
        );
        // A plaintext led by a byte order mark is no payload, whichever way it came (the entry module's decoder keeps
        // the mark, as Rust's reading of the bytes does).
        let bom = "\u{feff}{\"destination_url\":\"https://dest.example/b\"}";
        assert_eq!(g.opened_payload(&t, &sealed, bom), None);
        assert!(payload_of(bom.as_bytes()).is_err());
        assert!(payload_of(b"{\"destination_url\":\"https://dest.example/\xff\"}").is_err());
        // A payload the scanner leaves to serde_json reads the same way.
        let u = token(&Payload::new("https://dest.example/c"));
        let escaped = r#"{"destination_url":"https:\/\/dest.example\/d","x":[1]}"#;
        let payload = g
            .opened_payload(&u, &g.sealed_for(&u).unwrap(), escaped)
            .unwrap();
        assert_eq!(payload.destination_url, "https://dest.example/d");
    }

    /// A token's opened payload decides as the group's own opening of it would, for every outcome: a redirect, an
    /// expired token, a blocked destination, the group's rules; the domain's state and a missing blocklist first.
    #[test]
    fn an_opened_payload_decides_as_the_group_would() {
        let list = blocklist();
        let disabled = DomainRecord::new(false, None);
        let mut expired = Payload::new("https://dest.example/late");
        expired.expires_at = Some(NOW - 1);
        let payloads = [
            Payload::new("https://dest.example/a b"),
            Payload::new("https://www.evil.example/"),
            expired,
        ];
        for settings in [GroupSettings::default(), rules()] {
            let g = group(settings);
            for payload in &payloads {
                let t = token(payload);
                for (domain, list, visitor) in [
                    (enabled(), Some(&list), human("DE")),
                    (enabled(), Some(&list), human("RU")),
                    (enabled(), Some(&list), bot("DE")),
                    (disabled.clone(), Some(&list), human("DE")),
                    (enabled(), None, human("DE")),
                ] {
                    // A record of its own, so that the group's decision opens the token itself.
                    let fresh = group(g.settings.clone());
                    let by_group =
                        decide_dynamic(Some(&domain), Some(&fresh), Some(&t), list, &visitor, NOW);
                    let opened = decide_dynamic_opened(
                        Some(&domain),
                        Some(&g),
                        &t,
                        payload,
                        list,
                        &visitor,
                        NOW,
                    );
                    assert_eq!(opened, by_group, "{payload:?}");
                }
            }
            assert_eq!(g.opened_tokens(), 0, "deciding keeps nothing");
        }
    }

    /// The decoded length of a token: its version byte, IV, ciphertext and tag.
    fn raw_len(token: &str) -> usize {
        shared_crypto::base64url::decode(token).unwrap().len()
    }

    #[test]
    fn an_answer_lasts_until_its_records_or_its_expiry() {
        assert_eq!(answer_until(8_000, None), 8_000);
        assert_eq!(answer_until(8_000, Some(5_000)), 5_000);
        assert_eq!(answer_until(8_000, Some(9_000)), 8_000);
        assert_eq!(answer_until(8_000, Some(-1)), 0);
    }

    /// Tokens of the largest kind (15 KB: a long `back_param`) across many groups: the memo stays within its
    /// byte budget for the isolate, whatever the number of groups, keeping the newest.
    #[test]
    fn the_token_memo_is_bounded_in_bytes_across_groups() {
        let none = DomainBlocklist::default();
        let mut tokens = Vec::new();
        // Past the budget twice over, each token under a group of its own (groups share the key: the memo must
        // still tell them apart).
        let groups: Vec<Group> = (0..2 * TOKEN_MEMO_BUDGET_BYTES / 15_000)
            .map(|_| group(GroupSettings::default()))
            .collect();
        for (i, g) in groups.iter().enumerate() {
            // Distinct payloads (the test's IV is fixed).
            let mut payload = Payload::new(format!("https://dest.example/{i}"));
            payload.back_param = Some(format!("p={}", "x".repeat(11_500)));
            let t = token(&payload);
            assert!(t.len() > 15_000, "{}", t.len());
            // The destination is too long with its back_param: refused, yet opened and kept.
            assert!(g.evaluate(&t, NOW, &none).is_err());
            assert!(token_memo_bytes() <= TOKEN_MEMO_BUDGET_BYTES);
            tokens.push(t);
        }
        let kept: Vec<bool> = groups
            .iter()
            .zip(&tokens)
            .map(|(g, t)| g.opened_expiry(t).is_some())
            .collect();
        let n = kept.iter().filter(|k| **k).count();
        assert!(n > 100 && n < groups.len() / 2, "{n} of {}", groups.len());
        assert!(
            kept[groups.len() - n..].iter().all(|k| *k),
            "the newest are kept"
        );
        assert!(!kept[0], "the oldest went");
        assert!(token_memo_bytes() > TOKEN_MEMO_BUDGET_BYTES - 30_000);
        // A token kept for one group is not another's, even under the same key: that group opens it itself.
        let last = tokens.last().map(String::as_str).unwrap_or_default();
        assert_eq!(groups[0].opened_expiry(last), None);
        assert_eq!(groups[groups.len() - 1].opened_tokens(), 1);
    }

    /// An answer kept from records that were offered a reload in their last second (a reload that then failed)
    /// lasts until their expiry at most, never past it.
    #[test]
    fn a_kept_answer_never_outlives_its_records() {
        use crate::cache::TtlCache;
        let mut cache = TtlCache::new(10_000, 10);
        for key in ["link", "group", "blocklist"] {
            cache.insert(key.into(), (), 0);
        }
        for now in (0..12_000).step_by(70) {
            for key in ["link", "group", "blocklist"] {
                let _ = cache.lookup(key, now);
            }
            let untils: Option<Vec<u64>> = ["link", "group", "blocklist"]
                .iter()
                .map(|k| cache.peek_fresh(k, now).map(|(_, until)| until))
                .collect();
            if let Some(untils) = untils {
                let until = answer_until(untils.into_iter().min().unwrap_or(0), None);
                assert!(until <= 10_000, "at {now}: kept until {until}");
                assert!(now < until);
            }
        }
        assert_eq!(answer_until(10_000, Some(9_000)), 9_000);
    }

    #[test]
    fn records_that_could_not_be_read() {
        let link = LinkRecord::new("https://dest.example/", "g", true);
        let decide = |group, blocklist: Option<&DomainBlocklist>, visitor: &Visitor| {
            decide_persistent(Some(&link), group, blocklist, visitor, None, NOW_MS)
        };
        // The group could not be read and was never read: fallback, not a redirect past its rules; nothing counts.
        let d = decide(LinkGroup::Unavailable, Some(&blocklist()), &human("US"));
        assert_eq!(d.outcome, Outcome::Fallback(FallbackReason::Unavailable));
        assert!(!d.analytics);
        // The link's own state still comes first.
        let paused = LinkRecord::new("https://dest.example/", "g", false);
        assert_eq!(
            decide_persistent(
                Some(&paused),
                LinkGroup::Unavailable,
                Some(&blocklist()),
                &human("US"),
                None,
                NOW_MS
            )
            .outcome,
            Outcome::Fallback(FallbackReason::Paused)
        );
        // A group KV does not have is no rules, as before.
        assert_eq!(
            decide(LinkGroup::Absent, Some(&blocklist()), &human("US")).outcome,
            Outcome::Destination("https://dest.example/".into())
        );
        // A persistent link without any blocklist read: its destination was checked by the origin, it redirects.
        let settings = rules();
        assert_eq!(
            decide(LinkGroup::Rules(&settings), None, &human("DE")).outcome,
            Outcome::Destination("https://dest.example/".into())
        );
        assert!(matches!(
            decide(LinkGroup::Rules(&settings), None, &human("RU")).outcome,
            Outcome::Blocked { .. }
        ));
        // A dynamic link without any blocklist read: its destination is the client's, nobody checked it.
        let g = group(GroupSettings::default());
        let t = token(&Payload::new("https://www.evil.example/"));
        let no_list: Option<&DomainBlocklist> = None;
        assert_eq!(
            decide_dynamic(
                Some(&enabled()),
                Some(&g),
                Some(&t),
                no_list,
                &human("US"),
                NOW
            )
            .outcome,
            Outcome::Fallback(FallbackReason::Unavailable)
        );
        let fine = token(&Payload::new("https://dest.example/"));
        assert_eq!(
            decide_dynamic(
                Some(&enabled()),
                Some(&g),
                Some(&fine),
                no_list,
                &human("US"),
                NOW
            )
            .outcome,
            Outcome::Fallback(FallbackReason::Unavailable)
        );
    }

    #[test]
    fn blocklisted_destinations_fall_back() {
        for blocked in [
            "https://evil.example/",
            "https://www.EVIL.example./a?b=1",
            "https://user@evil.example:8443/",
        ] {
            let link = LinkRecord::new(blocked, "g", true);
            assert_eq!(
                persistent(&link, None, &human("US"), Some("utm=x")).outcome,
                Outcome::Fallback(FallbackReason::BlockedDestination),
                "{blocked}"
            );
            // Before the group's rules, so nothing is counted and no interstitial leads there.
            let d = persistent(&link, Some(&rules()), &human("RU"), None);
            assert_eq!(
                d.outcome,
                Outcome::Fallback(FallbackReason::BlockedDestination)
            );
            assert!(!d.analytics);
        }
        for fine in [
            "https://notevil.example/",
            "https://evil.example.com/",
            "https://dest.example/?next=https://evil.example/",
        ] {
            let link = LinkRecord::new(fine, "g", true);
            assert_eq!(
                persistent(&link, None, &human("US"), None).outcome,
                Outcome::Destination(fine.into())
            );
        }
        let paused = LinkRecord::new("https://evil.example/", "g", false);
        assert_eq!(
            persistent(&paused, None, &human("US"), None).outcome,
            Outcome::Fallback(FallbackReason::Paused)
        );
        let empty: &[&str] = &[];
        let link = LinkRecord::new("https://evil.example/", "g", true);
        assert_eq!(
            decide_persistent(
                Some(&link),
                LinkGroup::Absent,
                Some(empty),
                &human("US"),
                None,
                NOW_MS
            )
            .outcome,
            Outcome::Destination("https://evil.example/".into()),
            "not blocked yet"
        );
    }

    #[test]
    fn persistent_links_forward_the_visitor_query() {
        let mut link = LinkRecord::new("https://dest.example/a?id=5#top", "g", true);
        let visit = |link: &LinkRecord, query| persistent(link, None, &human("US"), query).outcome;
        assert_eq!(
            visit(&link, Some("utm=x&id=6")),
            Outcome::Destination("https://dest.example/a?id=5&utm=x#top".into())
        );
        for query in [None, Some("")] {
            assert_eq!(
                visit(&link, query),
                Outcome::Destination("https://dest.example/a?id=5#top".into())
            );
        }
        // The interstitial continues to the same destination.
        let paid = GroupSettings {
            monetization: Some(Monetization {
                interstitial_seconds: 5,
            }),
            ..GroupSettings::default()
        };
        assert_eq!(
            persistent(&link, Some(&paid), &human("US"), Some("utm=x")).outcome,
            Outcome::Interstitial {
                destination: "https://dest.example/a?id=5&utm=x#top".into(),
                seconds: 5
            }
        );
        link.forward_query = false;
        assert_eq!(
            visit(&link, Some("utm=x")),
            Outcome::Destination("https://dest.example/a?id=5#top".into()),
            "forward_query: false"
        );
    }

    #[test]
    fn dynamic_happy_path_appends_back_param() {
        let mut p = Payload::new("http://dest.example/landing?x=1");
        p.back_param = Some("utm_source=mail".into());
        p.expires_at = Some(NOW + 1);
        let d = decide_dynamic(
            Some(&enabled()),
            Some(&group(GroupSettings::default())),
            Some(&token(&p)),
            Some(&[""]),
            &human("US"),
            NOW,
        );
        assert_eq!(
            d.outcome,
            Outcome::Destination("https://dest.example/landing?x=1&utm_source=mail".into())
        );
        assert!(!d.analytics);
    }

    #[test]
    fn dynamic_failures_fall_back() {
        let g = group(GroupSettings::default());
        let good = token(&Payload::new("https://dest.example/"));
        let empty: &[&str] = &[];
        let fb = |reason| Outcome::Fallback(reason);
        let run = |domain: Option<&DomainRecord>, group: Option<&Group>, token: Option<&str>| {
            decide_dynamic(domain, group, token, Some(empty), &human("US"), NOW).outcome
        };
        assert_eq!(
            run(None, Some(&g), Some(&good)),
            fb(FallbackReason::DomainNotServing)
        );
        let disabled = DomainRecord::new(false, None);
        assert_eq!(
            run(Some(&disabled), Some(&g), Some(&good)),
            fb(FallbackReason::DomainNotServing)
        );
        assert_eq!(
            run(Some(&enabled()), Some(&g), None),
            fb(FallbackReason::MissingSignature)
        );
        assert_eq!(
            run(Some(&enabled()), None, Some(&good)),
            fb(FallbackReason::UnknownGroup)
        );
        assert_eq!(
            run(Some(&enabled()), Some(&g), Some("garbage")),
            fb(FallbackReason::Token("signature"))
        );
        let other = Group::from_record(GroupRecord::new(
            GroupKey::from_bytes([6; 32]).to_base64url(),
            GroupSettings::default(),
        ))
        .unwrap();
        assert_eq!(
            run(Some(&enabled()), Some(&other), Some(&good)),
            fb(FallbackReason::Token("signature"))
        );

        let mut expired = Payload::new("https://dest.example/");
        expired.expires_at = Some(NOW);
        assert_eq!(
            dynamic(&g, &token(&expired), &human("US")),
            fb(FallbackReason::Token("expired"))
        );
        let blocked = token(&Payload::new("https://www.evil.example/"));
        assert_eq!(
            dynamic(&g, &blocked, &human("US")),
            fb(FallbackReason::Token("destination"))
        );
        let long = token(&Payload::new(format!(
            "https://dest.example/{}",
            "a".repeat(2048)
        )));
        assert_eq!(
            dynamic(&g, &long, &human("US")),
            fb(FallbackReason::Token("destination"))
        );
    }

    #[test]
    fn invalid_group_key_is_a_missing_group() {
        assert!(Group::from_record(GroupRecord::new("short", GroupSettings::default())).is_none());
    }

    #[test]
    fn access_rules_and_bots() {
        let g = group(rules());
        let t = token(&Payload::new("https://dest.example/"));
        let blocked = Outcome::Blocked {
            access_fallback: Some("https://example.com/blocked".into()),
        };
        assert_eq!(dynamic(&g, &t, &human("RU")), blocked);
        assert_eq!(dynamic(&g, &t, &bot("US")), blocked);
        assert_eq!(
            dynamic(&g, &t, &human("US")),
            Outcome::Destination("https://dest.example/".into())
        );

        let mut allow_only = rules();
        allow_only.access.allow_countries = vec!["US".into(), "DE".into()];
        allow_only.access.block_bots = false;
        allow_only.access.fallback_url = Some("not a url".into());
        let g = group(allow_only);
        assert_eq!(
            dynamic(&g, &t, &human("FR")),
            Outcome::Blocked {
                access_fallback: None
            }
        );
        assert_eq!(
            dynamic(&g, &t, &Visitor::new(None, None, Some(CHROME), None, false)),
            Outcome::Blocked {
                access_fallback: None
            },
            "unknown country with an allow list"
        );
        assert_eq!(
            dynamic(&g, &t, &bot("DE")),
            Outcome::Destination("https://dest.example/".into())
        );
    }

    #[test]
    fn interstitial_never_for_bots() {
        let mut settings = GroupSettings {
            monetization: Some(Monetization {
                interstitial_seconds: 5,
            }),
            ..GroupSettings::default()
        };
        let g = group(settings.clone());
        let t = token(&Payload::new("https://dest.example/"));
        assert_eq!(
            dynamic(&g, &t, &human("US")),
            Outcome::Interstitial {
                destination: "https://dest.example/".into(),
                seconds: 5
            }
        );
        assert_eq!(
            dynamic(&g, &t, &bot("US")),
            Outcome::Destination("https://dest.example/".into())
        );

        settings.monetization = Some(Monetization {
            interstitial_seconds: 0,
        });
        assert_eq!(
            dynamic(&group(settings.clone()), &t, &human("US")),
            Outcome::Destination("https://dest.example/".into())
        );
        settings.monetization = Some(Monetization {
            interstitial_seconds: 3600,
        });
        assert_eq!(
            dynamic(&group(settings), &t, &human("US")),
            Outcome::Interstitial {
                destination: "https://dest.example/".into(),
                seconds: MAX_INTERSTITIAL_SECONDS
            }
        );
    }

    #[test]
    fn visitor_needed_only_by_rules_and_analytics() {
        assert!(!needs_visitor(None));
        assert!(!needs_visitor(Some(&GroupSettings::default())));
        let mut s = GroupSettings::default();
        s.analytics.enabled = true;
        assert!(needs_visitor(Some(&s)));
        assert!(needs_visitor(Some(&rules())));
        let paid = GroupSettings {
            monetization: Some(Monetization {
                interstitial_seconds: 0,
            }),
            ..GroupSettings::default()
        };
        assert!(needs_visitor(Some(&paid)));
        let mut countries = GroupSettings::default();
        countries.access.allow_countries = vec!["US".into()];
        assert!(needs_visitor(Some(&countries)));
    }

    #[test]
    fn fallbacks() {
        let own = DomainRecord::new(true, Some("https://own.example/".into()));
        let none = DomainRecord::new(true, None);
        let bad = DomainRecord::new(true, Some("ftp://x".into()));
        let default = Some("https://default.example/");
        let list = Some(&blocklist());
        assert_eq!(
            domain_fallback(Some(&own), default, list).as_deref(),
            Some("https://own.example/")
        );
        assert_eq!(
            domain_fallback(Some(&none), default, list).as_deref(),
            default
        );
        assert_eq!(
            domain_fallback(Some(&bad), default, list).as_deref(),
            default
        );
        assert_eq!(domain_fallback(None, default, list).as_deref(), default);
        assert_eq!(domain_fallback(None, None, list), None);
        assert_eq!(domain_fallback(None, Some(""), list), None);
    }

    /// The edge never redirects to a blocked host, from any path: the group's fallback falls through to the
    /// domain's, the domain's to the default, and with none left there is none (a `404`).
    #[test]
    fn blocked_fallbacks_fall_through() {
        let link = LinkRecord::new("https://dest.example/", "g", true);
        let mut settings = rules();
        settings.access.fallback_url = Some("https://promo.partner.example/blocked".into());
        let domain = DomainRecord::new(true, Some("https://own.example/".into()));
        let default = Some("https://default.example/");
        let list = |domains: &[&str]| -> DomainBlocklist { domains.iter().collect() };
        // What a visitor the group's rules block ends at, under `blocklist`.
        let ends_at = |blocklist: Option<&DomainBlocklist>| {
            let d = decide_persistent(
                Some(&link),
                LinkGroup::Rules(&settings),
                blocklist,
                &human("RU"),
                None,
                NOW_MS,
            );
            let Outcome::Blocked { access_fallback } = d.outcome else {
                panic!("blocked by the rules: {:?}", d.outcome);
            };
            access_fallback.or_else(|| domain_fallback(Some(&domain), default, blocklist))
        };
        // Nothing blocked: the group's own fallback.
        let nothing = list(&[]);
        assert_eq!(
            ends_at(Some(&nothing)).as_deref(),
            Some("https://promo.partner.example/blocked")
        );
        // The group's fallback is blocked through a parent domain: the domain's fallback.
        let partner = list(&["partner.example"]);
        assert_eq!(
            ends_at(Some(&partner)).as_deref(),
            Some("https://own.example/")
        );
        // Its host itself, in any case: the same.
        let exact = list(&["PROMO.partner.example."]);
        assert_eq!(
            ends_at(Some(&exact)).as_deref(),
            Some("https://own.example/")
        );
        // The domain's too: the platform default.
        let both = list(&["partner.example", "own.example"]);
        assert_eq!(ends_at(Some(&both)).as_deref(), default);
        // All three: none (the shell answers 404).
        let all = list(&["partner.example", "own.example", "default.example"]);
        assert_eq!(ends_at(Some(&all)), None);
        // A blocked parent of the default's host blocks it too; a look-alike does not.
        assert_eq!(
            domain_fallback(None, Some("https://www.default.example/x"), Some(&all)),
            None
        );
        assert_eq!(
            domain_fallback(None, Some("https://notdefault.example/"), Some(&all)).as_deref(),
            Some("https://notdefault.example/")
        );
        // No blocklist ever read in the isolate: fallbacks as they are (the origin checked them when saved).
        assert_eq!(
            ends_at(None).as_deref(),
            Some("https://promo.partner.example/blocked")
        );
        assert_eq!(
            domain_fallback(Some(&domain), default, None::<&DomainBlocklist>).as_deref(),
            Some("https://own.example/")
        );
        // A fallback whose host cannot be read cannot be checked: skipped when a blocklist is known.
        let unreadable = DomainRecord::new(true, Some("https://own.example:99999/".into()));
        assert_eq!(
            domain_fallback(Some(&unreadable), default, Some(&nothing)).as_deref(),
            default
        );
        // Dynamic links: the same rule for the group's fallback.
        let g = group(settings.clone());
        let t = token(&Payload::new("https://dest.example/"));
        let blocked_by_rules = |blocklist: &DomainBlocklist| {
            decide_dynamic(
                Some(&enabled()),
                Some(&g),
                Some(&t),
                Some(blocklist),
                &human("RU"),
                NOW,
            )
            .outcome
        };
        assert_eq!(
            blocked_by_rules(&partner),
            Outcome::Blocked {
                access_fallback: None
            }
        );
        assert_eq!(
            blocked_by_rules(&nothing),
            Outcome::Blocked {
                access_fallback: Some("https://promo.partner.example/blocked".into())
            }
        );
    }

    /// [`location`] as it read before it read by bytes.
    fn location_by_schemes(url: &str) -> Option<String> {
        let url = shared_crypto::ascii::trim(url);
        let scheme = ["https://", "http://"].into_iter().find(|scheme| {
            url.get(..scheme.len())
                .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
        })?;
        if url.len() > 8 * 1024 {
            return None;
        }
        let out = if url.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            url.to_owned()
        } else {
            percent_encoded(url)
        };
        let after_scheme = &out.as_bytes()[scheme.len()..];
        (!matches!(after_scheme.first(), None | Some(b'/' | b'?' | b'#'))).then_some(out)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// Reading the scheme by bytes gives what the reading by schemes gave: schemes in any case, cut short, with
        /// an `s` too many, whitespace around, the byte after them a slash, a space, a non-ASCII letter or none.
        #[test]
        fn location_by_bytes(url in "[ \\t]?(h|H)(t|T)(t|T)?(p|P)?(s|S|é){0,2}:{0,2}/{0,3}[a/?# éx\\r\\t]{0,4}") {
            proptest::prop_assert_eq!(location(&url), location_by_schemes(&url), "{:?}", url);
        }
    }

    #[test]
    fn locations() {
        assert_eq!(
            location("https://a.example/x?y=1#z").as_deref(),
            Some("https://a.example/x?y=1#z")
        );
        assert_eq!(
            location("HTTP://a.example").as_deref(),
            Some("HTTP://a.example")
        );
        assert_eq!(
            location("https://a.example/ü x\r\n").as_deref(),
            Some("https://a.example/%C3%BC%20x"),
            "trimmed, then encoded"
        );
        assert_eq!(
            location(" \thttps://a.example/x\u{a0}").as_deref(),
            Some("https://a.example/x%C2%A0"),
            "ASCII whitespace trimmed; other bytes encoded"
        );
        assert_eq!(
            location("https://a.example/\u{7f}").as_deref(),
            Some("https://a.example/%7F")
        );
        // At most 8 KiB, scheme included, after trimming.
        let longest = format!("https://a.example/{}", "x".repeat(8 * 1024 - 18));
        assert_eq!(location(&longest).as_deref(), Some(longest.as_str()));
        assert_eq!(
            location(&format!(" {longest}\t")).as_deref(),
            Some(longest.as_str())
        );
        assert_eq!(location(&format!("{longest}x")), None);
        for bad in [
            "",
            "ftp://a",
            "javascript:alert(1)",
            "//a.example",
            "https://",
            "https:///x",
            "/x",
        ] {
            assert_eq!(location(bad), None, "{bad}");
        }
    }
}
