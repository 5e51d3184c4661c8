//! (a) The burst: many principals hold the same slot of one capacity-1 resource at the
//! same instant. Exactly one must win; everyone else must hear 409 quickly, because a
//! popular slot going on sale is the moment users are watching the spinner. (ag) is the
//! same for one group of capacity-1 resources booked together.

use crate::setup::{self, BoxError, Server};
use crate::stats::{Outcome, Summary, Tally};
use chrono::{DateTime, Duration as Days, DurationRound, Utc};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Barrier;
use tokio_postgres::Client;
use uuid::Uuid;

pub const CREATED: Outcome = Outcome::Status(201);
pub const CONFLICT: Outcome = Outcome::Status(409);

/// One round: every contender's outcome, and what the database kept.
pub struct Round {
    pub tally: Tally,
    pub latencies: Vec<Duration>,
    /// From the release of the barrier to the last answer.
    pub wall: Duration,
    /// Active bookings of the round's resources after the burst (a booking of several
    /// items counted once; the capacity check finds one with only some items active),
    /// read straight from PostgreSQL: the answers could be right while the table is not.
    pub stored_active: i64,
    /// Why a request got no answer, if one did not.
    pub first_error: Option<String>,
}

impl Round {
    /// One 201, everyone else 409, and one row to show for it.
    pub fn is_correct(&self, contenders: usize) -> bool {
        self.tally.count(CREATED) == 1
            && self.tally.count(CONFLICT) == contenders as u64 - 1
            && self.tally.total() == contenders as u64
            && self.stored_active == 1
    }
}

pub struct Report {
    pub contenders: usize,
    /// The first burst, on a server whose pooled connections have not yet prepared
    /// the booking statements: checked like any round, kept out of the percentiles.
    pub warmup: Round,
    pub rounds: Vec<Round>,
}

impl Report {
    pub fn all_correct(&self) -> bool {
        self.all_rounds().all(|r| r.is_correct(self.contenders))
    }

    pub fn any_failure(&self) -> bool {
        self.all_rounds().any(|r| r.tally.any_failure())
    }

    fn all_rounds(&self) -> impl Iterator<Item = &Round> {
        std::iter::once(&self.warmup).chain(&self.rounds)
    }

    /// Every request of every round, winners and losers alike: a loser's wait is as
    /// real to its user as the winner's.
    pub fn latency(&self) -> Option<Summary> {
        Summary::of(self.rounds.iter().flat_map(|r| r.latencies.iter().copied()).collect())
    }
}

/// Runs a warm-up burst and then `rounds` bursts of `contenders` requests, each on
/// fresh resources so that no round sees the previous one's hold. Each request books
/// `items` resources together: one in the single form, several as `items`.
pub async fn run(
    server: &Server,
    db: &Client,
    contenders: usize,
    rounds: usize,
    items: usize,
) -> Result<Report, BoxError> {
    let clients = warm_clients(server, contenders).await?;
    let admin = setup::http_client(1);
    let (start, end) = slot();
    let mut all = Vec::with_capacity(rounds + 1);
    for n in 0..=rounds {
        let mut resources = Vec::with_capacity(items);
        for i in 0..items {
            resources.push(setup::create_resource(&admin, server, &format!("burst {n}.{i}")).await?);
        }
        let mut body = match resources.as_slice() {
            [one] => json!({"resource_id": one}),
            group => json!({"items": group.iter().map(|id| json!({"resource_id": id})).collect::<Vec<_>>()}),
        };
        body["start"] = json!(start);
        body["end"] = json!(end);
        let mut round = one_round(&clients, server, &body, &format!("{items}-{n}")).await?;
        round.stored_active = active_bookings(db, &resources).await?;
        all.push(round);
    }
    let warmup = all.remove(0);
    Ok(Report { contenders, warmup, rounds: all })
}

/// One client, and so one open connection, per contender. Opening them here keeps TCP
/// handshakes and the server's connection setup out of the burst: with a shared pool
/// a burst could still find fewer idle connections than contenders and open more.
async fn warm_clients(server: &Server, n: usize) -> Result<Vec<reqwest::Client>, BoxError> {
    let clients: Vec<reqwest::Client> = (0..n).map(|_| setup::http_client(1)).collect();
    futures::future::try_join_all(clients.iter().map(|c| setup::health(c, server))).await?;
    Ok(clients)
}

/// 10:00 to 11:00 UTC on a day a month ahead: well inside the booking horizon, never
/// in the past, whenever the bench runs.
fn slot() -> (String, String) {
    let day: DateTime<Utc> = (Utc::now() + Days::days(30)).duration_trunc(Days::days(1)).expect("a day truncates");
    let at = |h| (day + Days::hours(h)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    (at(10), at(11))
}

async fn one_round(
    clients: &[reqwest::Client],
    server: &Server,
    body: &serde_json::Value,
    n: &str,
) -> Result<Round, BoxError> {
    let url = server.url("/v1/reservations");
    // Built before the barrier, so that the contenders do only the sending after it.
    let requests = clients
        .iter()
        .enumerate()
        .map(|(i, c)| c.post(&url).header("x-principal", format!("burst-{n}-{i}")).json(body).build())
        .collect::<Result<Vec<_>, _>>()?;
    let barrier = Arc::new(Barrier::new(clients.len()));
    let tasks: Vec<_> = clients
        .iter()
        .cloned()
        .zip(requests)
        .map(|(client, request)| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                let started = Instant::now();
                let outcome = setup::send(&client, request).await;
                (started, Instant::now(), outcome)
            })
        })
        .collect();

    let mut round = Round {
        tally: Tally::default(),
        latencies: Vec::with_capacity(clients.len()),
        wall: Duration::ZERO,
        stored_active: 0,
        first_error: None,
    };
    let (mut first_start, mut last_end): (Option<Instant>, Option<Instant>) = (None, None);
    for task in futures::future::join_all(tasks).await {
        let (started, finished, outcome) = task?;
        first_start = Some(first_start.map_or(started, |s| s.min(started)));
        last_end = Some(last_end.map_or(finished, |e| e.max(finished)));
        round.latencies.push(finished - started);
        match outcome {
            Ok(o) => round.tally.add(o),
            Err(e) => {
                round.tally.add(Outcome::Error);
                round.first_error.get_or_insert(e);
            }
        }
    }
    if let (Some(s), Some(e)) = (first_start, last_end) {
        round.wall = e - s;
    }
    Ok(round)
}

/// Bookings with an active row on `resources`.
async fn active_bookings(db: &Client, resources: &[Uuid]) -> Result<i64, BoxError> {
    let row = db
        .query_one(
            "SELECT count(DISTINCT coalesce(booking_id, id)) FROM reservations \
             WHERE resource_id = ANY($1) AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')",
            &[&resources],
        )
        .await?;
    Ok(row.get(0))
}
