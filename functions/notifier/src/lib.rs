//! The `notifier` function, triggered by the events queue (SQS FIFO). Each message is
//! one event; it goes as a signed webhook to every endpoint registered for its type
//! and resource (see `shared::notify`).
//!
//! The answer is an SQS partial batch response. A message that some endpoint did not
//! accept is reported as a failure, so SQS delivers it again (to the endpoints that
//! have not accepted it yet), and after `maxReceiveCount` tries moves it to the
//! dead-letter queue. Before answering, each failed message is hidden for the next wait
//! of the retry schedule (`shared::notify::RETRY_SCHEDULE`: 5 s, 5 min, 30 min, 2 h,
//! 5 h, 10 h, each with jitter; `ChangeMessageVisibility`), the wait its delivery log
//! shows as the next attempt: a receiver that is down is not hammered every few
//! seconds, nor left waiting the queue's whole visibility timeout after a one-off error.
//!
//! Order: the queue's message group is the event's subject (one reservation, one
//! waitlist entry), so a group's messages arrive in the order they were written, and
//! one group's messages are delivered one after the other here while different groups
//! go at once. Once a message of a group fails, the later messages of that group in
//! the batch are not sent and are reported as failures too: a receiver never sees
//! `reservation.confirmed` before the `reservation.held` that is still being retried.

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use chrono::Duration;
use lambda_runtime::{Error, LambdaEvent};
use shared::AppState;
use shared::notify::{Delivery, Sender, deliver, random_jitter, retry_wait};
use shared::outbox::Written;
use std::collections::HashMap;

/// What the handler needs: the application state and the HTTP sender, built once.
pub struct Notifier {
    pub state: AppState,
    pub sender: Sender,
    /// The events queue, to hide a failed message for its backoff; `None` leaves it to
    /// the queue's visibility timeout.
    pub queue: Option<EventsQueue>,
}

/// The queue the messages come from (`EVENTS_QUEUE_URL`).
pub struct EventsQueue {
    pub sqs: shared::sqs::Sqs,
    pub url: String,
}

impl Notifier {
    /// The notifier of a Lambda: the queue from `EVENTS_QUEUE_URL` when set. No I/O.
    pub fn from_env(state: AppState) -> Self {
        let queue = std::env::var("EVENTS_QUEUE_URL")
            .ok()
            .filter(|url| !url.is_empty())
            .map(|url| EventsQueue { sqs: shared::sqs::Sqs::from_env(), url });
        Notifier { state, sender: Sender::new(Sender::DEFAULT_TIMEOUT), queue }
    }
}

/// Which try of its message this delivery is (from 1).
fn try_number(message: &SqsMessage) -> u32 {
    message.attributes.get("ApproximateReceiveCount").and_then(|n| n.parse().ok()).unwrap_or(1)
}

/// Hides a failed message for `wait`, its backoff. A failure here only leaves the
/// message to the queue's own visibility timeout, so it is logged, not answered.
async fn back_off(notifier: &Notifier, message: &SqsMessage, wait: Duration) {
    let (Some(queue), Some(receipt)) = (&notifier.queue, message.receipt_handle.as_deref()) else { return };
    // SQS hides a message for 12 hours at most; the schedule's longest wait is less.
    let seconds = i32::try_from(wait.num_seconds().clamp(0, 43_200)).unwrap_or(43_200);
    if let Err(error) = queue.sqs.change_message_visibility(&queue.url, receipt, seconds).await {
        tracing::warn!(message_id = message.message_id.as_deref(), %error, "could not set the message's backoff");
    }
}

/// What became of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Processed {
    /// Every endpoint that asked for it has it.
    Delivered,
    /// Deliver it again: after `wait`, its backoff, or when the queue's visibility
    /// timeout ends when `wait` is `None` (its last try).
    Again { wait: Option<Duration> },
}

/// What became of a message, and what delivering it wrote of events: an endpoint it
/// disabled has its `webhook.endpoint_disabled` event written.
#[derive(Debug)]
pub struct Handled {
    pub processed: Processed,
    pub written: Written,
}

/// Delivers one message.
pub async fn process_message(notifier: &Notifier, message: &SqsMessage) -> Handled {
    let message_id = message.message_id.as_deref().unwrap_or("");
    let body = message.body.as_deref().unwrap_or("");
    let state = &notifier.state;
    let wait = retry_wait(try_number(message), random_jitter());
    let wrote = |disabled: usize| if disabled > 0 { Written::MaybeSome } else { Written::Nothing };
    let (processed, written) = match deliver(&state.pool, state.clock.as_ref(), &notifier.sender, body, wait).await {
        Ok(Delivery::Done { sent, disabled }) => {
            tracing::info!(message_id, sent, "event delivered");
            (Processed::Delivered, wrote(disabled))
        }
        Ok(Delivery::Retry { sent, failed, disabled }) => {
            tracing::warn!(
                message_id,
                sent,
                failed,
                "event not accepted by every endpoint; it will be delivered again"
            );
            (Processed::Again { wait }, wrote(disabled))
        }
        Ok(Delivery::Unreadable) => {
            tracing::error!(message_id, "unreadable event message; leaving it for the DLQ");
            (Processed::Again { wait }, Written::Nothing)
        }
        Err(e) => {
            // An endpoint disabled before the failure committed its event: a claim finds it.
            tracing::error!(message_id, error = %e, "event delivery failed; it will be delivered again");
            (Processed::Again { wait }, Written::MaybeSome)
        }
    };
    Handled { processed, written }
}

/// The message group of a FIFO message; on a standard queue each message is a group of
/// its own (such a queue keeps no order to keep).
fn group_of(message: &SqsMessage) -> &str {
    message.attributes.get("MessageGroupId").or(message.message_id.as_ref()).map_or("", String::as_str)
}

/// The indexes of the batch's messages by group, each group in the batch's order.
pub fn groups(records: &[SqsMessage]) -> Vec<Vec<usize>> {
    let mut order: Vec<Vec<usize>> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, m) in records.iter().enumerate() {
        let slot = *index.entry(group_of(m)).or_insert_with(|| {
            order.push(Vec::new());
            order.len() - 1
        });
        order[slot].push(i);
    }
    order
}

/// A message that failed, by its index in the batch, with its wait.
type Failed = (usize, Option<Duration>);

/// The Lambda handler: groups at once (as many as the pool has connections; a message
/// holds one only to read and to record), each group's messages in order, stopping at
/// the group's first failure.
pub async fn handler(notifier: &Notifier, event: LambdaEvent<SqsEvent>) -> Result<SqsBatchResponse, Error> {
    use futures::StreamExt;
    let records = event.payload.records;
    // Each failed message with its wait (the later messages of its group wait as long),
    // and what the batch wrote of events: its only event is an endpoint's
    // `webhook.endpoint_disabled`, which goes out before the answer; a batch that
    // disabled nothing runs no claim.
    let handled: Vec<(Vec<Failed>, Written)> = futures::stream::iter(groups(&records).into_iter().map(|group| {
        let records = &records;
        async move {
            let mut wrote = Written::Nothing;
            for (n, &i) in group.iter().enumerate() {
                let Handled { processed, written } = process_message(notifier, &records[i]).await;
                wrote = wrote.and(written);
                if let Processed::Again { wait } = processed {
                    return (group[n..].iter().map(|&j| (j, wait)).collect(), wrote);
                }
            }
            (Vec::new(), wrote)
        }
    }))
    .buffer_unordered(notifier.state.config.database.pool_size.max(1))
    .collect()
    .await;
    let (mut failed, mut written) = (Vec::new(), Written::Nothing);
    for (group_failed, group_written) in handled {
        failed.extend(group_failed);
        written = written.and(group_written);
    }
    shared::outbox::publish_written(&notifier.state, written).await;
    failed.sort_unstable_by_key(|(i, _)| *i);
    futures::future::join_all(failed.iter().filter_map(|&(i, wait)| Some(back_off(notifier, &records[i], wait?))))
        .await;
    let mut response = SqsBatchResponse::default();
    for (i, _) in failed {
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = records[i].message_id.clone().unwrap_or_default();
        response.batch_item_failures.push(failure);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, group: Option<&str>) -> SqsMessage {
        let mut m = SqsMessage::default();
        m.message_id = Some(id.into());
        if let Some(g) = group {
            m.attributes.insert("MessageGroupId".into(), g.into());
        }
        m
    }

    #[test]
    fn a_message_without_a_receive_count_is_on_its_first_try() {
        let mut m = message("1", None);
        assert_eq!(try_number(&m), 1);
        m.attributes.insert("ApproximateReceiveCount".into(), "3".into());
        assert_eq!(try_number(&m), 3);
    }

    #[test]
    fn a_batch_splits_into_its_message_groups_in_order() {
        let batch = [message("1", Some("a")), message("2", Some("b")), message("3", Some("a")), message("4", None)];
        assert_eq!(groups(&batch), [vec![0, 2], vec![1], vec![3]]);
    }
}
