//! A real HTTP server that plays the system of record of upstream.md, with knobs for
//! the failures the service must survive, and counters of what reached it.

use chrono::{DateTime, Utc};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub const TOKEN: &str = "test-token";

/// A claimed range of a seat.
pub type Range = (DateTime<Utc>, DateTime<Utc>);

/// What the next reservation POSTs do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnPost {
    /// 201 unless the seat is taken (409).
    Accept,
    Conflict,
    Unauthorized,
    /// 500, and nothing was written.
    FailWithoutCharge,
    /// 500, but the charge was written (the answer was lost).
    FailWithCharge,
}

#[derive(Debug)]
pub struct MockState {
    pub on_post: OnPost,
    /// Every call answers 500.
    pub down: bool,
    /// The credential is rejected everywhere.
    pub reject_token: bool,
    /// How long every answer takes (a slow upstream).
    pub delay: std::time::Duration,
    pub posts: u64,
    pub availability_reads: u64,
    pub charge_reads: u64,
    pub deletes: u64,
    pub calls: u64,
    /// reference -> (charge id, seat, start, end)
    pub charges: HashMap<String, (String, String, DateTime<Utc>, DateTime<Utc>)>,
    /// Claims someone else holds upstream, per seat.
    pub foreign: HashMap<String, Vec<Range>>,
}

pub struct MockUpstream {
    pub base: String,
    pub state: Arc<Mutex<MockState>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockUpstream {
    pub async fn start() -> MockUpstream {
        let state = Arc::new(Mutex::new(MockState {
            on_post: OnPost::Accept,
            down: false,
            reject_token: false,
            delay: std::time::Duration::ZERO,
            posts: 0,
            availability_reads: 0,
            charge_reads: 0,
            deletes: 0,
            calls: 0,
            charges: HashMap::new(),
            foreign: HashMap::new(),
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shared = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, std::convert::Infallible>(handle(&state, req).await) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        MockUpstream { base, state, task }
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut MockState) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }
}

fn reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

fn query(req: &Request<Incoming>, name: &str) -> Option<String> {
    req.uri().query()?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| v.replace("%3A", ":").replace("%2B", "+"))
    })
}

async fn handle(state: &Mutex<MockState>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let authorized =
        req.headers().get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {TOKEN}"));
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let segments: Vec<String> = path.trim_start_matches('/').split('/').map(String::from).collect();
    let from = query(&req, "from");
    let to = query(&req, "to");
    let reference = query(&req, "reference");
    let body: Value =
        serde_json::from_slice(&req.into_body().collect().await.unwrap().to_bytes()).unwrap_or(Value::Null);
    let delay = state.lock().unwrap().delay;
    tokio::time::sleep(delay).await;
    let mut s = state.lock().unwrap();
    s.calls += 1;
    let seg: Vec<&str> = segments.iter().map(String::as_str).collect();
    match (method.as_str(), seg.as_slice()) {
        ("GET", ["seats", seat, "availability"]) => {
            s.availability_reads += 1;
            if s.down {
                return reply(StatusCode::INTERNAL_SERVER_ERROR, json!({}));
            }
            if !authorized || s.reject_token {
                return reply(StatusCode::UNAUTHORIZED, json!({}));
            }
            let parse = |v: &Option<String>| {
                v.as_deref().and_then(|t| DateTime::parse_from_rfc3339(t).ok()).map(|t| t.with_timezone(&Utc))
            };
            let (Some(from), Some(to)) = (parse(&from), parse(&to)) else {
                return reply(StatusCode::BAD_REQUEST, json!({}));
            };
            let mut taken: Vec<Value> = Vec::new();
            for (start, end) in s.foreign.get(*seat).cloned().unwrap_or_default() {
                if start < to && end > from {
                    taken.push(json!({"start": start, "end": end}));
                }
            }
            for (_, (_, charged_seat, start, end)) in s.charges.iter() {
                if charged_seat == seat && *start < to && *end > from {
                    taken.push(json!({"start": start, "end": end}));
                }
            }
            reply(StatusCode::OK, json!({"taken": taken}))
        }
        ("POST", ["seats", seat, "reservations"]) => {
            s.posts += 1;
            if s.down {
                return reply(StatusCode::INTERNAL_SERVER_ERROR, json!({}));
            }
            if !authorized || s.reject_token {
                return reply(StatusCode::UNAUTHORIZED, json!({}));
            }
            let start: DateTime<Utc> = serde_json::from_value(body["start"].clone()).unwrap();
            let end: DateTime<Utc> = serde_json::from_value(body["end"].clone()).unwrap();
            let reference = body["reference"].as_str().unwrap_or_default().to_string();
            let record = |s: &mut MockState| {
                let id = format!("ch_{}", s.charges.len() + 1);
                s.charges.insert(reference.clone(), (id.clone(), seat.to_string(), start, end));
                id
            };
            let overlaps = s.foreign.get(*seat).is_some_and(|v| v.iter().any(|(a, b)| *a < end && *b > start))
                || s.charges.values().any(|(_, cs, a, b)| cs == seat && *a < end && *b > start);
            match s.on_post {
                OnPost::Accept if overlaps => reply(StatusCode::CONFLICT, json!({})),
                OnPost::Accept => {
                    let id = record(&mut s);
                    reply(StatusCode::CREATED, json!({"charge_id": id}))
                }
                OnPost::Conflict => reply(StatusCode::CONFLICT, json!({})),
                OnPost::Unauthorized => reply(StatusCode::UNAUTHORIZED, json!({})),
                OnPost::FailWithoutCharge => reply(StatusCode::INTERNAL_SERVER_ERROR, json!({})),
                OnPost::FailWithCharge => {
                    record(&mut s);
                    reply(StatusCode::BAD_GATEWAY, json!({}))
                }
            }
        }
        ("GET", ["charges", "current"]) => {
            s.charge_reads += 1;
            if s.down {
                return reply(StatusCode::INTERNAL_SERVER_ERROR, json!({}));
            }
            if !authorized || s.reject_token {
                return reply(StatusCode::UNAUTHORIZED, json!({}));
            }
            match reference.and_then(|r| s.charges.get(&r).cloned()) {
                Some((id, ..)) => reply(StatusCode::OK, json!({"charge_id": id})),
                None => reply(StatusCode::NOT_FOUND, json!({})),
            }
        }
        ("DELETE", ["charges", id]) => {
            s.deletes += 1;
            if s.down {
                return reply(StatusCode::INTERNAL_SERVER_ERROR, json!({}));
            }
            if !authorized || s.reject_token {
                return reply(StatusCode::UNAUTHORIZED, json!({}));
            }
            s.charges.retain(|_, (charge, ..)| charge != id);
            Response::builder().status(StatusCode::NO_CONTENT).body(Full::new(Bytes::new())).unwrap()
        }
        _ => reply(StatusCode::NOT_FOUND, json!({})),
    }
}
