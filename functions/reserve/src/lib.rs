//! The `reserve` function: the routes that change a resource's load.
//! `POST /v1/reservations` (hold, or book in one step), `PATCH /v1/reservations/{id}`
//! (move a booking, or change its metadata), `DELETE /v1/reservations/{id}` (release a
//! hold, cancel a booking), `POST /v1/resources/{id}/waitlist` (join the queue) and
//! `DELETE /v1/waitlist/{id}` (leave it). Admins may act on anyone's reservations and
//! entries; the reservation records who acted.
//!
//! Each runs in one short transaction that takes the resource lock, so freed capacity
//! is handed to the waitlist in the same transaction; the `POST`s and the `PATCH` run
//! inside the idempotency guard.

use http::StatusCode;
use lambda_http::{Body, Error, Request, Response};
use serde::Deserialize;
use shared::AppState;
use shared::booking::{self, Approval, Change, JoinRequest, Rescheduled, ReserveRequest, Reserved};
use shared::domain::{Metadata, validate_metadata};
use shared::http::{
    ApiError, Function, Op, Reply, Rfc3339, fingerprint, json_body, principal, respond, route_for, run_idempotent,
};
use uuid::Uuid;

pub async fn handler(state: &AppState, req: Request) -> Result<Response<Body>, Error> {
    Ok(respond(&req, serve(state, &req)).await)
}

async fn serve(state: &AppState, req: &Request) -> Result<Response<Body>, ApiError> {
    let matched = route_for(req.method(), req.uri().path(), Function::Reserve)?;
    let who = principal(req, &state.config)?;
    match matched.spec.op {
        Op::CreateReservation => {
            let body = json_body::<CreateReservation>(req, false)?;
            let input = body.value.into_request()?;
            let limits = state.config.limits();
            let fingerprint = fingerprint(req, &body.canonical);
            let approval = Approval { principal: &who.id, fingerprint: &fingerprint };
            let mut queued = false;
            let response = run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                let (status, r) = match booking::reserve(tx, &who, &input, approval, limits, state.clock.now()).await? {
                    Reserved::Reserved(r) => {
                        let held = r.status == shared::domain::Status::Held;
                        shared::metrics::count(if held { "Holds" } else { "Bookings" });
                        (StatusCode::CREATED, r)
                    }
                    Reserved::Queued(r) => {
                        shared::metrics::count("UpstreamConfirmsRequested");
                        queued = true;
                        (StatusCode::ACCEPTED, r)
                    }
                    // Committed and stored like any answer; see `Reserved`.
                    Reserved::Unavailable => {
                        shared::metrics::count("Conflicts");
                        return Ok(ApiError::SlotUnavailable.into_reply());
                    }
                };
                Ok(Reply::json(status, &r).with_location(format!("/v1/reservations/{}", r.id)))
            })
            .await?;
            // Committed: hand the intent to the worker now, not at the next sweep.
            if queued {
                shared::outbox::publish_intents(state).await;
            }
            Ok(response)
        }
        Op::RescheduleReservation => {
            let id = matched.id(ApiError::ReservationNotFound)?;
            let body = json_body::<RescheduleReservation>(req, false)?;
            let fingerprint = fingerprint(req, &body.canonical);
            let limits = state.config.limits();
            let change = body.value.into_change()?;
            run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                match booking::reschedule(tx, &who, id, change, limits, state.clock.now()).await? {
                    Rescheduled::Rescheduled(r) => {
                        shared::metrics::count("Reschedules");
                        Ok(Reply::json(StatusCode::OK, &r))
                    }
                    Rescheduled::Unavailable => {
                        shared::metrics::count("Conflicts");
                        Ok(ApiError::SlotUnavailable.into_reply())
                    }
                }
            })
            .await
        }
        Op::ReleaseReservation => {
            let id = matched.id(ApiError::ReservationNotFound)?;
            let mut client = state.pool.get().await?;
            let tx = client.transaction().await?;
            let released = booking::release(&tx, &who, id, state.clock.now()).await?;
            tx.commit().await?;
            if released.upstream_cancel {
                shared::outbox::publish_intents(state).await;
            }
            Ok(Reply::json(StatusCode::OK, &released.reservation).into_response())
        }
        Op::JoinWaitlist => {
            let resource_id = matched.id(ApiError::ResourceNotFound)?;
            let body = json_body::<JoinWaitlist>(req, false)?;
            let input = JoinRequest {
                resource_id,
                start: body.value.start.0,
                end: body.value.end.0,
                quantity: body.value.quantity,
            };
            let limits = state.config.limits();
            let fingerprint = fingerprint(req, &body.canonical);
            run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                let e = booking::join_waitlist(tx, &who, &input, limits, state.clock.now()).await?;
                Ok(Reply::json(StatusCode::CREATED, &e).with_location(format!("/v1/waitlist/{}", e.id)))
            })
            .await
        }
        Op::LeaveWaitlist => {
            let id = matched.id(ApiError::WaitlistEntryNotFound)?;
            let mut client = state.pool.get().await?;
            let tx = client.transaction().await?;
            let e = booking::leave_waitlist(&tx, &who, id, state.clock.now()).await?;
            tx.commit().await?;
            Ok(Reply::json(StatusCode::OK, &e).into_response())
        }
        _ => Err(ApiError::RouteNotFound),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateReservation {
    resource_id: Uuid,
    start: Rfc3339,
    end: Rfc3339,
    #[serde(default = "one")]
    quantity: i32,
    #[serde(default)]
    confirm: bool,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
}

/// A `PATCH`: any of the range, the quantity and the metadata; at least one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RescheduleReservation {
    #[serde(default)]
    start: Option<Rfc3339>,
    #[serde(default)]
    end: Option<Rfc3339>,
    #[serde(default)]
    quantity: Option<i32>,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
}

impl RescheduleReservation {
    fn into_change(self) -> Result<Change, ApiError> {
        if self.start.is_none() && self.end.is_none() && self.quantity.is_none() && self.metadata.is_none() {
            return Err(ApiError::validation("body", "must change at least one of start, end, quantity, metadata"));
        }
        Ok(Change {
            start: self.start.map(|t| t.0),
            end: self.end.map(|t| t.0),
            quantity: self.quantity,
            metadata: self.metadata.as_ref().map(validate_metadata).transpose().map_err(ApiError::Validation)?,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JoinWaitlist {
    start: Rfc3339,
    end: Rfc3339,
    #[serde(default = "one")]
    quantity: i32,
}

fn one() -> i32 {
    1
}

impl CreateReservation {
    fn into_request(self) -> Result<ReserveRequest, ApiError> {
        let metadata = match &self.metadata {
            Some(m) => validate_metadata(m).map_err(ApiError::Validation)?,
            None => Metadata::new(),
        };
        Ok(ReserveRequest {
            resource_id: self.resource_id,
            start: self.start.0,
            end: self.end.0,
            quantity: self.quantity,
            confirm: self.confirm,
            metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{CreateReservation, JoinWaitlist};
    use shared::http::{ApiError, json_body};

    fn post(body: &str) -> lambda_http::Request {
        http::Request::builder()
            .method("POST")
            .header("content-type", "application/json")
            .body(lambda_http::Body::Text(body.into()))
            .unwrap()
    }

    #[test]
    fn a_reservation_body_defaults_to_one_unit_held_not_confirmed() {
        let id = uuid::Uuid::now_v7();
        let body = format!(r#"{{"resource_id":"{id}","start":"2027-03-15T10:00:00Z","end":"2027-03-15T11:00:00Z"}}"#);
        let r = json_body::<CreateReservation>(&post(&body), false).unwrap().value.into_request().unwrap();
        assert_eq!((r.resource_id, r.quantity, r.confirm), (id, 1, false));
    }

    #[test]
    fn unknown_fields_and_missing_bounds_are_refused() {
        let body = r#"{"start":"2027-03-15T10:00:00Z","end":"2027-03-15T11:00:00Z","seats":2}"#;
        assert!(matches!(json_body::<JoinWaitlist>(&post(body), false), Err(ApiError::Validation(_))));
        let body = r#"{"start":"2027-03-15T10:00:00Z"}"#;
        assert!(matches!(json_body::<JoinWaitlist>(&post(body), false), Err(ApiError::Validation(_))));
    }
}
