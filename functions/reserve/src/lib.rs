//! The `reserve` function: `POST /v1/reservations` (hold, or book in one step) and
//! `DELETE /v1/reservations/{id}` (release a hold, cancel a booking).
//!
//! Both change a resource's load, so both run in one short transaction that takes the
//! resource lock; `POST` runs inside the idempotency guard.

use http::StatusCode;
use lambda_http::{Body, Error, Request, Response};
use serde::Deserialize;
use shared::AppState;
use shared::booking::{self, ReserveRequest};
use shared::domain::Limits;
use shared::http::{ApiError, Function, Op, Reply, Rfc3339, json_body, principal, respond, route_for, run_idempotent};
use uuid::Uuid;

pub async fn handler(state: &AppState, req: Request) -> Result<Response<Body>, Error> {
    Ok(respond(serve(state, &req)).await)
}

async fn serve(state: &AppState, req: &Request) -> Result<Response<Body>, ApiError> {
    let matched = route_for(req.method(), req.uri().path(), Function::Reserve)?;
    let who = principal(req, &state.config)?;
    match matched.spec.op {
        Op::CreateReservation => {
            let body = json_body::<CreateReservation>(req, false)?;
            let input = body.value.into_request();
            let limits = limits(state);
            run_idempotent(state, &who, req, "POST /v1/reservations", &body.canonical, async |tx| {
                let r = booking::reserve(tx, &who, &input, limits, state.clock.now()).await?;
                let status = if r.status == shared::domain::Status::Confirming {
                    StatusCode::ACCEPTED
                } else {
                    StatusCode::CREATED
                };
                Ok(Reply::json(status, &r).with_location(format!("/v1/reservations/{}", r.id)))
            })
            .await
        }
        Op::ReleaseReservation => {
            let id = matched.id(ApiError::ReservationNotFound)?;
            let mut client = state.pool.get().await?;
            let tx = client.transaction().await?;
            let r = booking::release(&tx, &who, id, state.clock.now()).await?;
            tx.commit().await?;
            Ok(Reply::json(StatusCode::OK, &r).into_response())
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
