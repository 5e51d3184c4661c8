//! Webhook endpoints, registered by admins: create (the secret is made here and
//! answered once), read, rotate the secret (the old one signs beside the new one for a
//! while), delete; and their delivery log: send one logged event again, recover a
//! disabled endpoint. What is sent to them is `crate::notify`'s.

use super::{BookingError, invalid};
use crate::db::{GenericClient, resources, webhooks};
use crate::domain::webhooks::{
    NewWebhook, QueuedResend, Recovery, RotatedSecret, SigningSecret, Webhook, check_event_types, check_url,
};
use crate::domain::{FieldError, Principal};
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub struct WebhookRequest {
    pub url: String,
    pub event_types: Vec<String>,
    /// `None`: the events of every resource.
    pub resource_id: Option<Uuid>,
}

pub async fn create_webhook(
    c: &impl GenericClient,
    by: &Principal,
    request: WebhookRequest,
    now: DateTime<Utc>,
) -> Result<NewWebhook, BookingError> {
    let mut errors = Vec::new();
    if let Err(message) = check_url(&request.url) {
        errors.push(FieldError::new("url", message));
    }
    let event_types = check_event_types(request.event_types, &mut errors);
    if !errors.is_empty() {
        return Err(BookingError::Validation(errors));
    }
    // An endpoint for an archived resource is allowed: its bookings still change.
    if let Some(resource_id) = request.resource_id
        && resources::get(c, resource_id).await?.is_none()
    {
        return Err(invalid("resource_id", "names no resource"));
    }
    let secret = SigningSecret::generate();
    let webhook = webhooks::insert(
        c,
        &webhooks::NewEndpoint {
            id: Uuid::now_v7(),
            url: &request.url,
            secret: &secret,
            resource_id: request.resource_id,
            event_types: &event_types,
            created_by: &by.id,
            created_at: now,
        },
    )
    .await?;
    Ok(NewWebhook { webhook, secret })
}

/// How long a rotated-out secret may keep signing: at most a week, a day unless asked.
pub const KEEP_PREVIOUS_MAX_SECONDS: i64 = 7 * 24 * 3600;
pub const KEEP_PREVIOUS_DEFAULT_SECONDS: i64 = 24 * 3600;

/// Gives a live endpoint a new secret. The previous one keeps signing beside it for
/// `keep_previous_seconds` (0: it stops at once), so that a receiver can move to the
/// new secret without refusing a delivery in between.
pub async fn rotate_webhook_secret(
    c: &impl GenericClient,
    id: Uuid,
    keep_previous_seconds: i64,
    now: DateTime<Utc>,
) -> Result<RotatedSecret, BookingError> {
    if !(0..=KEEP_PREVIOUS_MAX_SECONDS).contains(&keep_previous_seconds) {
        return Err(invalid("keep_previous_seconds", format!("must be 0 to {KEEP_PREVIOUS_MAX_SECONDS}")));
    }
    let secret = SigningSecret::generate();
    let until = now + chrono::Duration::seconds(keep_previous_seconds);
    let (webhook, previous_secret_expires_at) =
        webhooks::rotate_secret(c, id, &secret, until, now).await?.ok_or(BookingError::WebhookNotFound)?;
    Ok(RotatedSecret { webhook, secret, previous_secret_expires_at })
}

pub async fn get_webhook(c: &impl GenericClient, id: Uuid) -> Result<Webhook, BookingError> {
    webhooks::get(c, id).await?.ok_or(BookingError::WebhookNotFound)
}

/// Deletes an endpoint: nothing more is sent to it, including retries of events it has
/// not accepted yet. Deleting it again is a 404.
pub async fn delete_webhook(c: &impl GenericClient, id: Uuid, now: DateTime<Utc>) -> Result<(), BookingError> {
    if webhooks::delete(c, id, now).await? { Ok(()) } else { Err(BookingError::WebhookNotFound) }
}

/// Queues the event of one logged attempt to be sent again to its endpoint (the
/// sweeper sends it within a minute, and logs the attempt). Any attempt will do, an
/// accepted one too: the receiver asked for it again.
pub async fn retry_webhook_delivery(
    c: &impl GenericClient,
    by: &Principal,
    endpoint_id: Uuid,
    delivery_id: Uuid,
    now: DateTime<Utc>,
) -> Result<QueuedResend, BookingError> {
    let webhook = get_webhook(c, endpoint_id).await?;
    let event_id =
        webhooks::attempted_event(c, delivery_id, endpoint_id).await?.ok_or(BookingError::WebhookDeliveryNotFound)?;
    if webhook.disabled_at.is_some() {
        return Err(BookingError::WebhookDisabled);
    }
    let requested_at = webhooks::queue_resend(c, endpoint_id, event_id, &by.id, now).await?;
    Ok(QueuedResend { endpoint_id, event_id, requested_at })
}

/// Enables an endpoint again (disabled or not) and queues a resend of every event its
/// log shows attempted since `since` and never accepted, the ones logged while it was
/// disabled included.
pub async fn recover_webhook(
    c: &impl GenericClient,
    by: &Principal,
    endpoint_id: Uuid,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Recovery, BookingError> {
    if since > now {
        return Err(invalid("since", "must not be in the future"));
    }
    let webhook = webhooks::enable(c, endpoint_id).await?.ok_or(BookingError::WebhookNotFound)?;
    let resends_queued = webhooks::queue_failed_since(c, endpoint_id, since, &by.id, now).await?;
    Ok(Recovery { webhook, resends_queued })
}
