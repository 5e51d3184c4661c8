//! The `availability` function: the read routes. `GET /v1/resources/{id}/availability`
//! (what is taken and what is free in a window), `GET /v1/reservations` (the caller's
//! list; everyone's for admins), `GET /v1/reservations/{id}`,
//! `GET /v1/resources/{id}/waitlist` (a resource's queue, admins only),
//! `GET /v1/waitlist/{id}`, `GET /v1/health` and `GET /v1/problems/{slug}` (the page
//! a problem's `type` leads to). Reads take no locks. For an upstream
//! resource the upstream's claims are merged in as `EXTERNAL`, read through the shared
//! single-flight cache behind the breaker.

use http::StatusCode;
use lambda_http::{Body, Error, Request, Response};
use serde::Serialize;
use shared::AppState;
use shared::booking;
use shared::http::{
    ApiError, Function, Op, Reply, Rfc3339, principal, query_param, reservations_query, respond, route_for,
    waitlist_query,
};
use shared::upstream::{UpstreamError, cache};

pub async fn handler(state: &AppState, req: Request) -> Result<Response<Body>, Error> {
    Ok(respond(&req, serve(state, &req)).await)
}

async fn serve(state: &AppState, req: &Request) -> Result<Response<Body>, ApiError> {
    let matched = route_for(req.method(), req.uri().path(), Function::Availability)?;
    match matched.spec.op {
        Op::Health => return health(state).await,
        // Public, like the problem documents that link to it.
        Op::GetProblem => return problem_page(matched.id),
        _ => {}
    }
    let who = principal(req, &state.config)?;
    let now = state.clock.now();
    let reply = match matched.spec.op {
        Op::GetAvailability => {
            let id = matched.id(ApiError::ResourceNotFound)?;
            let (from, to) = window(req)?;
            booking::check_window(from, to, state.config.max_availability_window)?;
            let resource = booking::get_resource(&state.pool.get().await?, id).await?;
            // No connection is held while the upstream's view is read: it takes its own.
            let external = match (&resource.upstream_ref, &state.upstream) {
                (Some(seat), Some(upstream)) => {
                    let cfg = &state.config.upstream;
                    match cache::view(&state.pool, state.clock.as_ref(), upstream.as_ref(), cfg, seat, from, to).await?
                    {
                        Ok(blocks) => Some(blocks),
                        Err(UpstreamError::Unavailable { retry_after_seconds }) => {
                            return Err(ApiError::UpstreamUnavailable { retry_after: retry_after_seconds });
                        }
                        Err(_) => return Err(ApiError::UpstreamUnavailable { retry_after: 1 }),
                    }
                }
                _ => None,
            };
            let client = state.pool.get().await?;
            Reply::json(
                StatusCode::OK,
                &booking::availability(&client, &resource, from, to, external.as_deref(), now).await?,
            )
        }
        Op::ListReservations => {
            let (filter, page) = reservations_query(req, &who)?;
            let client = state.pool.get().await?;
            let key = state.cursor_key(&client).await?;
            Reply::json(StatusCode::OK, &booking::list_reservations(&client, key, &who, filter, page, now).await?)
        }
        Op::ListWaitlist => {
            // Before the id is looked at: a non-admin learns nothing of which resources exist.
            if !who.admin {
                return Err(ApiError::Forbidden);
            }
            let id = matched.id(ApiError::ResourceNotFound)?;
            let page = waitlist_query(req)?;
            let client = state.pool.get().await?;
            let key = state.cursor_key(&client).await?;
            Reply::json(StatusCode::OK, &booking::list_waitlist(&client, key, id, page, now).await?)
        }
        Op::GetReservation => {
            let id = matched.id(ApiError::ReservationNotFound)?;
            Reply::json(StatusCode::OK, &booking::get_reservation(&state.pool.get().await?, &who, id, now).await?)
        }
        Op::GetWaitlistEntry => {
            let id = matched.id(ApiError::WaitlistEntryNotFound)?;
            Reply::json(StatusCode::OK, &booking::get_entry(&state.pool.get().await?, &who, id, now).await?)
        }
        _ => return Err(ApiError::RouteNotFound),
    };
    Ok(reply.into_response())
}

fn window(req: &Request) -> Result<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>), ApiError> {
    let mut errors = Vec::new();
    let mut read = |name: &str| match query_param(req, name) {
        None => {
            errors.push(shared::domain::FieldError::new(name, "is required"));
            None
        }
        Some(raw) => match Rfc3339::parse(&raw) {
            Ok(t) => Some(t.0),
            Err(message) => {
                errors.push(shared::domain::FieldError::new(name, message));
                None
            }
        },
    };
    let (from, to) = (read("from"), read("to"));
    match (from, to) {
        (Some(from), Some(to)) => Ok((from, to)),
        _ => Err(ApiError::Validation(errors)),
    }
}

/// The page that describes a problem type: where a problem's `type` leads.
fn problem_page(slug: Option<&str>) -> Result<Response<Body>, ApiError> {
    let problem = slug.and_then(shared::http::problem_type).ok_or(ApiError::ProblemTypeNotFound)?;
    Ok(Reply::html(StatusCode::OK, problem.page()).into_response())
}

async fn health(state: &AppState) -> Result<Response<Body>, ApiError> {
    #[derive(Serialize)]
    struct Health {
        status: &'static str,
    }
    match booking::health(&state.pool).await {
        Ok(()) => Ok(Reply::json(StatusCode::OK, &Health { status: "ok" }).into_response()),
        Err(e) => Err(ApiError::DatabaseUnavailable(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::window;
    use shared::http::ApiError;

    fn get(uri: &str) -> lambda_http::Request {
        http::Request::builder().uri(uri).body(lambda_http::Body::Empty).unwrap()
    }

    #[test]
    fn the_window_is_read_from_the_query_with_its_offsets() {
        let (from, to) = window(&get("/x?from=2027-03-15T10:00:00%2B02:00&to=2027-03-15T12:00:00Z")).unwrap();
        assert_eq!(from.to_rfc3339(), "2027-03-15T08:00:00+00:00");
        assert_eq!(to.to_rfc3339(), "2027-03-15T12:00:00+00:00");
    }

    #[test]
    fn every_missing_or_unreadable_bound_is_named() {
        let Err(ApiError::Validation(errors)) = window(&get("/x?to=yesterday")) else { panic!("refused") };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["from", "to"]);
    }
}
