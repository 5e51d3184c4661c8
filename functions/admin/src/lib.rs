//! The `admin` function: a resource's life. `POST /v1/resources` (create),
//! `PATCH /v1/resources/{id}` (settings, capacity, metadata), both inside the
//! idempotency guard, and `DELETE /v1/resources/{id}` (archive) are for admins;
//! `GET /v1/resources` (the list, newest first) and `GET /v1/resources/{id}` are for
//! every principal.
//!
//! Webhook endpoints are for admins only: `POST /v1/webhooks` (inside the idempotency
//! guard; its answer is the one place the signing secret is shown), `GET /v1/webhooks`,
//! `GET /v1/webhooks/{id}` (never the secret), `POST /v1/webhooks/{id}/rotate-secret`
//! (a new secret, shown once; the old one signs beside it for a while) and
//! `DELETE /v1/webhooks/{id}`. An endpoint's delivery log is its owner's (the admin who
//! registered it) and every admin's: `GET /v1/webhooks/{id}/deliveries`,
//! `POST /v1/webhooks/{id}/deliveries/{delivery_id}/retry` (send that event again) and
//! `POST /v1/webhooks/{id}/recover` (enable it again and resend what it failed to
//! take), the two POSTs inside the idempotency guard.
//!
//! Calendar feeds: `POST /v1/feeds` makes one of the caller's own bookings (`{}`) or,
//! for admins, of a resource's (`{"resource_id"}`), and answers its URL, the one time
//! it is shown; `DELETE /v1/feeds/{id}` revokes it and `POST /v1/feeds/{id}/rotate`
//! gives it a new URL, for its owner and for admins. Not inside the idempotency guard:
//! a stored answer would keep the URL's token, which is stored nowhere else; a retried
//! create makes a second feed, which its owner can revoke.
//!
//! Pools, which an item of a booking is picked from: `POST /v1/pools`,
//! `PATCH /v1/pools/{id}` (both inside the idempotency guard) and
//! `DELETE /v1/pools/{id}` are for admins; `GET /v1/pools` and `GET /v1/pools/{id}` for
//! every principal.

use http::StatusCode;
use lambda_http::{Body, Error, Request, Response};
use shared::AppState;
use shared::booking::{self, NewPool, NewResource, PoolChange, ResourceChange, ResourceDefaults, WebhookRequest};
use shared::domain::{Authority, PoolStrategy, Principal};
use shared::http::fields::{self, Fields};
use shared::http::{
    Answered, ApiError, EmptyBody, Function, Op, Reply, fingerprint, json_body, principal, resources_query,
    respond_publishing, route_for, run_idempotent, waitlist_query,
};

pub async fn handler(state: &AppState, req: Request) -> Result<Response<Body>, Error> {
    // Each request may have written events: a claim after it publishes them.
    Ok(respond_publishing(state, &req, async { serve(state, &req).await.map(Answered::from) }).await)
}

async fn serve(state: &AppState, req: &Request) -> Result<Response<Body>, ApiError> {
    let matched = route_for(req.method(), req.uri().path(), Function::Admin)?;
    let who = principal(req, &state.config)?;
    match matched.spec.op {
        Op::CreateResource => {
            if !who.admin {
                return Err(ApiError::Forbidden);
            }
            let body = json_body(req, EmptyBody::Refused)?;
            let new = body.read(create_resource)?;
            let fingerprint = fingerprint(req, &body.canonical);
            run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                let defaults = ResourceDefaults {
                    hold_ttl_seconds: state.config.hold_ttl_seconds,
                    offer_ttl_seconds: state.config.offer_ttl_seconds,
                };
                let r = booking::create_resource(tx, &who, new, defaults, state.clock.now()).await?;
                Ok(Reply::json(StatusCode::CREATED, &r).with_location(format!("/v1/resources/{}", r.id)))
            })
            .await
        }
        Op::ListResources => {
            let (include_archived, page) = resources_query(req)?;
            let client = state.pool.get().await?;
            let key = state.cursor_key(&client).await?;
            Ok(Reply::json(StatusCode::OK, &booking::list_resources(&client, key, include_archived, page).await?)
                .into_response())
        }
        Op::GetResource => {
            let id = matched.id(ApiError::ResourceNotFound)?;
            let client = state.pool.get().await?;
            Ok(Reply::json(StatusCode::OK, &booking::get_resource(&client, id).await?).into_response())
        }
        Op::UpdateResource => {
            if !who.admin {
                return Err(ApiError::Forbidden);
            }
            let id = matched.id(ApiError::ResourceNotFound)?;
            let body = json_body(req, EmptyBody::Refused)?;
            let change = body.read(update_resource)?;
            let fingerprint = fingerprint(req, &body.canonical);
            let limits = state.config.limits();
            run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                let r = booking::update_resource(tx, id, change, limits, state.clock.now()).await?;
                Ok(Reply::json(StatusCode::OK, &r))
            })
            .await
        }
        Op::ArchiveResource => {
            if !who.admin {
                return Err(ApiError::Forbidden);
            }
            let id = matched.id(ApiError::ResourceNotFound)?;
            let mut client = state.pool.get().await?;
            let tx = client.transaction().await?;
            let r = booking::archive_resource(&tx, id, state.clock.now()).await?;
            tx.commit().await?;
            Ok(Reply::json(StatusCode::OK, &r).into_response())
        }
        Op::CreateWebhook | Op::ListWebhooks | Op::GetWebhook | Op::DeleteWebhook | Op::RotateWebhookSecret
            if !who.admin =>
        {
            Err(ApiError::Forbidden)
        }
        Op::CreateWebhook => {
            let body = json_body(req, EmptyBody::Refused)?;
            let request = body.read(create_webhook)?;
            let fingerprint = fingerprint(req, &body.canonical);
            run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                let w = booking::create_webhook(tx, &who, request, state.clock.now()).await?;
                Ok(Reply::json(StatusCode::CREATED, &w).with_location(format!("/v1/webhooks/{}", w.webhook.id)))
            })
            .await
        }
        Op::ListWebhooks => {
            // The same parameters as the waitlist's page: `limit` and `cursor`.
            let page = waitlist_query(req)?;
            let client = state.pool.get().await?;
            let key = state.cursor_key(&client).await?;
            Ok(Reply::json(StatusCode::OK, &booking::list_webhooks(&client, key, page).await?).into_response())
        }
        Op::GetWebhook => {
            let id = matched.id(ApiError::WebhookNotFound)?;
            let client = state.pool.get().await?;
            Ok(Reply::json(StatusCode::OK, &booking::get_webhook(&client, id).await?).into_response())
        }
        Op::DeleteWebhook => {
            let id = matched.id(ApiError::WebhookNotFound)?;
            let client = state.pool.get().await?;
            booking::delete_webhook(&client, id, state.clock.now()).await?;
            Ok(Reply::empty(StatusCode::NO_CONTENT).into_response())
        }
        Op::RotateWebhookSecret => {
            let id = matched.id(ApiError::WebhookNotFound)?;
            let body = json_body(req, EmptyBody::Allowed)?;
            let keep = body.read(|f| {
                Some(
                    f.optional("keep_previous_seconds", fields::integer(0, booking::KEEP_PREVIOUS_MAX_SECONDS as i32))
                        .map_or(booking::KEEP_PREVIOUS_DEFAULT_SECONDS, i64::from),
                )
            })?;
            let fingerprint = fingerprint(req, &body.canonical);
            run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                let rotated = booking::rotate_webhook_secret(tx, id, keep, state.clock.now()).await?;
                Ok(Reply::json(StatusCode::OK, &rotated))
            })
            .await
        }
        Op::ListWebhookDeliveries => {
            let id = matched.id(ApiError::WebhookNotFound)?;
            // The same parameters as the waitlist's page: `limit` and `cursor`.
            let page = waitlist_query(req)?;
            let client = state.pool.get().await?;
            may_read_log(&client, &who, id).await?;
            let key = state.cursor_key(&client).await?;
            Ok(Reply::json(StatusCode::OK, &booking::list_webhook_deliveries(&client, key, id, page).await?)
                .into_response())
        }
        Op::RetryWebhookDelivery => {
            let id = matched.id(ApiError::WebhookNotFound)?;
            let delivery_id = matched.delivery_id(ApiError::WebhookDeliveryNotFound)?;
            may_read_log(&state.pool.get().await?, &who, id).await?;
            let body = json_body(req, EmptyBody::Allowed)?;
            body.read(|_| Some(()))?;
            let fingerprint = fingerprint(req, &body.canonical);
            run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                let queued = booking::retry_webhook_delivery(tx, &who, id, delivery_id, state.clock.now()).await?;
                Ok(Reply::json(StatusCode::ACCEPTED, &queued))
            })
            .await
        }
        Op::RecoverWebhook => {
            let id = matched.id(ApiError::WebhookNotFound)?;
            may_read_log(&state.pool.get().await?, &who, id).await?;
            let body = json_body(req, EmptyBody::Refused)?;
            let since = body.read(|f| f.required("since", fields::timestamp).map(|t| t.0))?;
            let fingerprint = fingerprint(req, &body.canonical);
            run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                let recovery = booking::recover_webhook(tx, &who, id, since, state.clock.now()).await?;
                Ok(Reply::json(StatusCode::OK, &recovery))
            })
            .await
        }
        Op::CreateFeed => {
            let body = json_body(req, EmptyBody::Allowed)?;
            let resource_id = body.read(|f| Some(f.nullable("resource_id", fields::uuid)))?;
            if resource_id.is_some() && !who.admin {
                return Err(ApiError::Forbidden);
            }
            let client = state.pool.get().await?;
            let feed = booking::create_feed(&client, &who, resource_id, state.clock.now()).await?;
            Ok(Reply::json(StatusCode::CREATED, &feed).with_location(feed.url.clone()).into_response())
        }
        Op::DeleteFeed => {
            let id = matched.id(ApiError::FeedNotFound)?;
            booking::delete_feed(&state.pool.get().await?, &who, id).await?;
            Ok(Reply::empty(StatusCode::NO_CONTENT).into_response())
        }
        Op::RotateFeed => {
            let id = matched.id(ApiError::FeedNotFound)?;
            let body = json_body(req, EmptyBody::Allowed)?;
            body.read(|_| Some(()))?;
            let feed = booking::rotate_feed(&state.pool.get().await?, &who, id, state.clock.now()).await?;
            Ok(Reply::json(StatusCode::OK, &feed).into_response())
        }
        Op::CreatePool | Op::UpdatePool | Op::DeletePool if !who.admin => Err(ApiError::Forbidden),
        Op::CreatePool => {
            let body = json_body(req, EmptyBody::Refused)?;
            let new = body.read(create_pool)?;
            let fingerprint = fingerprint(req, &body.canonical);
            run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                let p = booking::create_pool(tx, &who, new, state.clock.now()).await?;
                Ok(Reply::json(StatusCode::CREATED, &p).with_location(format!("/v1/pools/{}", p.id)))
            })
            .await
        }
        Op::ListPools => {
            let page = waitlist_query(req)?;
            let client = state.pool.get().await?;
            let key = state.cursor_key(&client).await?;
            Ok(Reply::json(StatusCode::OK, &booking::list_pools(&client, key, page).await?).into_response())
        }
        Op::GetPool => {
            let id = matched.id(ApiError::PoolNotFound)?;
            let client = state.pool.get().await?;
            Ok(Reply::json(StatusCode::OK, &booking::get_pool(&client, id).await?).into_response())
        }
        Op::UpdatePool => {
            let id = matched.id(ApiError::PoolNotFound)?;
            let body = json_body(req, EmptyBody::Refused)?;
            let change = body.read(update_pool)?;
            let fingerprint = fingerprint(req, &body.canonical);
            run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                let p = booking::update_pool(tx, id, change, state.clock.now()).await?;
                Ok(Reply::json(StatusCode::OK, &p))
            })
            .await
        }
        Op::DeletePool => {
            let id = matched.id(ApiError::PoolNotFound)?;
            let client = state.pool.get().await?;
            booking::delete_pool(&client, id).await?;
            Ok(Reply::empty(StatusCode::NO_CONTENT).into_response())
        }
        _ => Err(ApiError::RouteNotFound),
    }
}

const STRATEGIES: &[&str] = &["least_booked", "ordered"];

/// An endpoint's delivery log is for admins and for the principal that registered it;
/// anyone else gets 403 whether or not the endpoint exists, so ids are not probed.
async fn may_read_log(c: &impl shared::db::GenericClient, who: &Principal, id: uuid::Uuid) -> Result<(), ApiError> {
    if who.admin {
        return Ok(());
    }
    match booking::get_webhook(c, id).await {
        Ok(w) if w.created_by == who.id => Ok(()),
        Ok(_) | Err(booking::BookingError::WebhookNotFound) => Err(ApiError::Forbidden),
        Err(e) => Err(e.into()),
    }
}

fn strategy(word: &str) -> PoolStrategy {
    word.parse().unwrap_or(PoolStrategy::LeastBooked)
}

/// The body of `POST /v1/pools`.
fn create_pool(f: &mut Fields<'_>) -> Option<NewPool> {
    let name = f.required("name", fields::text(1, 200));
    let resource_ids = f.required("resource_ids", fields::uuids(booking::MAX_MEMBERS));
    let strategy = f.optional("strategy", fields::one_of(STRATEGIES)).map_or(PoolStrategy::LeastBooked, strategy);
    Some(NewPool { name: name?, resource_ids: resource_ids?, strategy })
}

/// The body of `PATCH /v1/pools/{id}`: any of these, at least one.
fn update_pool(f: &mut Fields<'_>) -> Option<PoolChange> {
    let change = PoolChange {
        name: f.optional("name", fields::text(1, 200)),
        resource_ids: f.optional("resource_ids", fields::uuids(booking::MAX_MEMBERS)),
        strategy: f.optional("strategy", fields::one_of(STRATEGIES)).map(strategy),
    };
    if f.is_empty() {
        f.refuse("body", "must change at least one of name, resource_ids, strategy");
        return None;
    }
    Some(change)
}

/// The body of `POST /v1/webhooks`. Which URLs and event types are allowed is the
/// booking layer's rule.
fn create_webhook(f: &mut Fields<'_>) -> Option<WebhookRequest> {
    let url = f.required("url", fields::text(1, 2000));
    let event_types = f.required("event_types", fields::strings(shared::domain::webhooks::EVENT_TYPES.len() * 2));
    let resource_id = f.nullable("resource_id", fields::uuid);
    Some(WebhookRequest { url: url?, event_types: event_types?, resource_id })
}

/// The body of `PATCH /v1/resources/{id}`: any of these, at least one.
fn update_resource(f: &mut Fields<'_>) -> Option<ResourceChange> {
    let change = ResourceChange {
        name: f.optional("name", fields::text(1, 200)),
        capacity: f.optional("capacity", fields::integer(1, 100_000)),
        hold_ttl_seconds: f.optional("hold_ttl_seconds", fields::integer(1, i32::MAX)),
        offer_ttl_seconds: f.optional("offer_ttl_seconds", fields::integer(1, i32::MAX)),
        metadata: f.metadata("metadata"),
        calendar: f.calendar(),
        policies: f.policies(),
        default_duration_minutes: f.clearable("default_duration_minutes", fields::integer(1, 1440)),
    };
    if f.is_empty() {
        f.refuse(
            "body",
            "must change at least one of name, capacity, hold_ttl_seconds, offer_ttl_seconds, metadata, time_zone, \
             schedule, buffer_before_minutes, buffer_after_minutes, min_notice_minutes, max_advance_days, slot_minutes, \
             cancel_notice_minutes, reschedule_notice_minutes, max_reschedules, max_hold_seconds, \
             default_duration_minutes",
        );
        return None;
    }
    Some(change)
}

/// The body of `POST /v1/resources`. The rules that join fields (an upstream resource
/// has a ref and capacity 1) are the booking layer's.
fn create_resource(f: &mut Fields<'_>) -> Option<NewResource> {
    let name = f.required("name", fields::text(1, 200));
    let capacity = f.optional("capacity", fields::integer(1, 100_000)).unwrap_or(1);
    let authority = match f.optional("authority", fields::one_of(&["local", "upstream"])) {
        Some("upstream") => Authority::Upstream,
        _ => Authority::Local,
    };
    let upstream_ref = f.nullable("upstream_ref", fields::text(0, 200));
    let hold_ttl_seconds = f.nullable("hold_ttl_seconds", fields::integer(1, i32::MAX));
    let offer_ttl_seconds = f.nullable("offer_ttl_seconds", fields::integer(1, i32::MAX));
    let metadata = f.metadata("metadata").unwrap_or_default();
    let calendar = f.calendar();
    let policies = f.policies();
    let default_duration_minutes = f.nullable("default_duration_minutes", fields::integer(1, 1440));
    Some(NewResource {
        name: name?,
        capacity,
        authority,
        upstream_ref,
        hold_ttl_seconds,
        offer_ttl_seconds,
        metadata,
        calendar,
        policies,
        default_duration_minutes,
    })
}
