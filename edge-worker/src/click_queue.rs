//! Click delivery through Cloudflare Queues: what the worker does with a batch of click events its queue consumer
//! received, decided in plain Rust so it is tested on the host (the shell's `queue` handler does the I/O).
//!
//! With a `CLICK_QUEUE` producer binding, each counted request sends its event to the queue (in `wait_until`)
//! instead of the isolate's buffer; the same worker consumes the queue and posts each batch to the origin's
//! `POST /internal/v1/clicks` as one report. Queues keeps a message until it is acknowledged, so an evicted
//! isolate or an origin outage loses nothing: a batch the origin could not take is retried (after the consumer's
//! `retry_delay`), up to the consumer's `max_retries`, then moved by Queues to the dead-letter queue. A batch the
//! origin refuses for good (a 4xx other than 408/429: retrying the same events cannot help) goes to the dead-letter
//! queue at once through the `CLICK_DEAD_LETTERS` producer binding, where an operator can look at it and, once the
//! cause is fixed, replay it. Without the queue binding the worker reports directly ([`crate::analytics`]).
//!
//! Queues delivers at least once: a batch whose answer was lost (the origin counted it, then the connection
//! dropped) comes again. The report's `batch_id` is derived from the batch's message ids ([`batch_id`]), so the
//! same messages make the same id and the origin counts them once.

use crate::origin::Delivery;

/// The producer binding of the click queue; present means the queue path is on.
pub const QUEUE_BINDING: &str = "CLICK_QUEUE";

/// The producer binding of the click dead-letter queue, where refused batches are sent.
pub const DEAD_LETTER_BINDING: &str = "CLICK_DEAD_LETTERS";

/// What the consumer does with a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchAction {
    /// The origin took it: acknowledge every message.
    Ack,
    /// The origin could not take it now (5xx, 408, 429, timeout, no connection, no origin configured): retry
    /// every message after the consumer's `retry_delay`; past `max_retries`, Queues moves them to the dead-letter
    /// queue.
    Retry,
    /// The origin refused it for good: send it to the dead-letter queue and acknowledge it (retry instead when
    /// the dead-letter binding is missing, so Queues moves it there after `max_retries`).
    DeadLetter,
}

/// The action for the origin's answer to a batch.
pub fn batch_action(delivery: Delivery) -> BatchAction {
    match delivery {
        Delivery::Delivered => BatchAction::Ack,
        Delivery::Retry(_) => BatchAction::Retry,
        Delivery::Rejected(_) => BatchAction::DeadLetter,
    }
}

/// Whether a queue message's text can be one of the report's events: a JSON object, as the producer writes
/// it ([`crate::analytics::ClickEvent`] as JSON text). The consumer does not parse the events (the origin does,
/// and a parser for them would add its code to the wasm); anything else goes to the dead-letter queue apart.
pub fn is_event_text(text: &str) -> bool {
    let text = text.trim();
    text.len() >= 2 && text.starts_with('{') && text.ends_with('}')
}

/// The report, `{"batch_id":"<id>","events":[…]}`, from each message's id and its event's JSON text as the
/// producer wrote it: each event gets its message's id as its `id`, which the origin counts once (the batch id
/// only recognises the same grouping of messages, and Queues regroups what it delivers again).
pub fn report_body(batch_id: &str, events: &[(String, String)]) -> String {
    let mut body = String::with_capacity(
        48 + events
            .iter()
            .map(|(id, e)| id.len() + e.len() + 10)
            .sum::<usize>(),
    );
    body.push_str("{\"batch_id\":\"");
    body.push_str(batch_id);
    body.push_str("\",\"events\":[");
    for (i, (id, event)) in events.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        // `{` + the id + the rest of the object (a comma unless it was empty).
        let inner = event.trim()[1..].trim_start();
        body.push_str("{\"id\":");
        body.push_str(&serde_json::to_string(id).unwrap_or_else(|_| "null".to_owned()));
        if !inner.starts_with('}') {
            body.push(',');
        }
        body.push_str(inner);
    }
    body.push_str("]}");
    body
}

/// The report's `batch_id` for a batch of queue messages: a UUID (version 8, "custom") made from a 128-bit
/// FNV-1a hash of the message ids in sorted order, so a redelivery of the same messages, in any order, carries the
/// same id. FNV rather than SHA-256: the ids are the platform's, not anyone's choice, so a collision needs chance,
/// and 128 bits make that as unlikely as between random UUIDs; a SHA-2 implementation would add about 10 KB to the
/// worker's wasm for nothing.
pub fn batch_id<S: AsRef<str>>(message_ids: &[S]) -> String {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut ids: Vec<&str> = message_ids.iter().map(AsRef::as_ref).collect();
    // An insertion sort, not `sort_unstable`: a batch holds at most 100 messages (Queues' largest
    // `max_batch_size`), and the standard library's sort of `&str` was 9 KB of the worker's wasm. Equal ids are
    // equal strings, so the order (hence the hash) is the one any sort gives.
    for i in 1..ids.len() {
        let mut j = i;
        while j > 0 && ids[j - 1] > ids[j] {
            ids.swap(j - 1, j);
            j -= 1;
        }
    }
    let mut hash = OFFSET;
    for id in ids {
        // Each id ends with a byte no id contains, so ["ab", "c"] and ["a", "bc"] hash apart.
        for byte in id.bytes().chain([0xff]) {
            hash ^= u128::from(byte);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    let mut bytes = hash.to_be_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x80; // version 8
    bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 9562 variant
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::origin::{Failure, clicks_answer};

    #[test]
    fn the_same_messages_make_the_same_id_in_any_order() {
        let a = batch_id(&["m1", "m2", "m3"]);
        assert_eq!(a, batch_id(&["m3", "m1", "m2"]));
        assert_ne!(
            a,
            batch_id(&["m1", "m2"]),
            "a regrouped batch is another batch"
        );
        assert_ne!(a, batch_id(&["m1", "m2", "m4"]));
        assert_ne!(batch_id(&["ab", "c"]), batch_id(&["a", "bc"]));
    }

    #[test]
    fn the_id_hashes_the_ids_in_byte_order() {
        // Values computed independently (FNV-1a over the sorted ids); a full batch, in a scrambled order.
        assert_eq!(
            batch_id(&["m3", "m1", "m2"]),
            "3f1509d1-2005-8c71-b4f9-27af0d62b115"
        );
        let ids: Vec<String> = (0..100)
            .map(|i| format!("msg-{:03}", i * 37 % 100))
            .collect();
        assert_eq!(batch_id(&ids), "f483c0f9-c5b6-849d-89a5-0d7746ff67e9");
        let mut reversed = ids.clone();
        reversed.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(batch_id(&reversed), batch_id(&ids));
    }

    #[test]
    fn the_id_is_a_version_8_uuid() {
        let id = batch_id(&["5f2c9d0c6d8e4e3a9d4c1b2a3f4e5d6c"]);
        assert_eq!(id.len(), 36);
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
        assert!(!id.chars().any(|c| c.is_ascii_uppercase()));
        assert!(parts[2].starts_with('8'), "{id}");
        assert!(
            matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'),
            "{id}"
        );
        let empty = batch_id::<&str>(&[]);
        assert_eq!(empty.len(), 36);
    }

    #[test]
    fn the_report_is_the_events_as_sent() {
        use kv_model::{ClickBatch, ClickEvent, Device};
        let event = ClickEvent {
            host: "go.example.com".into(),
            short_code: Some("abc".into()),
            group_id: "g".into(),
            at: 1_700_000_000_000,
            country: Some("DE".into()),
            referer_host: None,
            device: Device::Mobile,
            id: None,
            ..ClickEvent::default()
        };
        let text = serde_json::to_string(&event).unwrap();
        assert!(is_event_text(&text));
        let id = batch_id(&["m1", "m2"]);
        let body = report_body(
            &id,
            &[
                ("m1".into(), text.clone()),
                ("m\"2".into(), format!(" {text}\n")),
                ("m3".into(), "{ }".into()),
            ],
        );
        let report: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(report["batch_id"], id.as_str());
        assert_eq!(report["events"][2], serde_json::json!({"id": "m3"}));
        let report: ClickBatch = serde_json::from_str(&report_body(
            &id,
            &[("m1".into(), text.clone()), ("m\"2".into(), text)],
        ))
        .unwrap();
        let with = |id: &str| ClickEvent {
            id: Some(id.into()),
            ..event.clone()
        };
        assert_eq!(report.events, [with("m1"), with("m\"2")]);
        let empty: ClickBatch = serde_json::from_str(&report_body(&id, &[])).unwrap();
        assert!(empty.events.is_empty());
        for not_an_event in ["", "{", "[]", "\"text\"", "42", "null"] {
            assert!(!is_event_text(not_an_event), "{not_an_event:?}");
        }
    }

    #[test]
    fn the_origins_answer_decides() {
        assert_eq!(batch_action(clicks_answer(Ok(200))), BatchAction::Ack);
        for retried in [
            Ok(500),
            Ok(503),
            Ok(408),
            Ok(429),
            Err(Failure::Timeout),
            Err(Failure::Transport),
        ] {
            assert_eq!(
                batch_action(clicks_answer(retried)),
                BatchAction::Retry,
                "{retried:?}"
            );
        }
        for refused in [400, 401, 413, 422] {
            assert_eq!(
                batch_action(clicks_answer(Ok(refused))),
                BatchAction::DeadLetter,
                "{refused}"
            );
        }
    }
}
