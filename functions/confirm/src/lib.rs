//! The `confirm` function: `POST /v1/reservations/{id}/confirm`, and
//! `POST /v1/reservations/{id}/extend`, which keeps a hold longer.
//!
//! A local resource's hold becomes `CONFIRMED` under the locks of its resources and rows. An
//! upstream resource's hold becomes `CONFIRMING` with an intent for the worker (202),
//! and the intent message is sent right after commit. Confirming again answers the
//! reservation as it is. Runs inside the idempotency guard. `?scope=following|all`
//! confirms the later, or every, live occurrence of the reservation's series too, in
//! one transaction, and answers the series.

use http::StatusCode;
use lambda_http::{Body, Error, Request, Response};
use shared::AppState;
use shared::booking::{self, Approval, Confirmed, Scope};
use shared::http::{
    Answered, ApiError, EmptyBody, Function, Op, Reply, fingerprint, json_body, principal, respond_publishing,
    route_for, run_idempotent,
};

pub async fn handler(state: &AppState, req: Request) -> Result<Response<Body>, Error> {
    // Each request may have written events: a claim after it publishes them.
    Ok(respond_publishing(state, &req, async { serve(state, &req).await.map(Answered::from) }).await)
}

async fn serve(state: &AppState, req: &Request) -> Result<Response<Body>, ApiError> {
    let matched = route_for(req.method(), req.uri().path(), Function::Confirm)?;
    let who = principal(req, &state.config)?;
    let id = matched.id(ApiError::ReservationNotFound)?;
    // The body is optional and, when given, must be `{}`: it has no fields.
    let body = json_body(req, EmptyBody::Allowed)?;
    body.read(|_| Some(()))?;
    let fingerprint = fingerprint(req, &body.canonical);
    match matched.spec.op {
        Op::ConfirmReservation => {}
        Op::ExtendReservation => {
            return run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                let r = booking::extend(tx, &who, id, &*state.clock).await?;
                Ok(Reply::json(StatusCode::OK, &r))
            })
            .await;
        }
        _ => return Err(ApiError::RouteNotFound),
    }
    let approval = Approval { principal: &who.id, fingerprint: &fingerprint };
    let scope = shared::http::scope(req)?;
    let mut queued = false;
    let response = run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
        let now = state.clock.now();
        if scope != Scope::One
            && let (Some(series), ids) = booking::in_scope(tx, &who, id, scope, now).await?
        {
            // Every occurrence in scope, in series order, or none: the first refusal
            // rolls the others back.
            for occurrence in ids {
                match booking::confirm(tx, &who, occurrence, approval, &*state.clock).await? {
                    Confirmed::Confirmed(_) => shared::metrics::count("Confirms"),
                    Confirmed::Queued(_) => queued = true,
                    Confirmed::AsItWas(_) => {}
                }
            }
            return Ok(Reply::json(StatusCode::OK, &booking::series_after(tx, series, state.clock.now()).await?));
        }
        let (status, r) = match booking::confirm(tx, &who, id, approval, &*state.clock).await? {
            Confirmed::Confirmed(r) => {
                shared::metrics::count("Confirms");
                (StatusCode::OK, r)
            }
            Confirmed::Queued(r) => {
                shared::metrics::count("UpstreamConfirmsRequested");
                queued = true;
                (StatusCode::ACCEPTED, r)
            }
            Confirmed::AsItWas(r) => (StatusCode::OK, r),
        };
        Ok(Reply::json(status, &r))
    })
    .await?;
    // Committed: hand the intent to the worker now, not at the next sweep.
    if queued {
        shared::outbox::publish_intents(state).await;
    }
    Ok(response)
}
