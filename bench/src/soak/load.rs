//! The soak's clients. Each is one principal in a closed loop (one request at a time,
//! no think time) doing what users do: availability reads, holds, one-step bookings,
//! confirms and releases of its holds, cancels of its bookings, and waitlist joins,
//! reads, offer acceptances and leaves. Every `POST` carries a fresh
//! `Idempotency-Key`, and some are sent a second time with the same key, which must
//! answer as the first did.
//!
//! A client keeps only a few holds, bookings and waitlist entries at a time (it
//! cancels its oldest booking and leaves its oldest entry past the cap), so the load
//! on the resources stays the same from the first minute to the last while the tables
//! keep every row ever written.

use super::record::{Op, Recorder};
use crate::setup;
use crate::stats::Outcome;
use chrono::{DateTime, Duration as Span, Utc};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Per client: beyond these, the oldest goes (booking cancelled, entry left).
const MAX_BOOKINGS: usize = 3;
const MAX_ENTRIES: usize = 2;
/// A hold older than this has lapsed (TTLs are at most 5 s): forgotten, not released.
const HOLD_MEMORY: Duration = Duration::from_secs(8);
/// Share of mutations sent again with the same key, in percent.
const REPLAY_PERCENT: u64 = 5;
/// Share of refused holds and bookings that join the waitlist for that range.
const JOIN_AFTER_REFUSAL_PERCENT: u64 = 30;

#[derive(Debug, Clone, Copy)]
pub struct Resource {
    pub id: Uuid,
    pub capacity: i32,
}

/// The resources and the hours of one day that every client books in.
#[derive(Debug, Clone)]
pub struct Plan {
    pub resources: Vec<Resource>,
    pub day: DateTime<Utc>,
    pub first_hour: i64,
    pub hours: i64,
}

impl Plan {
    pub fn window(&self) -> (DateTime<Utc>, DateTime<Utc>) {
        let from = self.day + Span::hours(self.first_hour);
        (from, from + Span::hours(self.hours))
    }
}

/// splitmix64: a seeded, reproducible stream; the bench needs no better randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

/// An answer: the status and the body, or nothing when the request failed.
type Answer = Option<(u16, Vec<u8>)>;

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

fn id_of(body: &[u8], field: &str) -> Option<Uuid> {
    json_of(body)[field].as_str()?.parse().ok()
}

fn at(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub struct Client {
    http: reqwest::Client,
    base: Arc<str>,
    principal: String,
    rng: Rng,
    plan: Arc<Plan>,
    recorder: Arc<Recorder>,
    holds: VecDeque<(Uuid, Instant)>,
    bookings: VecDeque<Uuid>,
    entries: VecDeque<Uuid>,
    keys: u64,
}

impl Client {
    pub fn new(n: usize, http: reqwest::Client, base: Arc<str>, plan: Arc<Plan>, recorder: Arc<Recorder>) -> Self {
        Self {
            http,
            base,
            principal: format!("soak-{n}"),
            rng: Rng(0x5EED_0000 + n as u64),
            plan,
            recorder,
            holds: VecDeque::new(),
            bookings: VecDeque::new(),
            entries: VecDeque::new(),
            keys: 0,
        }
    }

    /// Steps until `until`; each step sends at most three requests.
    pub async fn run(mut self, until: Instant) {
        while Instant::now() < until {
            self.step().await;
        }
    }

    async fn step(&mut self) {
        while self.holds.front().is_some_and(|(_, t)| t.elapsed() > HOLD_MEMORY) {
            self.holds.pop_front();
        }
        if self.bookings.len() > MAX_BOOKINGS {
            return self.cancel().await;
        }
        if self.entries.len() > MAX_ENTRIES {
            let entry = self.entries.pop_front().expect("over the cap");
            return self.leave(entry).await;
        }
        match self.rng.below(100) {
            0..24 => self.availability().await,
            24..44 => self.reserve(false).await,
            44..54 => self.reserve(true).await,
            54..68 if !self.holds.is_empty() => self.confirm().await,
            54..68 => self.reserve(false).await,
            68..76 if !self.holds.is_empty() => self.release().await,
            68..76 => self.availability().await,
            76..82 if !self.bookings.is_empty() => self.cancel().await,
            76..82 => self.reserve(true).await,
            82..88 => {
                let (resource, start, end, quantity) = self.range();
                self.join(resource, start, end, quantity).await
            }
            _ if !self.entries.is_empty() => self.check_entry().await,
            _ => self.availability().await,
        }
    }

    /// A resource, a range of one or two hours in the plan's day, and a quantity that
    /// fits the resource.
    fn range(&mut self) -> (Uuid, DateTime<Utc>, DateTime<Utc>, i32) {
        let plan = self.plan.clone();
        let r = plan.resources[self.rng.below(plan.resources.len() as u64) as usize];
        let first = self.rng.below(plan.hours as u64) as i64;
        let last = (first + 1 + self.rng.below(2) as i64).min(plan.hours);
        let base = plan.day + Span::hours(plan.first_hour);
        let quantity = 1 + self.rng.below(r.capacity.min(3) as u64) as i32;
        (r.id, base + Span::hours(first), base + Span::hours(last), quantity)
    }

    /// Sends one request as this client and records its answer.
    async fn send(&mut self, op: Op, request: reqwest::RequestBuilder) -> Answer {
        let request = match request.header("x-principal", &self.principal).build() {
            Ok(r) => r,
            Err(e) => {
                self.recorder.error(Instant::now(), format!("{}: cannot build the request: {e}", op.name()));
                return None;
            }
        };
        let started = Instant::now();
        let answer = setup::exchange(&self.http, request).await;
        let finished = Instant::now();
        match answer {
            Ok((status, body)) => {
                let problem = (status >= 400).then(|| json_of(&body));
                let kind = problem.as_ref().map(acceptance::slug).filter(|_| status < 500);
                self.recorder.record(op, Outcome::Status(status), kind, started, finished);
                if status >= 500 {
                    let detail = String::from_utf8_lossy(&body);
                    self.recorder.error(finished, format!("{} answered {status}: {detail}", op.name()));
                }
                Some((status, body))
            }
            Err(e) => {
                self.recorder.record(op, Outcome::Error, None, started, finished);
                self.recorder.error(finished, format!("{}: {e}", op.name()));
                None
            }
        }
    }

    /// A `POST` with a fresh `Idempotency-Key`; now and then sent again with the same
    /// key, which must replay the first answer's status.
    async fn mutate(&mut self, op: Op, path: &str, body: Value) -> Answer {
        self.keys += 1;
        let key = format!("{}-{}", self.principal, self.keys);
        let url = format!("{}{path}", self.base);
        let request = |http: &reqwest::Client| http.post(&url).header("idempotency-key", &key).json(&body);
        let answer = self.send(op, request(&self.http)).await;
        if let Some((status, _)) = &answer
            && *status < 500
            && self.rng.percent(REPLAY_PERCENT)
        {
            let status = *status;
            if let Some((again, _)) = self.send(Op::Replay, request(&self.http)).await
                && again != status
            {
                self.recorder.mismatch(format!("{} {path} answered {status}, its replay {again}", op.name()));
            }
        }
        answer
    }

    async fn availability(&mut self) {
        let id = self.plan.resources[self.rng.below(self.plan.resources.len() as u64) as usize].id;
        let (from, to) = self.plan.window();
        let url = format!("{}/v1/resources/{id}/availability", self.base);
        let request = self.http.get(url).query(&[("from", at(from)), ("to", at(to))]);
        self.send(Op::Availability, request).await;
    }

    /// A hold, or a one-step booking; a refusal sometimes joins the waitlist instead.
    async fn reserve(&mut self, confirm: bool) {
        let (resource, start, end, quantity) = self.range();
        let mut body = json!({"resource_id": resource, "start": at(start), "end": at(end), "quantity": quantity});
        if confirm {
            body["confirm"] = json!(true);
        }
        let op = if confirm { Op::Book } else { Op::Hold };
        match self.mutate(op, "/v1/reservations", body).await {
            Some((201, body)) => match (id_of(&body, "id"), confirm) {
                (Some(id), true) => self.bookings.push_back(id),
                (Some(id), false) => self.holds.push_back((id, Instant::now())),
                (None, _) => {}
            },
            Some((409, _)) if self.rng.percent(JOIN_AFTER_REFUSAL_PERCENT) => {
                self.join(resource, start, end, quantity).await
            }
            _ => {}
        }
    }

    /// Confirms the newest hold (it may have lapsed: that answers 409).
    async fn confirm(&mut self) {
        let Some((id, _)) = self.holds.pop_back() else { return };
        if let Some((200, _)) = self.mutate(Op::Confirm, &format!("/v1/reservations/{id}/confirm"), json!({})).await {
            self.bookings.push_back(id);
        }
    }

    async fn release(&mut self) {
        let Some((id, _)) = self.holds.pop_front() else { return };
        let url = format!("{}/v1/reservations/{id}", self.base);
        self.send(Op::Release, self.http.delete(url)).await;
    }

    async fn cancel(&mut self) {
        let Some(id) = self.bookings.pop_front() else { return };
        let url = format!("{}/v1/reservations/{id}", self.base);
        self.send(Op::Cancel, self.http.delete(url)).await;
    }

    async fn join(&mut self, resource: Uuid, start: DateTime<Utc>, end: DateTime<Utc>, quantity: i32) {
        let body = json!({"start": at(start), "end": at(end), "quantity": quantity});
        let path = format!("/v1/resources/{resource}/waitlist");
        if let Some((201, body)) = self.mutate(Op::JoinWaitlist, &path, body).await
            && let Some(id) = id_of(&body, "id")
        {
            self.entries.push_back(id);
        }
    }

    async fn leave(&mut self, entry: Uuid) {
        let url = format!("{}/v1/waitlist/{entry}", self.base);
        self.send(Op::LeaveWaitlist, self.http.delete(url)).await;
    }

    /// Reads the oldest entry: an offer is mostly accepted, else declined by leaving;
    /// a waiting entry sometimes gives up; a settled one is forgotten.
    async fn check_entry(&mut self) {
        let Some(entry) = self.entries.pop_front() else { return };
        let url = format!("{}/v1/waitlist/{entry}", self.base);
        let Some((200, body)) = self.send(Op::ReadWaitlist, self.http.get(url)).await else { return };
        let body = json_of(&body);
        match body["status"].as_str() {
            Some("OFFERED") if self.rng.percent(70) => {
                let Some(offer) = body["reservation_id"].as_str() else { return };
                let path = format!("/v1/reservations/{offer}/confirm");
                if let (Some((200, _)), Ok(id)) = (self.mutate(Op::AcceptOffer, &path, json!({})).await, offer.parse())
                {
                    self.bookings.push_back(id);
                }
            }
            Some("OFFERED") => self.leave(entry).await,
            Some("WAITING") if self.rng.percent(25) => self.leave(entry).await,
            Some("WAITING") => self.entries.push_back(entry),
            _ => {}
        }
    }
}
