//! The local dev server: every route of the HTTP API on one port, each request handed
//! to the very handler function that the route's Lambda binary runs. It has no business
//! logic of its own; it only turns hyper requests into `lambda_http` requests and back,
//! runs the scheduled function's sweep on an interval, as EventBridge would, and feeds
//! intent messages to the intent worker's own message handler, from an in-process queue
//! by default or from a real SQS queue when `INTENTS_QUEUE_URL` is set. Events go to
//! the notifier's own message handler on an in-process queue, unless `EVENTS_QUEUE_URL`
//! names a queue (then they go there, for whatever consumes it).
//!
//! It stands where API Gateway stands in AWS, so it defends itself the way a front
//! door must: a request's head and its body must arrive in time, the connections
//! served at once are bounded, and a failing `accept` backs off (see [`Limits`]).

pub mod accept;
pub mod cors;
pub mod problem_io;
pub mod startup;

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use lambda_http::{Body, Request, Response};
use shared::AppState;
use shared::http::{ApiError, Function, route};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Bodies past this are refused before the handler sees them (API Gateway caps at
/// 10 MB; the handlers' own limit of 64 KiB answers 413 below it).
const READ_LIMIT: usize = 1024 * 1024;

/// The OpenAPI document of the whole API. Served here only: it is not a Lambda route.
/// (Neither is `/`, which answers the booking page of `GET /app`.)
pub const OPENAPI_JSON: &str = include_str!("../../openapi/openapi.json");

/// Routes one request to the function that owns it, as API Gateway would, with CORS
/// (see [`cors`]) and `HEAD` (every `GET` without its body) as API Gateway does them.
pub async fn dispatch(state: &AppState, req: Request) -> Response<Body> {
    if let Some(preflight) = cors::preflight(&state.config, &req) {
        return preflight;
    }
    let origin = cors::allowed_origin(&state.config, &req).cloned();
    let head = req.method() == http::Method::HEAD;
    // The functions' handlers wake the events relay after a request that writes.
    let mut response = route_to_function(state, req).await;
    if head {
        response = shared::http::without_body(response);
    }
    if let Some(origin) = origin {
        cors::decorate(response.headers_mut(), origin);
    }
    response
}

async fn route_to_function(state: &AppState, req: Request) -> Response<Body> {
    let path = req.uri().path().to_string();
    if matches!(*req.method(), http::Method::GET | http::Method::HEAD) && path == "/v1/openapi.json" {
        let mut response = Response::new(Body::Text(OPENAPI_JSON.to_string()));
        response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
        return response;
    }
    // The booking page at the root too, so `scripts/dev` opens on it; `/app` is its
    // route in the table, as in AWS.
    if matches!(*req.method(), http::Method::GET | http::Method::HEAD) && path == "/" {
        return availability::page::reply(&state.config).into_response();
    }
    let function = match route(req.method(), &path) {
        Ok(matched) => matched.spec.function,
        Err(e) => return e.into_reply_at(&path).into_response(),
    };
    let outcome = match function {
        Function::Admin => admin::handler(state, req).await,
        Function::Reserve => reserve::handler(state, req).await,
        Function::Confirm => confirm::handler(state, req).await,
        Function::Availability => availability::handler(state, req).await,
    };
    // A handler's `Err` is a crash; in Lambda the runtime reports it, here a 500 does.
    outcome.unwrap_or_else(|e| ApiError::Internal(e).into_reply_at(&path).into_response())
}

/// How the server protects itself from slow, stuck or too many clients.
#[derive(Debug, Clone)]
pub struct Limits {
    /// A request's line and headers must arrive within this, or the connection is
    /// closed without an answer. It also closes a keep-alive connection left idle this
    /// long (hyper starts the clock when it waits for the next request's head).
    pub header_read_timeout: Duration,
    /// A request's whole body must arrive within this, or the answer is a 400.
    pub body_read_timeout: Duration,
    /// Connections served at once. Past it, the server stops accepting until one ends.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_connections: 1024,
        }
    }
}

async fn handle(
    state: AppState,
    body_read_timeout: Duration,
    req: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let response = match read_body(body, body_read_timeout).await {
        Ok(bytes) => {
            let body = if bytes.is_empty() { Body::Empty } else { Body::Binary(bytes.to_vec()) };
            dispatch(&state, Request::from_parts(parts, body)).await
        }
        Err(e) => {
            // Before any handler, so no request span: the path is the client's text and
            // stays out of the log, as in `shared::http::respond`.
            let status = e.status().as_u16();
            tracing::info!(method = %parts.method, status, error = %e, "request body refused");
            e.into_reply_at(parts.uri.path()).into_response()
        }
    };
    // The handlers log the request (`shared::http::respond`).
    let (parts, body) = response.into_parts();
    Ok(hyper::Response::from_parts(parts, Full::new(Bytes::copy_from_slice(body.as_ref()))))
}

/// The whole body, or why not: too long is a 413; anything else (a malformed chunked
/// encoding, a connection cut short, a body that does not arrive in time) a 400.
async fn read_body(body: Incoming, timeout: Duration) -> Result<Bytes, ApiError> {
    match tokio::time::timeout(timeout, Limited::new(body, READ_LIMIT).collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => Err(ApiError::PayloadTooLarge),
        Ok(Err(_)) => Err(ApiError::BadRequest("The request body could not be read: its framing is malformed.")),
        Err(_) => Err(ApiError::BadRequest("The request body did not arrive in time.")),
    }
}

/// Serves HTTP/1.1 on `listener` with the default [`Limits`] until the task is dropped.
pub async fn serve(listener: TcpListener, state: AppState) {
    serve_with(listener, state, Limits::default()).await
}

/// Serves HTTP/1.1 on `listener` until the task is dropped.
///
/// HTTP/1.1 only, which is what its clients (curl, reqwest, the tests, schemathesis)
/// speak: hyper-util's automatic HTTP/1-or-2 detection reads the first bytes with no
/// timeout at all, so a client that connects and sends nothing would hold its
/// connection forever.
pub async fn serve_with(listener: TcpListener, state: AppState, limits: Limits) {
    // Over the limit the loop waits for a permit before it accepts again, rather than
    // accepting and closing at once. Waiting clients stay in the kernel's listen
    // backlog, where they cost no file descriptor and no task, and each is served when
    // a connection ends (or refused by the kernel when the backlog is full).
    // Accept-and-close would spend a descriptor and a syscall on every refused
    // connection, with the loop at full speed, and turn a burst that a moment's
    // patience would have absorbed into errors.
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    let mut backoff = accept::AcceptBackoff::default();
    loop {
        let permit = permits.clone().acquire_owned().await.expect("the semaphore is never closed");
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                let failures = backoff.succeeded();
                if failures > 0 {
                    tracing::info!(failures, "accepting connections again");
                }
                stream
            }
            Err(e) if accept::is_connection_error(&e) => continue,
            Err(e) => {
                let pause = backoff.failed();
                tracing::warn!(error = %e, pause_ms = pause.as_millis() as u64, "accept failed; pausing");
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (state, http) = (state.clone(), http.clone());
        let body_read_timeout = limits.body_read_timeout;
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(state.clone(), body_read_timeout, req));
            let io = TokioIo::new(problem_io::ProblemIo::new(stream));
            let _ = http.serve_connection(io, service).await;
            drop(permit);
        });
    }
}

/// Runs the sweeper's own sweep every `interval`, as the EventBridge schedule does in AWS.
pub async fn run_scheduled<P: shared::outbox::Publisher>(state: AppState, publisher: P, interval: std::time::Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        sweeper::sweep(&state, &publisher, shared::booking::sweep::Bounds::default()).await;
    }
}

/// The intent worker on the in-process queue: each message goes to the worker's own
/// handler; one it could not finish comes back after a second, as SQS would redeliver it.
pub async fn run_intent_worker(
    state: AppState,
    mut queue: tokio::sync::mpsc::UnboundedReceiver<shared::outbox::Envelope>,
    requeue: tokio::sync::mpsc::UnboundedSender<shared::outbox::Envelope>,
) {
    while let Some(envelope) = queue.recv().await {
        let (state, requeue) = (state.clone(), requeue.clone());
        tokio::spawn(async move {
            let mut message = aws_lambda_events::sqs::SqsMessage::default();
            message.message_id = Some(envelope.id.to_string());
            message.body = serde_json::to_string(&envelope).ok();
            let done = intent_worker::process_message(&state, &message).await;
            shared::outbox::publish_written(&state, shared::outbox::Written::MaybeSome).await;
            if !done {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                let _ = requeue.send(envelope);
            }
        });
    }
}

/// The intent worker on a real SQS queue: long-polls, hands each message to the
/// worker's handler, deletes what it finished (the rest reappears after the visibility
/// timeout, and in the end goes to the dead-letter queue).
pub async fn run_intent_worker_on_sqs(state: AppState, sqs: shared::sqs::Sqs, queue_url: String) {
    loop {
        let messages = match sqs.receive_message(&queue_url, 10, 10).await {
            Ok(messages) => messages,
            Err(error) => {
                tracing::warn!(%error, "receive failed");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        for m in messages {
            let mut message = aws_lambda_events::sqs::SqsMessage::default();
            message.message_id = Some(m.message_id);
            message.body = Some(m.body);
            let done = intent_worker::process_message(&state, &message).await;
            shared::outbox::publish_written(&state, shared::outbox::Written::MaybeSome).await;
            if done && let Err(error) = sqs.delete_message(&queue_url, &m.receipt_handle).await {
                tracing::warn!(%error, "delete failed: the message comes back after its visibility timeout");
            }
        }
    }
}

/// How often the in-process notifier tries an event before it gives up on it, as the
/// events queue's redrive policy does (`maxReceiveCount`).
pub const NOTIFIER_TRIES: u32 = 5;

/// The notifier on the in-process events queue: each event is logged, then handed to
/// the notifier's own message handler, which signs and posts it to the registered
/// endpoints. One that some endpoint did not accept comes back after 1, 2, 4, 8 s, as
/// SQS would deliver it again, and is dropped with an error line after
/// [`NOTIFIER_TRIES`] tries (where SQS would move it to the dead-letter queue).
///
/// As on the FIFO events queue (one message group per subject), a subject's events go
/// out one after the other in the order they came, a retried one holding back the
/// ones after it; different subjects' events go out side by side.
pub async fn run_notifier(
    notifier: std::sync::Arc<notifier::Notifier>,
    mut queue: tokio::sync::mpsc::UnboundedReceiver<shared::outbox::Envelope>,
) {
    // The events waiting behind the one being delivered, per subject. A subject is a
    // key while a task works through its events; the task removes it when none wait.
    let waiting: Arc<std::sync::Mutex<Waiting>> = Arc::default();
    let mut batch = Vec::new();
    while queue.recv_many(&mut batch, usize::MAX).await > 0 {
        for envelope in &batch {
            tracing::info!(event_id = %envelope.id, kind = %envelope.kind, subject_id = %envelope.subject_id, "event");
        }
        // One look for what came together: with no webhook endpoint at all, no event of
        // the batch is due anywhere (an endpoint made later takes only later events),
        // and none needs the handler's per-event read.
        match shared::db::webhooks::any_endpoint(&notifier.state.pool).await {
            Ok(false) => {
                batch.clear();
                continue;
            }
            Ok(true) => {}
            Err(e) => tracing::warn!(error = %e, "could not look for webhook endpoints; each event looks itself"),
        }
        for envelope in batch.drain(..) {
            hand_to_its_subject(&notifier, &waiting, envelope);
        }
    }
}

/// Delivers `envelope` now, or behind the events of its subject still in flight.
fn hand_to_its_subject(
    notifier: &std::sync::Arc<notifier::Notifier>,
    waiting: &Arc<std::sync::Mutex<Waiting>>,
    envelope: shared::outbox::Envelope,
) {
    {
        let subject = envelope.subject_id;
        {
            let mut waiting = waiting.lock().expect("no task panics holding the lock");
            if let Some(behind) = waiting.get_mut(&subject) {
                behind.push_back(envelope);
                return;
            }
            waiting.insert(subject, std::collections::VecDeque::new());
        }
        let (notifier, waiting) = (notifier.clone(), waiting.clone());
        tokio::spawn(async move {
            let mut next = Some(envelope);
            while let Some(envelope) = next {
                deliver_event(&notifier, envelope).await;
                let mut waiting = waiting.lock().expect("no task panics holding the lock");
                next = waiting.get_mut(&subject).and_then(std::collections::VecDeque::pop_front);
                if next.is_none() {
                    waiting.remove(&subject);
                }
            }
        });
    }
}

type Waiting = std::collections::HashMap<uuid::Uuid, std::collections::VecDeque<shared::outbox::Envelope>>;

/// One event through the notifier's handler, tried up to [`NOTIFIER_TRIES`] times.
async fn deliver_event(notifier: &notifier::Notifier, envelope: shared::outbox::Envelope) {
    let mut message = aws_lambda_events::sqs::SqsMessage::default();
    message.message_id = Some(envelope.id.to_string());
    message.body = serde_json::to_string(&envelope).ok();
    for attempt in 1..=NOTIFIER_TRIES {
        // The try's number, as SQS would count it, for the delivery log.
        message.attributes.insert("ApproximateReceiveCount".into(), attempt.to_string());
        let handled = notifier::process_message(notifier, &message).await;
        shared::outbox::publish_written(&notifier.state, handled.written).await;
        if handled.processed == notifier::Processed::Delivered {
            return;
        }
        if attempt < NOTIFIER_TRIES {
            tokio::time::sleep(std::time::Duration::from_secs(1 << (attempt - 1))).await;
        }
    }
    tracing::error!(event_id = %envelope.id, tries = NOTIFIER_TRIES, "event given up after every try");
}
