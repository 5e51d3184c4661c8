//! The local dev server: every route of the HTTP API on one port, each request handed
//! to the very handler function that the route's Lambda binary runs. It has no business
//! logic of its own; it only turns hyper requests into `lambda_http` requests and back,
//! and runs the scheduled function's sweep on an interval, as EventBridge would.

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use lambda_http::{Body, Request, Response};
use shared::AppState;
use shared::http::{ApiError, Function, route};
use std::convert::Infallible;
use std::time::Instant;
use tokio::net::TcpListener;

/// Bodies past this are refused before the handler sees them (API Gateway caps at
/// 10 MB; the handlers' own limit of 64 KiB answers 413 below it).
const READ_LIMIT: usize = 1024 * 1024;

/// Routes one request to the function that owns it, as API Gateway would.
pub async fn dispatch(state: &AppState, req: Request) -> Response<Body> {
    let function = match route(req.method(), req.uri().path()) {
        Ok(matched) => matched.spec.function,
        Err(e) => return e.into_reply().into_response(),
    };
    let outcome = match function {
        Function::Admin => admin::handler(state, req).await,
        Function::Reserve => reserve::handler(state, req).await,
        Function::Confirm => confirm::handler(state, req).await,
        Function::Availability => availability::handler(state, req).await,
    };
    // A handler's `Err` is a crash; in Lambda the runtime reports it, here a 500 does.
    outcome.unwrap_or_else(|e| ApiError::Internal(e).into_reply().into_response())
}

async fn handle(state: AppState, req: hyper::Request<Incoming>) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let (method, path) = (parts.method.clone(), parts.uri.path().to_string());
    let response = match Limited::new(body, READ_LIMIT).collect().await {
        Ok(collected) => {
            let bytes = collected.to_bytes();
            let body = if bytes.is_empty() { Body::Empty } else { Body::Binary(bytes.to_vec()) };
            dispatch(&state, Request::from_parts(parts, body)).await
        }
        Err(_) => ApiError::PayloadTooLarge.into_reply().into_response(),
    };
    let (parts, body) = response.into_parts();
    tracing::debug!(%method, path, status = parts.status.as_u16(), ms = started.elapsed().as_millis() as u64, "request");
    Ok(hyper::Response::from_parts(parts, Full::new(Bytes::copy_from_slice(body.as_ref()))))
}

/// Serves HTTP/1.1 on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, state: AppState) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(state.clone(), req));
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Runs the sweeper's own sweep every `interval`, as the EventBridge schedule does in AWS.
pub async fn run_scheduled<P: shared::events::Publisher>(state: AppState, publisher: P, interval: std::time::Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        sweeper::sweep(&state, &publisher, shared::booking::sweep::Bounds::default()).await;
    }
}
