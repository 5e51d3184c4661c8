//! (b) and (c): closed-loop throughput at a fixed concurrency for a fixed time.
//!
//! Each of `concurrency` workers sends one request, waits for the answer, and sends
//! the next, like a client with that many requests in flight. Only answers that
//! arrive inside the measured window count, so the warm-up (connection setup,
//! statement preparation, cold caches) and the requests still in flight at the end
//! do not skew the rate.

use crate::cpu::{Probe, Sampler};
use crate::setup::{self, BoxError, Server};
use crate::stats::{Outcome, Summary, Tally};
use chrono::{DateTime, Duration as Span, DurationRound, Utc};
use futures::{StreamExt, TryStreamExt};
use serde_json::json;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_postgres::{Client, Statement};
use uuid::Uuid;

/// One request in flight at a time; `Err` says why there was no answer.
pub trait Worker: Send + 'static {
    fn call(&mut self) -> impl Future<Output = Result<Outcome, String>> + Send;
}

#[derive(Debug, Clone, Copy)]
pub struct Phases {
    pub warmup: Duration,
    pub measure: Duration,
}

pub struct Report {
    /// Successes answered inside the measured window.
    pub successes: u64,
    /// CPU spent in the measured window, where it could be read.
    pub cpu: Option<crate::cpu::Usage>,
    pub measured: Tally,
    pub warmup: Tally,
    /// Of the successes only: a fast failure should not flatter the numbers.
    pub latency: Option<Summary>,
    pub window: Duration,
    pub first_error: Option<String>,
}

impl Report {
    pub fn per_second(&self) -> f64 {
        self.successes as f64 / self.window.as_secs_f64()
    }

    /// What was answered that was not a success, warm-up included.
    pub fn unexpected(&self, success: Outcome) -> Tally {
        let mut all = self.measured.clone();
        all.merge(&self.warmup);
        all.0.remove(&success);
        all
    }
}

#[derive(Default)]
struct WorkerTally {
    measured: Tally,
    warmup: Tally,
    latencies: Vec<Duration>,
    first_error: Option<String>,
}

/// Runs every worker through the warm-up and the measured window.
///
/// Each worker is handed back when its loop ends and kept until the window's last CPU
/// sample is read: a worker owns its connection, and a backend that exits before that
/// sample loses its whole window (the baselines' database CPU read as 0.000-0.035 ms
/// per transaction in runs where the workers' connections closed first).
pub async fn drive<W: Worker, S: Sampler>(
    workers: Vec<W>,
    phases: Phases,
    success: Outcome,
    probe: Option<&S>,
) -> Result<Report, BoxError> {
    let measure_from = Instant::now() + phases.warmup;
    let until = measure_from + phases.measure;
    let tasks: Vec<_> = workers.into_iter().map(|w| tokio::spawn(work(w, measure_from, until, success))).collect();
    let sampling = async {
        let probe = probe?;
        tokio::time::sleep_until(measure_from.into()).await;
        let before = probe.sample().await;
        tokio::time::sleep_until(until.into()).await;
        let after = probe.sample().await;
        Some(crate::cpu::between(&before, &after, phases.measure))
    };
    let (results, cpu) = tokio::join!(futures::future::join_all(tasks), sampling);
    let mut total = WorkerTally::default();
    for task in results {
        let (t, _worker) = task?;
        total.measured.merge(&t.measured);
        total.warmup.merge(&t.warmup);
        total.latencies.extend(t.latencies);
        total.first_error = total.first_error.or(t.first_error);
    }
    Ok(Report {
        successes: total.measured.count(success),
        cpu,
        measured: total.measured,
        warmup: total.warmup,
        latency: Summary::of(total.latencies),
        window: phases.measure,
        first_error: total.first_error,
    })
}

async fn work<W: Worker>(mut worker: W, measure_from: Instant, until: Instant, success: Outcome) -> (WorkerTally, W) {
    let mut t = WorkerTally::default();
    loop {
        let started = Instant::now();
        if started >= until {
            return (t, worker);
        }
        let outcome = match worker.call().await {
            Ok(o) => o,
            Err(e) => {
                t.first_error.get_or_insert(e);
                Outcome::Error
            }
        };
        let finished = Instant::now();
        // Counted by when the answer came: in a steady closed loop, answers per second
        // inside the window is the throughput, whatever the requests' start times.
        if finished < measure_from {
            t.warmup.add(outcome);
        } else if finished <= until {
            t.measured.add(outcome);
            if outcome == success {
                t.latencies.push(finished - started);
            }
        }
    }
}

// ---- (b) holds through HTTP ------------------------------------------------------

/// Hands out (target, slot) pairs that no two requests share: request `seq` goes to
/// target `seq % n` (a resource, a group of resources or a pool), in slot `seq / n` of
/// five minutes, one every `step_minutes` (a gap after each slot leaves room for a
/// buffer). Neighbouring requests, which are the ones in flight together, land on
/// different targets, so no request waits for another's resource lock.
struct SlotPlan {
    /// Each target's part of the body: `resource_id`, or `items`.
    targets: Vec<serde_json::Value>,
    day: DateTime<Utc>,
    step_minutes: i64,
    next: AtomicU64,
}

impl SlotPlan {
    const SLOT_MINUTES: i64 = 5;

    fn next_body(&self) -> serde_json::Value {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.targets.len() as u64;
        let mut body = self.targets[(seq % n) as usize].clone();
        let start = self.day + Span::minutes((seq / n) as i64 * self.step_minutes);
        let end = start + Span::minutes(Self::SLOT_MINUTES);
        let at = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        body["start"] = json!(at(start));
        body["end"] = json!(at(end));
        body
    }
}

struct HttpHolds {
    http: reqwest::Client,
    url: String,
    principal: String,
    /// How many holds this worker sent: each is made by a principal of its own
    /// (`worker-3-17`), so that none meets the limit of active holds per principal and
    /// each pays what a principal's first hold pays under it (its lock's row written).
    sent: u64,
    plan: Arc<SlotPlan>,
    keyed: bool,
}

impl Worker for HttpHolds {
    async fn call(&mut self) -> Result<Outcome, String> {
        self.sent += 1;
        let principal = format!("{}-{}", self.principal, self.sent);
        let mut request = self.http.post(&self.url).header("x-principal", principal).json(&self.plan.next_body());
        if self.keyed {
            // What a real client sends: a fresh key per request, kept for its retries.
            request = request.header("idempotency-key", Uuid::new_v4().to_string());
        }
        let request = request.build().map_err(|e| e.to_string())?;
        setup::send(&self.http, request).await
    }
}

/// How the holds of a run are shaped.
#[derive(Debug, Clone, Copy)]
pub struct HoldMix {
    /// How many resources the holds spread over.
    pub resources: usize,
    /// Their capacity. Holds of one resource of capacity 2 or more serialize on its
    /// lock; holds of one capacity-1 resource go side by side.
    pub capacity: i32,
    /// Whether each request carries an `Idempotency-Key`.
    pub keyed: bool,
    pub rules: Rules,
    pub shape: Shape,
}

/// What each request of a run books.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One resource, the single form (`resource_id`).
    Single,
    /// `n` resources at once (`items`), each `n` consecutive resources of the run one
    /// group.
    Group(usize),
    /// One item, any member of a `least_booked` pool of `n` of the run's resources.
    Pool(usize),
}

impl Shape {
    /// The body part of every target over `resources`, making the pools it needs.
    async fn targets(
        self,
        http: &reqwest::Client,
        server: &Server,
        resources: &[Uuid],
    ) -> Result<Vec<serde_json::Value>, BoxError> {
        let mut targets = Vec::new();
        if let Shape::Group(n) | Shape::Pool(n) = self
            && !resources.len().is_multiple_of(n)
        {
            return Err(format!("{} resources do not split into groups of {n}", resources.len()).into());
        }
        match self {
            Shape::Single => targets.extend(resources.iter().map(|id| json!({"resource_id": id}))),
            Shape::Group(n) => {
                targets.extend(resources.chunks_exact(n).map(
                    |group| json!({"items": group.iter().map(|id| json!({"resource_id": id})).collect::<Vec<_>>()}),
                ))
            }
            Shape::Pool(n) => {
                for (i, members) in resources.chunks_exact(n).enumerate() {
                    let pool = setup::create_pool(http, server, &format!("pool {i}"), members).await?;
                    targets.push(json!({"items": [{"pool_id": pool}]}));
                }
            }
        }
        Ok(targets)
    }
}

/// The calendar rules of the resources a run holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rules {
    /// None: no rule is judged.
    Plain,
    /// Europe/Berlin, a weekly schedule open every day all day, a 5-minute grid, a
    /// minute's notice, a year's advance, and on every other resource (the first
    /// included, so a run of one resource has it) a buffer of 5 minutes after each
    /// booking: every rule judged, none refusing (the slots are 10 minutes apart).
    Calendar,
}

impl Rules {
    /// The body that creates resource `i` of a run.
    fn resource(self, i: usize, capacity: i32) -> serde_json::Value {
        let name = format!("throughput {i}");
        match self {
            Rules::Plain => json!({"name": name, "capacity": capacity}),
            Rules::Calendar => {
                let weekly: serde_json::Map<String, serde_json::Value> = shared::domain::calendar::DAYS
                    .iter()
                    .map(|d| (d.to_string(), json!([["00:00", "24:00"]])))
                    .collect();
                json!({
                    "name": name,
                    "capacity": capacity,
                    "time_zone": "Europe/Berlin",
                    "schedule": {"weekly": weekly, "exceptions": []},
                    "slot_minutes": 5,
                    "min_notice_minutes": 1,
                    "max_advance_days": 365,
                    "buffer_after_minutes": if i.is_multiple_of(2) { 5 } else { 0 },
                })
            }
        }
    }

    /// How far apart a resource's slots start: room for the buffer with rules.
    fn step_minutes(self) -> i64 {
        match self {
            Rules::Plain => SlotPlan::SLOT_MINUTES,
            Rules::Calendar => 2 * SlotPlan::SLOT_MINUTES,
        }
    }
}

/// Makes the resources, then drives `concurrency` workers of holds at them.
pub async fn http_holds(
    server: &Server,
    mix: HoldMix,
    concurrency: usize,
    phases: Phases,
    probe: Option<&Probe>,
) -> Result<Report, BoxError> {
    let resources = mix.resources;
    let http = setup::http_client(concurrency);
    // `concurrency` at a time, which also opens the connections the workers will use.
    let ids: Vec<Uuid> = futures::stream::iter(0..resources)
        .map(|i| {
            let http = &http;
            async move { setup::create_resource_with(http, server, mix.rules.resource(i, mix.capacity)).await }
        })
        .buffered(concurrency)
        .try_collect()
        .await?;
    // Two days after the burst's day, so the two phases never share a slot; ten
    // thousand slots per resource would still end within the booking horizon. Each run
    // makes resources of its own, so runs never share a slot either.
    let day = (Utc::now() + Span::days(32)).duration_trunc(Span::days(1)).expect("a day truncates");
    let targets = mix.shape.targets(&http, server, &ids).await?;
    let plan = Arc::new(SlotPlan { targets, day, step_minutes: mix.rules.step_minutes(), next: AtomicU64::new(0) });
    let url = server.url("/v1/reservations");
    let workers = (0..concurrency)
        .map(|i| HttpHolds {
            http: http.clone(),
            url: url.clone(),
            principal: format!("worker-{i}"),
            sent: 0,
            plan: plan.clone(),
            keyed: mix.keyed,
        })
        .collect();
    drive(workers, phases, Outcome::Status(201), probe).await
}

// ---- (c) the physical baseline ---------------------------------------------------

/// The cheapest durable write a booking could possibly be: one row, one transaction,
/// three round trips (BEGIN, INSERT, COMMIT), the default synchronous commit, and a
/// connection of its own per worker so that nothing queues for a pool.
struct SqlInserts {
    client: Client,
    insert: Statement,
}

impl SqlInserts {
    async fn insert_one(&mut self) -> Result<(), tokio_postgres::Error> {
        let tx = self.client.transaction().await?;
        tx.execute(&self.insert, &[&Uuid::new_v4(), &"baseline row", &Utc::now()]).await?;
        tx.commit().await
    }
}

impl Worker for SqlInserts {
    async fn call(&mut self) -> Result<Outcome, String> {
        self.insert_one().await.map(|()| Outcome::Committed).map_err(|e| format!("insert failed: {e}"))
    }
}

pub const BASELINE_TABLE: &str = "CREATE TABLE IF NOT EXISTS bench_baseline (id uuid PRIMARY KEY, payload text NOT NULL, created_at timestamptz NOT NULL)";

/// The cheapest serialized write: lock one row, insert one row, commit (pgbench-style),
/// every transaction queuing on the same lock as holds of one resource do.
struct SqlLockedInserts {
    client: Client,
    lock: Statement,
    insert: Statement,
}

impl Worker for SqlLockedInserts {
    async fn call(&mut self) -> Result<Outcome, String> {
        let run = async {
            let tx = self.client.transaction().await?;
            tx.execute(&self.lock, &[]).await?;
            tx.execute(&self.insert, &[&Uuid::new_v4(), &"baseline row", &Utc::now()]).await?;
            tx.commit().await
        };
        run.await.map(|()| Outcome::Committed).map_err(|e: tokio_postgres::Error| format!("insert failed: {e}"))
    }
}

/// Drives `concurrency` connections of lock-one-row-then-insert transactions.
pub async fn sql_locked_inserts(
    database_url: &str,
    concurrency: usize,
    phases: Phases,
    probe: Option<&Probe>,
) -> Result<Report, BoxError> {
    setup::connect(database_url)
        .await?
        .batch_execute(
            "CREATE TABLE bench_lock (id int PRIMARY KEY); INSERT INTO bench_lock VALUES (1); \
             CREATE TABLE IF NOT EXISTS bench_baseline (id uuid PRIMARY KEY, payload text NOT NULL, \
             created_at timestamptz NOT NULL)",
        )
        .await?;
    let workers = futures::future::try_join_all((0..concurrency).map(|_| async {
        let client = setup::connect(database_url).await?;
        let lock = client.prepare("SELECT 1 FROM bench_lock WHERE id = 1 FOR UPDATE").await?;
        let insert = client.prepare("INSERT INTO bench_baseline (id, payload, created_at) VALUES ($1, $2, $3)").await?;
        Ok::<_, BoxError>(SqlLockedInserts { client, lock, insert })
    }))
    .await?;
    drive(workers, phases, Outcome::Committed, probe).await
}

/// Creates the baseline table, then drives `concurrency` connections of inserts.
pub async fn sql_inserts(
    database_url: &str,
    concurrency: usize,
    phases: Phases,
    probe: Option<&Probe>,
) -> Result<Report, BoxError> {
    setup::connect(database_url).await?.batch_execute(BASELINE_TABLE).await?;
    let workers = futures::future::try_join_all((0..concurrency).map(|_| async {
        let client = setup::connect(database_url).await?;
        let insert = client.prepare("INSERT INTO bench_baseline (id, payload, created_at) VALUES ($1, $2, $3)").await?;
        Ok::<_, BoxError>(SqlInserts { client, insert })
    }))
    .await?;
    drive(workers, phases, Outcome::Committed, probe).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::Sample;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;

    /// A worker that stands for a connection: it counts itself out when dropped.
    struct Connection(Arc<AtomicUsize>);

    impl Drop for Connection {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    impl Worker for Connection {
        async fn call(&mut self) -> Result<Outcome, String> {
            tokio::time::sleep(Duration::from_millis(2)).await;
            Ok(Outcome::Committed)
        }
    }

    /// Reads, as a probe reads the backends, how many connections are still open; it
    /// takes a while, as a query and a walk of `/proc` do.
    struct OpenConnections {
        open: Arc<AtomicUsize>,
        seen: Mutex<Vec<usize>>,
    }

    impl Sampler for OpenConnections {
        async fn sample(&self) -> Sample {
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.seen.lock().unwrap().push(self.open.load(Ordering::SeqCst));
            Sample::default()
        }
    }

    #[tokio::test]
    async fn the_last_sample_of_a_window_is_read_while_every_worker_still_holds_its_connection() {
        let open = Arc::new(AtomicUsize::new(4));
        let workers: Vec<_> = (0..4).map(|_| Connection(open.clone())).collect();
        let sampler = OpenConnections { open: open.clone(), seen: Mutex::new(Vec::new()) };
        let phases = Phases { warmup: Duration::from_millis(10), measure: Duration::from_millis(50) };
        let report = drive(workers, phases, Outcome::Committed, Some(&sampler)).await.unwrap();
        assert!(report.successes > 0);
        assert_eq!(*sampler.seen.lock().unwrap(), [4, 4], "open connections at the window's first and last sample");
        assert_eq!(open.load(Ordering::SeqCst), 0, "every connection closes once the window is read");
    }
}
