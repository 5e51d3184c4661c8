//! The `reserve` function: the routes that change a resource's load.
//! `POST /v1/reservations` (hold, or book in one step), `DELETE /v1/reservations/{id}`
//! (release a hold, cancel a booking), `POST /v1/resources/{id}/waitlist` (join the
//! queue) and `DELETE /v1/waitlist/{id}` (leave it).
//!
//! Each runs in one short transaction that takes the resource lock, so freed capacity
//! is handed to the waitlist in the same transaction; the `POST`s run inside the
//! idempotency guard.

use http::StatusCode;
use lambda_http::{Body, Error, Request, Response};
use serde::Deserialize;
use shared::AppState;
use shared::booking::{self, Approval, JoinRequest, ReserveRequest, Reserved};
use shared::domain::Limits;
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
            let input = body.value.into_request();
            let limits = limits(state);
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
                auto_book: body.value.auto_book,
            };
            let limits = limits(state);
            let fingerprint = fingerprint(req, &body.canonical);
            let approval = Approval { principal: &who.id, fingerprint: &fingerprint };
            run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                let e = booking::join_waitlist(tx, &who, &input, approval, limits, state.clock.now()).await?;
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

fn limits(state: &AppState) -> Limits {
    Limits {
        max_duration: state.config.max_reservation,
        horizon: state.config.booking_horizon,
        start_grace: state.config.start_grace,
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JoinWaitlist {
    start: Rfc3339,
    end: Rfc3339,
    #[serde(default = "one")]
    quantity: i32,
    #[serde(default)]
    auto_book: bool,
}

fn one() -> i32 {
    1
}

impl CreateReservation {
    fn into_request(self) -> ReserveRequest {
        ReserveRequest {
            resource_id: self.resource_id,
            start: self.start.0,
            end: self.end.0,
            quantity: self.quantity,
            confirm: self.confirm,
        }
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
        let r = json_body::<CreateReservation>(&post(&body), false).unwrap().value.into_request();
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
