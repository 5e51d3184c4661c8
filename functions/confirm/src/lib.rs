//! The `confirm` function: `POST /v1/reservations/{id}/confirm`.
//!
//! A local resource's hold becomes `CONFIRMED` under the reservation's row lock;
//! confirming again answers the reservation as it is. Runs inside the idempotency guard.

use http::StatusCode;
use lambda_http::{Body, Error, Request, Response};
use serde::Deserialize;
use shared::AppState;
use shared::booking;
use shared::http::{ApiError, Function, Op, Reply, json_body, principal, respond, route_for, run_idempotent};

pub async fn handler(state: &AppState, req: Request) -> Result<Response<Body>, Error> {
    Ok(respond(serve(state, &req)).await)
}

/// The body is optional and, when given, must be `{}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfirmBody {}

async fn serve(state: &AppState, req: &Request) -> Result<Response<Body>, ApiError> {
    let matched = route_for(req.method(), req.uri().path(), Function::Confirm)?;
    let who = principal(req, &state.config)?;
    if matched.spec.op != Op::ConfirmReservation {
        return Err(ApiError::RouteNotFound);
    }
    let id = matched.id(ApiError::ReservationNotFound)?;
    let body = json_body::<ConfirmBody>(req, true)?;
    run_idempotent(state, &who, req, "POST /v1/reservations/{id}/confirm", &body.canonical, async |tx| {
        let confirmed = booking::confirm(tx, &who, id, state.clock.now()).await?;
        let r = confirmed.reservation;
        let status = if confirmed.changed && r.status == shared::domain::Status::Confirming {
            StatusCode::ACCEPTED
        } else {
            StatusCode::OK
        };
        Ok(Reply::json(status, &r))
    })
    .await
}
