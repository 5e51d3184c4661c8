//! The `intent-worker` function, triggered by the intents queue (SQS). Each message
//! names an intent; the worker claims it under a lease, writes to the system of record
//! outside any transaction, and settles it (see `shared::intents`).
//!
//! The answer is an SQS partial batch response: a message whose work could not be done
//! now (seat busy, breaker open, database unavailable) is reported as a batch item
//! failure so SQS delivers it again; a message that cannot be read at all is reported
//! too, until the redrive policy moves it to the dead-letter queue. Duplicates and
//! redeliveries do nothing twice: only a `REQUESTED` intent can be claimed.

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::{Error, LambdaEvent};
use shared::AppState;
use shared::intents::{self, Processed};
use shared::outbox::IntentMessage;
use tracing::Instrument;
use uuid::Uuid;

/// Reads the intent id from a message body (the outbox envelope).
pub fn intent_of(body: &str) -> Option<Uuid> {
    IntentMessage::from_body(body).map(|m| m.intent_id)
}

/// Processes one message; `false` means "deliver it again".
pub async fn process_message(state: &AppState, message: &SqsMessage) -> bool {
    let Some(intent_id) = message.body.as_deref().and_then(intent_of) else {
        tracing::error!(message_id = ?message.message_id, "unreadable intent message; leaving it for the DLQ");
        return false;
    };
    let Some(upstream) = state.upstream.as_deref() else {
        tracing::error!("no UPSTREAM_BASE_URL configured; cannot execute intents");
        return false;
    };
    // Every line about this message, down to the upstream call, names the intent.
    let span = tracing::info_span!("intent", %intent_id, message_id = message.message_id.as_deref().unwrap_or(""));
    match intents::process(state, upstream, intent_id).instrument(span.clone()).await {
        Ok(Processed::Retry) => false,
        Ok(outcome) => {
            span.in_scope(|| tracing::info!(?outcome, "intent message processed"));
            true
        }
        Err(e) => {
            span.in_scope(|| tracing::error!(error = %e, "intent processing failed; it will be delivered again"));
            false
        }
    }
}

/// The Lambda handler: the messages of a batch are processed concurrently, as many at
/// once as the pool has connections (each holds at most one, and none while the
/// upstream is called), so none of them fails for want of a connection.
pub async fn handler(state: &AppState, event: LambdaEvent<SqsEvent>) -> Result<SqsBatchResponse, Error> {
    use futures::StreamExt;
    let records = event.payload.records;
    let outcomes: Vec<bool> = futures::stream::iter(records.iter().map(|m| process_message(state, m)))
        .buffered(state.config.database.pool_size.max(1))
        .collect()
        .await;
    // The confirmations and releases committed: their events go out before the answer.
    shared::outbox::publish_written(state, shared::outbox::Written::MaybeSome).await;
    let mut response = SqsBatchResponse::default();
    for (message, ok) in records.iter().zip(outcomes) {
        if !ok {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = message.message_id.clone().unwrap_or_default();
            response.batch_item_failures.push(failure);
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::intent_of;

    #[test]
    fn an_intent_message_names_its_intent_and_anything_else_is_unreadable() {
        let id = uuid::Uuid::now_v7();
        let body = format!(
            r#"{{"id":"{id}","type":"intent.requested","subject_id":"{id}","occurred_at":"2027-01-01T00:00:00Z",
                "data":{{"intent_id":"{id}","reservation_id":"{id}"}}}}"#
        );
        assert_eq!(intent_of(&body), Some(id));
        assert_eq!(intent_of(r#"{"data":{"intent_id":"not-a-uuid"}}"#), None);
        assert_eq!(intent_of("not json"), None);
    }
}
