//! Webhooks: an account's endpoints (receivers) and the events its changes send them, over the transactional
//! outbox. A change writes its event, naming the endpoints subscribed to it, in its own transaction ([`emit`]): a
//! committed change always has its event, a rolled-back one never does. The delivery loops (one per origin
//! process) fan each event out into one delivery per endpoint ([`fanout`]), then claim due deliveries under a
//! lease, send them, and record each attempt ([`delivery`], [`record`]).
//!
//! - [`endpoints`]: the endpoints' life (at most [`MAX_WEBHOOKS_PER_ACCOUNT`] per account, exact under concurrency),
//!   their secrets, and the log of attempts an account reads.
//! - [`emit`]: writing events on the change's own connection.
//! - [`fanout`]: turning events into deliveries, queued per (endpoint, key) in the events' order.
//! - [`delivery`]: claiming due deliveries (the heads of their queues), redelivery and test pings.
//! - [`record`]: recording outcomes (the retry schedule is the caller's, the `webhook-sender` crate's), ending a
//!   queue's head and promoting the next, disabling an endpoint that fails for too long.
//! - [`round`]: a round of the delivery loop, its records and its next claim, in one transaction.
//!
//! What the store does not know: how a URL is checked (the API and the dashboard check it with `webhook-sender`
//! before they store it) and how a body is signed and sent (the origin's delivery loop).

mod delivery;
pub(crate) mod emit;
mod endpoints;
mod fanout;
mod record;
mod round;

pub use delivery::DueDelivery;
pub use endpoints::{AttemptPage, AttemptRow, NewWebhook, WebhookEndpoint, WebhookPatch};
pub use record::{Attempted, DISABLE_AFTER};

use crate::domain::ValidationError;

/// Most endpoints an account may have.
pub const MAX_WEBHOOKS_PER_ACCOUNT: u32 = 20;

/// Days the log of attempts, finished deliveries and their events are kept.
pub const WEBHOOK_RETENTION_DAYS: u32 = 30;

/// Longest description of an endpoint, in characters.
pub const MAX_WEBHOOK_DESCRIPTION_CHARS: usize = 500;

/// The kinds of event an endpoint receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventType {
    /// A link was created (`data`: the link as listed).
    LinkCreated,
    /// A link was changed, paused or resumed (`data`: the link as listed, after the change).
    LinkUpdated,
    /// A link was deleted (`data`: its last state, as listed).
    LinkDeleted,
    /// A link was clicked (`data`: `{"link_id", "clicks": [...]}`, the clicks of one ingested report).
    LinkClicked,
    /// A group was created (`data`: the group, without its key).
    GroupCreated,
    /// A group was renamed or its settings replaced (`data`: the group, without its key).
    GroupUpdated,
    /// A group was deleted (`data`: its last state, and where its links went).
    GroupDeleted,
    /// A test event, sent only by `POST webhooks/{id}/test`; never subscribed to.
    Ping,
}

impl EventType {
    /// The types an endpoint may subscribe to, in the order they are listed.
    pub const SUBSCRIBABLE: [EventType; 7] = [
        Self::LinkCreated,
        Self::LinkUpdated,
        Self::LinkDeleted,
        Self::LinkClicked,
        Self::GroupCreated,
        Self::GroupUpdated,
        Self::GroupDeleted,
    ];

    /// The type's name on the wire (`type` of the payload, `events` of an endpoint).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LinkCreated => "link.created",
            Self::LinkUpdated => "link.updated",
            Self::LinkDeleted => "link.deleted",
            Self::LinkClicked => "link.clicked",
            Self::GroupCreated => "group.created",
            Self::GroupUpdated => "group.updated",
            Self::GroupDeleted => "group.deleted",
            Self::Ping => "ping",
        }
    }

    /// The type named `name`, if it is one (any of the eight, `ping` included).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::SUBSCRIBABLE
            .into_iter()
            .chain([Self::Ping])
            .find(|t| t.as_str() == name)
    }

    /// A subscription list: each name one of [`Self::SUBSCRIBABLE`], at least one; duplicates collapse and the
    /// list comes back in [`Self::SUBSCRIBABLE`]'s order. The error names the first name refused.
    pub fn parse_subscriptions<S: AsRef<str>>(names: &[S]) -> Result<Vec<Self>, UnknownEvent> {
        if names.is_empty() {
            return Err(UnknownEvent::Empty);
        }
        let mut types = Vec::with_capacity(names.len());
        for name in names {
            let name = name.as_ref();
            match Self::from_name(name) {
                Some(Self::Ping) => return Err(UnknownEvent::Ping),
                Some(t) => types.push(t),
                None => return Err(UnknownEvent::Unknown(name.chars().take(100).collect())),
            }
        }
        types.sort_unstable();
        types.dedup();
        Ok(types)
    }
}

/// Why a subscription list was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnknownEvent {
    /// No event at all.
    #[error("events must name at least one event type")]
    Empty,
    /// `ping` is sent on request only.
    #[error("ping cannot be subscribed to: it is sent by POST webhooks/{{id}}/test only")]
    Ping,
    /// A name that is no event type.
    #[error(
        "unknown event type {0:?}: the types are link.created, link.updated, link.deleted, link.clicked, \
         group.created, group.updated and group.deleted"
    )]
    Unknown(String),
}

impl From<UnknownEvent> for ValidationError {
    fn from(e: UnknownEvent) -> Self {
        ValidationError(e.to_string())
    }
}

/// The stored subscription list (a JSON array of names); names this build does not know are skipped.
fn events_from_json(raw: &str) -> Vec<EventType> {
    serde_json::from_str::<Vec<String>>(raw)
        .unwrap_or_default()
        .iter()
        .filter_map(|n| EventType::from_name(n))
        .collect()
}

/// The stored form of a subscription list.
fn events_to_json(events: &[EventType]) -> String {
    serde_json::Value::from(events.iter().map(|e| e.as_str()).collect::<Vec<_>>()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_are_checked_collapsed_and_ordered() {
        assert_eq!(
            EventType::parse_subscriptions(&["link.clicked", "link.created", "link.clicked"]),
            Ok(vec![EventType::LinkCreated, EventType::LinkClicked])
        );
        assert_eq!(
            EventType::parse_subscriptions::<&str>(&[]),
            Err(UnknownEvent::Empty)
        );
        assert_eq!(
            EventType::parse_subscriptions(&["ping"]),
            Err(UnknownEvent::Ping)
        );
        assert_eq!(
            EventType::parse_subscriptions(&["link.created", "link.exploded"]),
            Err(UnknownEvent::Unknown("link.exploded".to_owned()))
        );
        for t in EventType::SUBSCRIBABLE {
            assert_eq!(EventType::from_name(t.as_str()), Some(t));
        }
    }

    #[test]
    fn the_stored_list_round_trips_and_skips_unknown_names() {
        let list = vec![EventType::LinkCreated, EventType::GroupDeleted];
        assert_eq!(events_from_json(&events_to_json(&list)), list);
        assert_eq!(
            events_from_json(r#"["link.created","link.future"]"#),
            vec![EventType::LinkCreated]
        );
        assert!(events_from_json("not json").is_empty());
    }
}
