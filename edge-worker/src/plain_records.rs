//! KV's records in the shapes the origin publishes for plain links, groups, domains and the blocklist, read without
//! serde: a link with no smart-link field (`v`, `long_url`, `group_id`, `is_active`, and maybe `expires_at`,
//! `forward_query`, a plain group's settings `{}` and `vouched`), a group whose settings are `{}` (with the hosts it
//! names or not), a domain, the blocklist (the same), each read by a scanner of that one shape; and a dynamic link's
//! payload, the plaintext of its token.
//!
//! Why not serde_json alone: V8 compiles each wasm function on its first call, and a new isolate's first visit parses
//! its records before the redirect (a persistent link's record; a dynamic link's group and blocklist, its domain's when
//! neither names the host, and its token's payload). serde_json's derived parses (each record's visitor, the settings',
//! and serde_json's number, string and map helpers) were the largest part of what that visit compiled (about 11 KB of a
//! persistent link's 47.6 KB); these scanners are a small fraction of it (BENCHMARKS.md, issue 28). They decide nothing
//! on their own: anything a scanner does not fully understand (another field, an escape in a string, a `null` it does
//! not expect, a number it would have to round, a duplicate key, settings other than `{}`) gives `None`, and the caller
//! then reads the text with serde_json ([`crate::json_record::parse`]), as every record was read before. Whenever a
//! scanner gives a record, serde_json gives the same one from the same text (the tests check it, on generated texts).

use kv_model::{
    BlocklistRecord, DomainRecord, GroupRecord, GroupSettings, LinkRecord, MAX_ENABLED_HOSTS,
};
use shared_crypto::Payload;

/// The most domains a blocklist's list is given room for before its first: 4,096 (48 KiB of `String`s on wasm32),
/// so that a text of escaped quotes does not reserve more than the domains it could hold. A longer list grows as any
/// `Vec` does (its text alone is past the first allocations' arena by then: `first-arena`).
const MAX_DOMAINS_AT_ONCE: usize = 4096;

/// The record in `text`, when `text` is a plain link's record in the shape this module reads; `None` otherwise
/// (read it with serde_json then).
pub fn plain_link(text: &str) -> Option<LinkRecord> {
    let mut record = LinkRecord::new(String::new(), String::new(), false);
    let seen = object(text, &mut |key, scan| {
        Some(match key {
            "v" => {
                scan.version()?;
                1
            }
            "long_url" => {
                record.long_url = scan.string()?.to_owned();
                2
            }
            "group_id" => {
                record.group_id = scan.string()?.to_owned();
                4
            }
            "is_active" => {
                record.is_active = scan.boolean()?;
                8
            }
            "expires_at" => {
                record.expires_at = Some(scan.integer()?);
                16
            }
            "forward_query" => {
                record.forward_query = scan.boolean()?;
                32
            }
            "group_settings" => {
                scan.empty_object()?;
                record.group_settings = Some(GroupSettings::default());
                64
            }
            "vouched" => {
                record.vouched = scan.boolean()?;
                128
            }
            _ => return None,
        })
    })?;
    // The four fields without a default.
    (seen & 0b1111 == 0b1111).then_some(record)
}

/// A group's record whose settings are `{}` (or left out), and maybe the hosts it names
/// ([`GroupRecord::enabled_hosts`]).
pub fn plain_group(text: &str) -> Option<GroupRecord> {
    let mut key = None;
    let mut enabled_hosts = Vec::with_capacity(strings_in(text).min(MAX_ENABLED_HOSTS));
    let seen = object(text, &mut |name, scan| {
        Some(match name {
            "v" => {
                scan.version()?;
                1
            }
            "key" => {
                key = Some(scan.string()?.to_owned());
                2
            }
            "settings" => {
                scan.empty_object()?;
                4
            }
            "enabled_hosts" => {
                scan.strings(&mut enabled_hosts)?;
                8
            }
            _ => return None,
        })
    })?;
    (seen & 0b11 == 0b11).then(|| GroupRecord {
        enabled_hosts,
        ..GroupRecord::new(key.unwrap_or_default(), GroupSettings::default())
    })
}

/// A domain's record.
pub fn plain_domain(text: &str) -> Option<DomainRecord> {
    let (mut enabled, mut fallback_url) = (false, None);
    let seen = object(text, &mut |name, scan| {
        Some(match name {
            "v" => {
                scan.version()?;
                1
            }
            "enabled" => {
                enabled = scan.boolean()?;
                2
            }
            "fallback_url" => {
                fallback_url = scan.string_or_null()?.map(str::to_owned);
                4
            }
            _ => return None,
        })
    })?;
    (seen & 0b11 == 0b11).then(|| DomainRecord::new(enabled, fallback_url))
}

/// The blocklist's record: a list of strings (`domains` left out: none), and maybe the hosts it names
/// ([`BlocklistRecord::enabled_hosts`]).
pub fn plain_blocklist(text: &str) -> Option<BlocklistRecord> {
    // Room at once for every string the text can hold (up to a bound, past which a list grows as any): a list that
    // grows copies itself each time, and its growth is code a new isolate's first visit to a dynamic link would
    // compile (`crate::room`).
    let strings = strings_in(text);
    let mut domains = Vec::with_capacity(strings.min(MAX_DOMAINS_AT_ONCE));
    let mut enabled_hosts = Vec::with_capacity(strings.min(MAX_ENABLED_HOSTS));
    let seen = object(text, &mut |name, scan| {
        Some(match name {
            "v" => {
                scan.version()?;
                1
            }
            "domains" => {
                scan.strings(&mut domains)?;
                2
            }
            "enabled_hosts" => {
                scan.strings(&mut enabled_hosts)?;
                4
            }
            _ => return None,
        })
    })?;
    (seen & 1 == 1).then(|| BlocklistRecord {
        enabled_hosts,
        ..BlocklistRecord::new(domains)
    })
}

/// How many strings `text` can hold at most: two quotes each. The room a scanner's list is given at once.
fn strings_in(text: &str) -> usize {
    text.bytes().filter(|&b| b == b'"').count() / 2
}

/// A dynamic link's payload (the plaintext of its token: spec section 2) in the shape the origin's and the
/// snippets' sealing writes: `destination_url`, and maybe `back_param` and `expires_at` (`null` for either reads as
/// left out, as serde_json reads it).
pub fn plain_payload(text: &str) -> Option<Payload> {
    let mut payload = Payload::new(String::new());
    let seen = object(text, &mut |name, scan| {
        Some(match name {
            "destination_url" => {
                payload.destination_url = scan.string()?.to_owned();
                1
            }
            "back_param" => {
                payload.back_param = scan.string_or_null()?.map(str::to_owned);
                2
            }
            "expires_at" => {
                payload.expires_at = if scan.null() {
                    None
                } else {
                    Some(scan.integer()?)
                };
                4
            }
            _ => return None,
        })
    })?;
    (seen & 1 == 1).then_some(payload)
}

/// Reads `text` as one JSON object with nothing after it but whitespace, handing each key to `field`, which reads
/// its value and names the field's bit (one per field: a key seen twice is refused, as serde_json refuses it).
/// Returns the bits of the fields seen; `None` when `field` does, or the text is not such an object (an empty object
/// included: no record is). `field` is a `dyn`: one copy of this loop in the wasm for every record's scanner.
fn object(text: &str, field: &mut dyn FnMut(&str, &mut Scan<'_>) -> Option<u8>) -> Option<u8> {
    let mut scan = Scan {
        text,
        bytes: text.as_bytes(),
        at: 0,
    };
    let mut seen = 0u8;
    scan.skip_ws();
    scan.expect(b'{')?;
    loop {
        scan.skip_ws();
        let key = scan.string()?;
        scan.skip_ws();
        scan.expect(b':')?;
        scan.skip_ws();
        let bit = field(key, &mut scan)?;
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        scan.skip_ws();
        match scan.next()? {
            b',' => {}
            b'}' => break,
            _ => return None,
        }
    }
    scan.skip_ws();
    (scan.at == scan.bytes.len()).then_some(seen)
}

/// A position in the text. Every step that meets what it does not read gives `None`.
struct Scan<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn next(&mut self) -> Option<u8> {
        let byte = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// Whether the next byte is `byte`, taken if it is.
    fn eat(&mut self, byte: u8) -> bool {
        let found = self.bytes.get(self.at) == Some(&byte);
        if found {
            self.at += 1;
        }
        found
    }

    /// The record's version, which must be `1` ([`kv_model::V1`]); what follows it is checked by the caller.
    fn version(&mut self) -> Option<()> {
        self.expect(b'1')
    }

    /// A list of strings as [`Scan::string`] reads each, pushed onto `list` (given its room by the caller).
    fn strings(&mut self, list: &mut Vec<String>) -> Option<()> {
        self.expect(b'[')?;
        self.skip_ws();
        if self.eat(b']') {
            return Some(());
        }
        loop {
            self.skip_ws();
            list.push(self.string()?.to_owned());
            self.skip_ws();
            match self.next()? {
                b',' => {}
                b']' => return Some(()),
                _ => return None,
            }
        }
    }

    /// `{}`, with whitespace inside or not.
    fn empty_object(&mut self) -> Option<()> {
        self.expect(b'{')?;
        self.skip_ws();
        self.expect(b'}')
    }

    /// `null`, taken if it is next.
    fn null(&mut self) -> bool {
        let found = self.bytes[self.at..].starts_with(b"null");
        if found {
            self.at += 4;
        }
        found
    }

    /// JSON's whitespace: space, tab, line feed, carriage return.
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// A string without escapes or control characters (which JSON does not allow unescaped): the text between
    /// its quotes, which are ASCII, so slicing there keeps to char boundaries.
    fn string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.at;
        loop {
            match self.next()? {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                _ => {}
            }
        }
        Some(&self.text[start..self.at - 1])
    }

    /// A string as [`Scan::string`] reads one, or `null` (`Some(None)`), as serde_json reads an `Option<String>`.
    fn string_or_null(&mut self) -> Option<Option<&'a str>> {
        if self.null() {
            Some(None)
        } else {
            self.string().map(Some)
        }
    }

    fn boolean(&mut self) -> Option<bool> {
        let rest = &self.bytes[self.at..];
        let (value, len) = if rest.starts_with(b"true") {
            (true, 4)
        } else if rest.starts_with(b"false") {
            (false, 5)
        } else {
            return None;
        };
        self.at += len;
        Some(value)
    }

    /// An integer as JSON writes one (`-`, then `0` or digits not starting with `0`) that fits an `i64`, not `-0`. A fraction
    /// or an exponent is left unread, and the caller's next step refuses it.
    fn integer(&mut self) -> Option<i64> {
        let negative = self.bytes.get(self.at) == Some(&b'-');
        if negative {
            self.at += 1;
        }
        let start = self.at;
        let mut value: i64 = 0;
        while let Some(&digit @ b'0'..=b'9') = self.bytes.get(self.at) {
            let digit = i64::from(digit - b'0');
            value = value.checked_mul(10)?;
            value = if negative {
                value.checked_sub(digit)?
            } else {
                value.checked_add(digit)?
            };
            self.at += 1;
        }
        let digits = self.at - start;
        // serde_json reads `-0` as the float −0.0, which no integer field takes.
        if digits == 0 || (digits > 1 && self.bytes[start] == b'0') || (negative && value == 0) {
            return None;
        }
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_record::parse;
    use proptest::prelude::*;
    use serde::de::DeserializeOwned;
    use std::fmt::Debug;

    /// What the module promises: a record only where serde_json reads the same one.
    fn agrees<T: DeserializeOwned + PartialEq + Debug>(text: &str, scanner: fn(&str) -> Option<T>) {
        if let Some(ours) = scanner(text) {
            let theirs: Result<T, _> = parse(text);
            assert_eq!(theirs.ok(), Some(ours), "{text:?}");
        }
    }

    /// Every scanner on `text`; the payload's against `Payload::from_json`, which is what reads it otherwise.
    fn all_agree(text: &str) {
        agrees(text, plain_link);
        agrees(text, plain_group);
        agrees(text, plain_domain);
        agrees(text, plain_blocklist);
        if let Some(ours) = plain_payload(text) {
            assert_eq!(
                Payload::from_json(text.as_bytes()).ok(),
                Some(ours),
                "{text:?}"
            );
        }
    }

    #[test]
    fn reads_what_the_origin_publishes() {
        let plain = LinkRecord {
            group_settings: Some(GroupSettings::default()),
            vouched: true,
            ..LinkRecord::new(
                "https://a.example/x?y=1#z",
                "0b7c6a1e-7f39-4c55-9a55-2d1c1f5e8a10",
                true,
            )
        };
        let variants = [
            plain.clone(),
            LinkRecord {
                expires_at: Some(1_700_000_000_000),
                forward_query: false,
                vouched: false,
                ..plain.clone()
            },
            LinkRecord {
                is_active: false,
                group_settings: None,
                long_url: "https://ü.example/ä".into(),
                ..plain.clone()
            },
            LinkRecord {
                expires_at: Some(0),
                ..plain.clone()
            },
        ];
        for record in variants {
            let text = serde_json::to_string(&record).unwrap();
            assert_eq!(plain_link(&text), Some(record), "{text}");
        }
        let spaced = " {\n \"v\" : 1 ,\t\"long_url\":\"https://a.example/\",\"group_id\":\"g\",\r\"is_active\":true,\"group_settings\":{ },\"expires_at\":-5} \n";
        assert_eq!(
            plain_link(spaced),
            Some(LinkRecord {
                expires_at: Some(-5),
                group_settings: Some(GroupSettings::default()),
                ..LinkRecord::new("https://a.example/", "g", true)
            })
        );
        agrees(spaced, plain_link);

        let group = GroupRecord::new(
            "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI",
            GroupSettings::default(),
        );
        let text = serde_json::to_string(&group).unwrap();
        assert_eq!(plain_group(&text), Some(group.clone()), "{text}");
        let named = GroupRecord {
            enabled_hosts: vec!["links.acme.example".into(), "go.acme.example".into()],
            ..group
        };
        let text = serde_json::to_string(&named).unwrap();
        assert_eq!(plain_group(&text), Some(named), "{text}");
        for domain in [
            DomainRecord::new(true, Some("https://f.example/".into())),
            DomainRecord::new(false, None),
        ] {
            let text = serde_json::to_string(&domain).unwrap();
            assert_eq!(plain_domain(&text), Some(domain), "{text}");
        }
        for payload in [
            Payload::new("https://d.example/x?y=1"),
            Payload {
                destination_url: "https://ü.example/".into(),
                back_param: Some("utm_source=a&b=%20".into()),
                expires_at: Some(1_800_000_000),
            },
            Payload {
                expires_at: Some(-1),
                ..Payload::new("https://d.example/")
            },
        ] {
            let text = String::from_utf8(payload.to_json()).unwrap();
            assert_eq!(plain_payload(&text), Some(payload), "{text}");
        }
        assert_eq!(
            plain_payload(
                r#"{"back_param":null,"destination_url":"https://d.example/","expires_at":null}"#
            ),
            Some(Payload::new("https://d.example/"))
        );
        for list in [
            BlocklistRecord::new(vec!["evil.example".into(), "bad.example".into()]),
            BlocklistRecord::new(Vec::new()),
            BlocklistRecord {
                enabled_hosts: vec!["sho.rt".into(), "go.example".into()],
                ..BlocklistRecord::new(vec!["evil.example".into()])
            },
            BlocklistRecord {
                enabled_hosts: vec!["sho.rt".into()],
                ..BlocklistRecord::new(Vec::new())
            },
        ] {
            let text = serde_json::to_string(&list).unwrap();
            assert_eq!(plain_blocklist(&text), Some(list), "{text}");
        }
    }

    #[test]
    fn a_blocklist_longer_than_its_first_room_reads_whole() {
        let domains: Vec<String> = (0..MAX_DOMAINS_AT_ONCE + 905)
            .map(|i| format!("d{i}.example"))
            .collect();
        let list = BlocklistRecord::new(domains);
        let text = serde_json::to_string(&list).unwrap();
        let read = plain_blocklist(&text).expect("the plain shape");
        assert_eq!(read.domains.len(), MAX_DOMAINS_AT_ONCE + 905);
        assert_eq!(read, list);
        agrees(&text, plain_blocklist);
        // Escaped quotes count toward the room, never toward the list.
        let quoted = r#"{"v":1,"domains":["a\"b.example","c.example"]}"#;
        agrees(quoted, plain_blocklist);
    }

    #[test]
    fn leaves_every_other_shape_to_serde_json() {
        for text in [
            "",
            "{}",
            "[]",
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g"}"#,
            r#"{"v":2,"long_url":"https://a.example/","group_id":"g","is_active":true}"#,
            r#"{"v":1.0,"long_url":"https://a.example/","group_id":"g","is_active":true}"#,
            r#"{"v":10,"long_url":"https://a.example/","group_id":"g","is_active":true}"#,
            r#"{"v":1,"long_url":"https:\/\/a.example/","group_id":"g","is_active":true}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"rules":[]}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"unknown":1}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"is_active":true}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"expires_at":null}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"expires_at":01}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"expires_at":-0}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"expires_at":1e3}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"expires_at":99999999999999999999}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"group_settings":{"analytics":{}}}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"group_settings":null}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true} x"#,
            "{\"v\":1,\"long_url\":\"https://a.example/\u{1}\",\"group_id\":\"g\",\"is_active\":true}",
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":tru}"#,
        ] {
            assert_eq!(plain_link(text), None, "{text:?}");
        }
        for text in [
            r#"{"v":1,"key":"k","settings":{"access":null}}"#,
            r#"{"v":1,"key":"k","settings":null}"#,
            r#"{"v":1,"settings":{}}"#,
            r#"{"v":1,"key":"k","enabled_hosts":null}"#,
            r#"{"v":1,"key":"k","enabled_hosts":["a",]}"#,
            r#"{"v":1,"key":"k","enabled_hosts":[1]}"#,
            r#"{"v":1,"key":"k","enabled_hosts":[],"enabled_hosts":[]}"#,
        ] {
            assert_eq!(plain_group(text), None, "{text:?}");
        }
        for text in [
            r#"{"back_param":"a=1"}"#,
            r#"{"destination_url":null}"#,
            r#"{"destination_url":"https://d.example/","extra":1}"#,
            r#"{"destination_url":"https://d.example/","expires_at":1.5}"#,
            r#"{"destination_url":"https://d.example/","expires_at":"1"}"#,
            r#"{"destination_url":"https://d.example/","destination_url":"https://e.example/"}"#,
            r#"{"destination_url":"https:\/\/d.example/"}"#,
            r#"["https://d.example/"]"#,
        ] {
            assert_eq!(plain_payload(text), None, "{text:?}");
        }
        for text in [r#"{"v":1,"fallback_url":null}"#, r#"{"v":1,"enabled":1}"#] {
            assert_eq!(plain_domain(text), None, "{text:?}");
        }
        for text in [
            r#"{"v":1,"domains":null}"#,
            r#"{"v":1,"domains":["a",]}"#,
            r#"{"v":1,"domains":["a"],"domains":[]}"#,
            r#"{"domains":["a"]}"#,
            r#"{"v":1,"enabled_hosts":null}"#,
            r#"{"v":1,"enabled_hosts":["a"],"enabled_hosts":["a"]}"#,
        ] {
            assert_eq!(plain_blocklist(text), None, "{text:?}");
        }
    }

    /// A record's text from generated parts: every record's keys and unknown ones (duplicates too), values of every
    /// kind the scanners meet or refuse, and JSON's whitespace between them.
    fn record_text() -> impl Strategy<Value = String> {
        let key = prop::sample::select(vec![
            "v",
            "long_url",
            "group_id",
            "is_active",
            "expires_at",
            "forward_query",
            "group_settings",
            "vouched",
            "key",
            "settings",
            "enabled",
            "fallback_url",
            "domains",
            "enabled_hosts",
            "destination_url",
            "back_param",
            "rules",
            "x",
        ]);
        let value = prop::sample::select(vec![
            "1",
            "0",
            "-0",
            "-7",
            "01",
            "1.5",
            "2e3",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "true",
            "false",
            "null",
            "nul",
            "{}",
            "{ }",
            r#"{"monetization":null}"#,
            "[]",
            "[ ]",
            r#"["a.example"]"#,
            r#"[ "a" , "é" ]"#,
            r#"["a",]"#,
            r#"["a\"b"]"#,
            "[1]",
            r#""https://a.example/x""#,
            r#""""#,
            r#""é日""#,
            r#""a\"b""#,
            r#""a\u0041""#,
            "\"\u{7}\"",
        ]);
        let ws = prop::sample::select(vec!["", " ", "\n", "\t ", "\r"]);
        // Most texts start from a record's required fields with good values, so that many are records.
        let required = prop::sample::select(vec![
            vec![
                ("v", "1"),
                ("long_url", r#""https://a.example/""#),
                ("group_id", r#""g""#),
                ("is_active", "true"),
            ],
            vec![("v", "1"), ("key", r#""k""#)],
            vec![("destination_url", r#""https://d.example/""#)],
            vec![("v", "1"), ("enabled", "true")],
            vec![("v", "1")],
            vec![],
        ]);
        let extra = prop::collection::vec((key, value), 0..6);
        (required, extra)
            .prop_map(|(mut fields, extra)| {
                fields.extend(extra);
                fields
            })
            .prop_shuffle()
            .prop_flat_map(move |fields| {
                let n = fields.len();
                (
                    Just(fields),
                    prop::collection::vec((ws.clone(), ws.clone()), n),
                )
            })
            .prop_map(|(fields, spaces)| {
                let body: Vec<String> = fields
                    .iter()
                    .zip(spaces)
                    .map(|((k, v), (w1, w2))| format!("{w1}\"{k}\"{w1}:{w2}{v}{w2}"))
                    .collect();
                format!("{{{}}}", body.join(","))
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn a_record_only_where_serde_json_reads_the_same(text in record_text()) {
            all_agree(&text);
        }

        #[test]
        fn a_byte_changed_anywhere_changes_nothing_to_that(
            text in record_text(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let mut bytes = text.into_bytes();
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
            if let Ok(text) = String::from_utf8(bytes) {
                all_agree(&text);
            }
        }
    }
}
