//! Click delivery through Cloudflare Queues (wasm32 only): the producer side (a counted request's event sent to
//! `CLICK_QUEUE` after the response) and the `queue` entry point that consumes the queue and reports each batch to
//! the origin. What to do with the origin's answer is [`crate::click_queue`]'s (host-tested).

use std::rc::Rc;

use wasm_bindgen::JsValue;
use worker::{
    Context, Env, MessageBatch, MessageExt, Queue, QueueContentType, RawMessageBuilder,
    SendMessage, event,
};

use super::{emit, isolate_config, origin_io};
use crate::analytics::ClickEvent;
use crate::click_queue::{self, BatchAction};
use crate::log;
use crate::origin::{self, Delivery};

/// The click queue's producer binding, when the deployment has one.
pub(super) fn producer(env: &Env) -> Option<Queue> {
    env.queue(click_queue::QUEUE_BINDING).ok()
}

/// Sends a click event to the queue; if that fails, falls back to the isolate's buffer and a direct report when
/// the origin is configured (else the event is lost, and logged). The message is the event's JSON as text, made
/// with the serde_json the worker has anyway (a JSON message would go through serde-wasm-bindgen), and the
/// consumer passes it on to the origin without parsing it ([`click_queue::report_body`]).
pub(super) async fn send(queue: Queue, event: ClickEvent, origin: Option<Rc<origin::Origin>>) {
    let text = serde_json::to_string(&event).unwrap_or_default();
    let message = RawMessageBuilder::new(JsValue::from_str(&text))
        .build_with_content_type(QueueContentType::Text);
    let Err(error) = queue.send_raw(message).await else {
        return;
    };
    emit(log::click_queue_send_failed(
        &error.to_string(),
        origin.is_some(),
    ));
    if let Some(origin) = origin {
        origin_io::buffer_click(event);
        origin_io::flush_clicks(origin).await;
    }
}

/// The queue consumer: one batch of click events (at most the consumer's `max_batch_size`), reported to the
/// origin as one report whose `batch_id` the message ids decide, then acknowledged, retried or dead-lettered as a
/// whole. Never returns an error: workers-rs turns one into a panic, which would take the isolate down.
#[event(queue)]
async fn queue(batch: MessageBatch<JsValue>, env: Env, _ctx: Context) -> worker::Result<()> {
    let mut ids = Vec::new();
    let mut bodies = Vec::new();
    let mut events = Vec::new();
    let mut invalid = Vec::new();
    for raw in batch.raw_iter() {
        let body = raw.body();
        match body.as_string().filter(|t| click_queue::is_event_text(t)) {
            Some(text) => {
                let id = raw.id();
                ids.push(id.clone());
                bodies.push(body);
                events.push((id, text));
            }
            None => invalid.push((raw, body)),
        }
    }
    // Messages that are not click events (a producer of another version?) can never be reported: straight to
    // the dead-letter queue, whatever happens to the rest.
    if !invalid.is_empty() {
        emit(log::queue_clicks_failed(
            None,
            invalid.len(),
            BatchAction::DeadLetter,
        ));
        let (messages, bodies): (Vec<_>, Vec<_>) = invalid.into_iter().unzip();
        if !dead_letter(&env, bodies).await {
            batch.retry_all();
            return Ok(());
        }
        // Acknowledged one by one, which outweighs a later `retry_all`: sent to the dead-letter queue once.
        for message in &messages {
            message.ack();
        }
    }
    if events.is_empty() {
        batch.ack_all();
        return Ok(());
    }
    let config = isolate_config(&env);
    let Some(origin) = config.origin.as_deref() else {
        emit(log::queue_clicks_failed(
            None,
            events.len(),
            BatchAction::Retry,
        ));
        batch.retry_all();
        return Ok(());
    };
    let body = click_queue::report_body(&click_queue::batch_id(&ids), &events);
    let answer = origin_io::post_clicks(origin, body).await;
    let delivery = origin::clicks_answer(answer);
    match click_queue::batch_action(delivery) {
        BatchAction::Ack => batch.ack_all(),
        BatchAction::Retry => {
            if let Delivery::Retry(failure) = delivery {
                emit(log::queue_clicks_failed(
                    Some(failure),
                    events.len(),
                    BatchAction::Retry,
                ));
            }
            batch.retry_all();
        }
        BatchAction::DeadLetter => {
            if let Delivery::Rejected(failure) = delivery {
                emit(log::queue_clicks_failed(
                    Some(failure),
                    events.len(),
                    BatchAction::DeadLetter,
                ));
            }
            if dead_letter(&env, bodies).await {
                batch.ack_all();
            } else {
                batch.retry_all();
            }
        }
    }
    Ok(())
}

/// Sends messages, as they came, to the dead-letter queue. `false` (and logged) when there is no such binding or
/// the send failed: the caller retries them instead, and Queues moves them to the consumer's dead-letter queue
/// after `max_retries`.
async fn dead_letter(env: &Env, bodies: Vec<JsValue>) -> bool {
    let count = bodies.len();
    let queue = match env.queue(click_queue::DEAD_LETTER_BINDING) {
        Ok(queue) => queue,
        Err(_) => {
            emit(log::dead_letter_send_failed(
                &format!("no binding {}", click_queue::DEAD_LETTER_BINDING),
                count,
            ));
            return false;
        }
    };
    let messages: Vec<SendMessage<JsValue>> = bodies
        .into_iter()
        .map(|body| {
            // Text as text; anything else a producer sent as a structured clone.
            let content_type = if body.is_string() {
                QueueContentType::Text
            } else {
                QueueContentType::V8
            };
            RawMessageBuilder::new(body).build_with_content_type(content_type)
        })
        .collect();
    match queue.send_raw_batch(messages).await {
        Ok(()) => true,
        Err(error) => {
            emit(log::dead_letter_send_failed(&error.to_string(), count));
            false
        }
    }
}
