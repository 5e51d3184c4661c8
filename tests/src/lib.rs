//! The acceptance-test harness.
//!
//! Every test gets a database of its own, cloned from a template that the embedded
//! migrations built once (`CREATE DATABASE ... TEMPLATE` is cheap), and a dev server
//! of its own on a free port of 127.0.0.1. Tests talk real HTTP to it, or call the
//! Lambda handlers directly with `lambda_http` requests.
//!
//! `TEST_DATABASE_URL` names the server (default: the machine's PostgreSQL on
//! 127.0.0.1:5432 as `postgres`); test databases are named with
//! `TEST_DATABASE_PREFIX` (default `rsv_t_`; scripts/test sets one per run and drops
//! the run's databases by it at exit).
//!
//! `TEST_POOLER_URL`, when set, names a transaction-mode pooler in front of that server
//! (scripts/test starts PgBouncer): each test's server then reaches its database
//! through it, sending statements as `DB_STATEMENTS` says, while the harness's own
//! checks ([`TestApp::db`]) and the databases' creation stay direct.

use chrono::{DateTime, Duration, DurationRound, Utc};
use reqwest::{RequestBuilder, StatusCode};
use serde_json::{Value, json};
use shared::clock::ManualClock;
use shared::config::{Config, Defaults};
use shared::sqs::Sqs;
use shared::{AppState, Clock, SystemClock};
use std::sync::Arc;
use tokio_postgres::NoTls;
use uuid::Uuid;

pub use serde_json;

pub mod bulk;
pub mod upstream_mock;

pub fn admin_url() -> String {
    std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// The URL of `admin_url()` pointed at another database.
pub fn url_for(database: &str) -> String {
    url_with_database(&admin_url(), database)
}

/// `url` pointed at another database, keeping its host, credentials and query.
pub fn url_with_database(url: &str, database: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..].find('/').map_or(base.len(), |i| scheme_end + i);
    let mut url = format!("{}/{}", &base[..path_start], database);
    if let Some(q) = query {
        url.push('?');
        url.push_str(q);
    }
    url
}

async fn connect(url: &str) -> (tokio_postgres::Client, tokio::task::JoinHandle<()>) {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL must be reachable at {url} (set TEST_DATABASE_URL): {e}"));
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    (client, task)
}

/// The prefix of the test databases' names: `TEST_DATABASE_PREFIX`, else `rsv_t_`. It
/// goes into SQL as it is, so it may hold only lower-case letters, digits and `_`, and
/// leaves room for the 32 characters of a UUID within PostgreSQL's 63.
pub fn database_prefix() -> String {
    let prefix = std::env::var("TEST_DATABASE_PREFIX").unwrap_or_else(|_| "rsv_t_".into());
    assert!(
        !prefix.is_empty()
            && prefix.len() <= 31
            && prefix.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
        "TEST_DATABASE_PREFIX must be 1 to 31 of a-z, 0-9 and _, not {prefix:?}"
    );
    prefix
}

/// A new, migrated database named with [`database_prefix`]; returns its URL.
pub async fn fresh_database() -> String {
    const LOCK: i64 = 0x0072_7376_5f74_706c; // serializes template builds across test processes
    let name = format!("{}{}", database_prefix(), Uuid::new_v4().simple());
    let (admin, admin_task) = connect(&admin_url()).await;
    let template = format!("rsv_tpl_{:016x}", shared::db::schema_fingerprint());
    admin.execute("SELECT pg_advisory_lock($1)", &[&LOCK]).await.unwrap();
    let exists = admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&template]).await.unwrap();
    if exists.is_none() {
        // Built under another name and renamed when complete, so that a build that
        // died half-way is never mistaken for a template.
        let building = format!("{template}_building");
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {building}")).await.unwrap();
        admin.batch_execute(&format!("CREATE DATABASE {building}")).await.unwrap();
        let (mut client, task) = connect(&url_for(&building)).await;
        shared::db::migrate(&mut client).await.expect("migrations apply");
        drop(client);
        let _ = task.await;
        admin.batch_execute(&format!("ALTER DATABASE {building} RENAME TO {template}")).await.unwrap();
    }
    admin.batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {template}")).await.unwrap();
    admin.execute("SELECT pg_advisory_unlock($1)", &[&LOCK]).await.unwrap();
    drop(admin);
    let _ = admin_task.await;
    url_for(&name)
}

/// Drops the database of `url` (one that [`fresh_database`] made), ending whatever
/// connections are still open to it.
pub async fn drop_database(url: &str) {
    let name = url.rsplit('/').next().and_then(|n| n.split('?').next()).expect("a URL that names a database");
    let (admin, task) = connect(&admin_url()).await;
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await.unwrap();
    drop(admin);
    let _ = task.await;
}

/// A dev server on its own database.
pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    pub state: AppState,
    pub database_url: String,
    /// Direct to the test's database: the harness's checks send named statements,
    /// which a transaction-mode pooler would not keep.
    direct: deadpool_postgres::Pool,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.server.abort();
    }
}

pub struct Options {
    pub clock: Arc<dyn Clock>,
    pub tweak: Box<dyn FnOnce(&mut Config)>,
    /// The base URL of a system of record (see [`upstream_mock`]).
    pub upstream: Option<String>,
    /// The server's timeouts and connection limit.
    pub limits: dev_server::Limits,
    /// Who publishes events (the sweep unless a test runs a relay of its own).
    pub events: shared::outbox::EventsRelay,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            tweak: Box::new(|_| {}),
            upstream: None,
            limits: dev_server::Limits::default(),
            events: shared::outbox::EventsRelay::Sweep,
        }
    }
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::spawn_with(Options::default()).await
    }

    /// A server whose clock the test moves.
    pub async fn spawn_with_clock(clock: Arc<ManualClock>) -> Self {
        Self::spawn_with(Options { clock, ..Default::default() }).await
    }

    pub async fn spawn_with(options: Options) -> Self {
        let database_url = fresh_database().await;
        let direct_config =
            Config::from_lookup(Defaults::DevServer, |k| (k == "DATABASE_URL").then(|| database_url.clone()))
                .expect("test configuration");
        let url = match std::env::var("TEST_POOLER_URL") {
            Ok(pooler) if !pooler.is_empty() => url_with_database(&pooler, database_url.rsplit('/').next().unwrap()),
            _ => database_url.clone(),
        };
        let mut config = Config::from_lookup(Defaults::DevServer, move |k| match k {
            "DATABASE_URL" => Some(url.clone()),
            "DB_STATEMENTS" => std::env::var(k).ok(),
            _ => None,
        })
        .expect("test configuration");
        config.database.pool_size = 20;
        // The service-wide limit of active holds per principal is off in the harness:
        // many tests hold more than its default 20 as one principal. The tests of the
        // limit turn it on with `Options::tweak`.
        config.max_active_holds_per_principal = 0;
        if let Some(base) = options.upstream {
            config.upstream.base_url = Some(base);
            config.upstream.token = Some(upstream_mock::TOKEN.into());
        }
        (options.tweak)(&mut config);
        let pool = shared::db::pool(&config.database).expect("pool");
        let direct = match config.database.url.expose() == direct_config.database.url.expose() {
            true => pool.clone(),
            false => {
                let settings =
                    shared::db::Settings { statements: config.database.statements, ..direct_config.database };
                shared::db::pool(&settings).expect("direct pool")
            }
        };
        let mut state = AppState::new(pool, config).with_upstream_from_config().with_events_relay(options.events);
        state.clock = options.clock;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(dev_server::serve_with(listener, state.clone(), options.limits));
        let http = reqwest::Client::builder().pool_max_idle_per_host(200).build().unwrap();
        TestApp { base, http, state, database_url, direct, server }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// The server's address, for tests that speak raw bytes to it.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.base.trim_start_matches("http://").parse().expect("the base is http://ip:port")
    }

    pub fn get(&self, who: &str, path: &str) -> RequestBuilder {
        self.http.get(self.url(path)).header("x-principal", who)
    }

    pub fn delete(&self, who: &str, path: &str) -> RequestBuilder {
        self.http.delete(self.url(path)).header("x-principal", who)
    }

    pub fn patch(&self, who: &str, path: &str, body: &Value) -> RequestBuilder {
        self.http.patch(self.url(path)).header("x-principal", who).json(body)
    }

    pub fn post(&self, who: &str, path: &str, body: &Value) -> RequestBuilder {
        self.http.post(self.url(path)).header("x-principal", who).json(body)
    }

    /// A resource made by the admin; returns its id.
    pub async fn resource_with(&self, body: Value) -> Uuid {
        let (status, r) = send(self.post("admin", "/v1/resources", &body)).await;
        assert_eq!(status, StatusCode::CREATED, "{r}");
        r["id"].as_str().unwrap().parse().unwrap()
    }

    pub async fn resource(&self, capacity: i32) -> Uuid {
        self.resource_with(json!({"name": "Room", "capacity": capacity})).await
    }

    /// `POST /v1/reservations` as `who`.
    pub async fn reserve(&self, who: &str, resource: Uuid, range: (&str, &str), quantity: i32) -> (StatusCode, Value) {
        send(self.post(
            who,
            "/v1/reservations",
            &json!({"resource_id": resource, "start": range.0, "end": range.1, "quantity": quantity}),
        ))
        .await
    }

    /// A hold of one unit of `[day + from_hour, day + to_hour)` that must succeed; the
    /// reservation document.
    pub async fn hold(&self, who: &str, resource: Uuid, from_hour: i64, to_hour: i64) -> Value {
        let (s, e) = hours(from_hour, to_hour);
        let (status, body) = self.reserve(who, resource, (&s, &e), 1).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body
    }

    /// `POST /v1/reservations/{id}/confirm` as `who`.
    pub async fn confirm(&self, who: &str, reservation_id: &Value) -> (StatusCode, Value) {
        send(
            self.http
                .post(self.url(&format!("{}/confirm", reservation_path(reservation_id))))
                .header("x-principal", who),
        )
        .await
    }

    /// The intent messages waiting in the outbox, taken out as the relay would send them.
    pub async fn take_intent_messages(&self) -> Vec<shared::outbox::Envelope> {
        self.take_messages(shared::outbox::Topic::Intents).await
    }

    /// The messages of `topic` waiting in the outbox, taken out as the relay sends them.
    pub async fn take_messages(&self, topic: shared::outbox::Topic) -> Vec<shared::outbox::Envelope> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let queue = shared::outbox::Queue::Channel(tx);
        self.relay_to(&queue, topic).await;
        drop(queue);
        let mut out = Vec::new();
        while let Some(e) = rx.recv().await {
            out.push(e);
        }
        out
    }

    /// One run of the relay of `topic` to `publisher`, on this server's clock; its report.
    pub async fn relay_to(
        &self,
        publisher: &impl shared::outbox::Publisher,
        topic: shared::outbox::Topic,
    ) -> shared::outbox::RelayReport {
        shared::outbox::relay(
            &self.state.pool,
            self.state.clock.as_ref(),
            publisher,
            topic,
            std::time::Duration::from_secs(30),
        )
        .await
        .unwrap()
    }

    /// Marks every message of `topic` unsent and due now, as a relay that died before
    /// marking its batch sent leaves them.
    pub async fn mark_messages_unsent(&self, topic: shared::outbox::Topic) {
        self.db()
            .await
            .execute(
                "UPDATE outbox SET published_at = NULL, next_attempt_at = now() WHERE topic = $1",
                &[&topic.as_str()],
            )
            .await
            .unwrap();
    }

    /// The number a query of this test's database counts: the first column of its one
    /// row, e.g. `SELECT count(*) FROM ...`.
    pub async fn count(&self, sql: &str, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]) -> i64 {
        self.db().await.query_one(sql, params).await.unwrap().get(0)
    }

    /// Waits until PostgreSQL shows `waiting` backends of the test's database waiting on
    /// a lock: the requests sent last have reached the lock they must wait for.
    pub async fn until_waiting_on_a_lock(&self, waiting: i64) {
        for _ in 0..500 {
            let n = self
                .count(
                    "SELECT count(*) FROM pg_stat_activity
                     WHERE datname = current_database() AND wait_event_type = 'Lock'",
                    &[],
                )
                .await;
            if n >= waiting {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("no request came to wait on the lock");
    }

    /// `POST /v1/resources/{resource}/waitlist` as `who`: a wait for `quantity` units of
    /// `[day + from_hour, day + to_hour)`.
    pub async fn join_waitlist(
        &self,
        who: &str,
        resource: Uuid,
        from_hour: i64,
        to_hour: i64,
        quantity: i32,
    ) -> (StatusCode, Value) {
        let (s, e) = hours(from_hour, to_hour);
        self.join_waitlist_with(who, resource, &json!({"start": s, "end": e, "quantity": quantity})).await
    }

    /// `POST /v1/resources/{resource}/waitlist` as `who` with this body.
    pub async fn join_waitlist_with(&self, who: &str, resource: Uuid, body: &Value) -> (StatusCode, Value) {
        send(self.post(who, &format!("/v1/resources/{resource}/waitlist"), body)).await
    }

    /// A waitlist entry as `who` reads it (`entry` is any document with its `id`); it
    /// must be found.
    pub async fn waitlist_entry(&self, who: &str, entry: &Value) -> Value {
        let (status, body) = send(self.get(who, &waitlist_entry_path(&entry["id"]))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    /// A reservation as `who` reads it (a problem document when it is not found).
    pub async fn reservation(&self, who: &str, id: &Value) -> Value {
        send(self.get(who, &reservation_path(id))).await.1
    }

    /// A direct connection to this test's database, for checking what was stored.
    pub async fn db(&self) -> deadpool_postgres::Object {
        self.direct.get().await.unwrap()
    }
}

/// The guarantee, checked in SQL: resources whose held, confirming and confirmed
/// quantity (holds lapsed by `at` left out) exceeds their capacity at some instant.
/// Must be 0.
pub async fn over_capacity(db: &deadpool_postgres::Object, at: DateTime<Utc>) -> i64 {
    db.query_one(
        "WITH live AS (
             SELECT resource_id, starts_at, ends_at, quantity FROM reservations
             WHERE status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND NOT (status = 'HELD' AND expires_at <= $1)
         ), edges AS (
             SELECT resource_id, starts_at AS at, quantity AS delta FROM live
             UNION ALL SELECT resource_id, ends_at, -quantity FROM live
         ), running AS (
             SELECT resource_id,
                    sum(delta) OVER (PARTITION BY resource_id ORDER BY at, delta ROWS UNBOUNDED PRECEDING) AS load
             FROM edges
         )
         SELECT count(*) FROM (SELECT resource_id, max(load) AS peak FROM running GROUP BY resource_id) p
         JOIN resources res ON res.id = p.resource_id WHERE p.peak > res.capacity",
        &[&at],
    )
    .await
    .unwrap()
    .get(0)
}

/// A small deterministic generator for the property tests (xorshift64*): the same seed
/// gives the same requests.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// The property tests' steps: the clock set just before one of `made`'s expiries (half
/// the steps, picked by `rng`), then moved a millisecond at a time, 12 times, while the
/// step's requests run; await the handle after them.
pub fn tick_through_an_expiry(
    clock: &Arc<ManualClock>,
    made: &[(String, Value)],
    rng: &mut Rng,
) -> tokio::task::JoinHandle<()> {
    if rng.below(2) == 0
        && let Some(at) = made.get(rng.below(made.len().max(1))).and_then(|(_, r)| r["expires_at"].as_str())
    {
        let expires: DateTime<Utc> = at.parse().unwrap();
        if expires > clock.now() {
            clock.set(expires - Duration::milliseconds(rng.below(6) as i64));
        }
    }
    let clock = clock.clone();
    tokio::spawn(async move {
        for _ in 0..12 {
            clock.advance(Duration::milliseconds(1));
            tokio::time::sleep(std::time::Duration::from_micros(300)).await;
        }
    })
}

/// The load timeline checked in SQL (`resource_load_mismatches()`): the intervals where
/// a capacity-N resource's pieces differ from the bookings they count, or reach across
/// a booking's boundary. Must be 0.
pub async fn load_timeline_mismatches(db: &deadpool_postgres::Object) -> i64 {
    db.query_one("SELECT count(*) FROM resource_load_mismatches()", &[]).await.unwrap().get(0)
}

/// Bookings of several with some rows live at `at` (held and not lapsed, confirming or
/// confirmed) and others not: all or nothing is broken. Must be 0.
pub async fn split_bookings(db: &deadpool_postgres::Object, at: DateTime<Utc>) -> i64 {
    db.query_one(
        "SELECT count(*) FROM (
             SELECT booking_id FROM reservations WHERE booking_id IS NOT NULL GROUP BY booking_id
             HAVING count(*) FILTER (WHERE status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
                                       AND NOT (status = 'HELD' AND expires_at <= $1)) NOT IN (0, count(*))
                 OR count(DISTINCT status) > 1) b",
        &[&at],
    )
    .await
    .unwrap()
    .get(0)
}

/// The claims on a resource's capacity as committed now: active reservations, less
/// holds whose `expires_at` has passed by the database's clock.
pub async fn active_claims(db: &deadpool_postgres::Object, resource: Uuid) -> Vec<shared::domain::Claim> {
    db.query(
        "SELECT starts_at, ends_at, quantity FROM reservations WHERE resource_id = $1 \
         AND status IN ('HELD','CONFIRMING','CONFIRMED') AND NOT (status = 'HELD' AND expires_at <= now())",
        &[&resource],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| shared::domain::Claim { start: r.get(0), end: r.get(1), quantity: r.get::<_, i32>(2).into() })
    .collect()
}

/// `/v1/reservations/{id}` for a reservation id as the API answers it.
pub fn reservation_path(id: &Value) -> String {
    format!("/v1/reservations/{}", id.as_str().expect("a reservation id"))
}

/// `/v1/waitlist/{id}` for a waitlist entry id as the API answers it.
pub fn waitlist_entry_path(id: &Value) -> String {
    format!("/v1/waitlist/{}", id.as_str().expect("a waitlist entry id"))
}

/// The JSON of a Lambda handler's response body.
pub fn json_of(body: &lambda_http::Body) -> Value {
    serde_json::from_slice(body.as_ref()).expect("a JSON body")
}

/// Sends every request at once: each waits at one barrier until all are ready, then
/// they go together. The answers, in the requests' order.
pub async fn send_at_once(requests: Vec<RequestBuilder>) -> Vec<(StatusCode, Value)> {
    let barrier = Arc::new(tokio::sync::Barrier::new(requests.len()));
    futures::future::join_all(requests.into_iter().map(|req| {
        let barrier = barrier.clone();
        async move {
            barrier.wait().await;
            send(req).await
        }
    }))
    .await
}

/// Runs a Python program (a standard's reference implementation) on `input` and reads
/// the JSON it prints; `what` names the package it needs when it fails.
pub fn python_json(script: &str, input: &[u8], what: &str) -> Value {
    use std::io::Write;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "the reference implementation ran ({what})");
    serde_json::from_slice(&output.stdout).expect("the program printed JSON")
}

/// Sends a request and reads the JSON answer (`Null` for an empty body).
pub async fn send(req: RequestBuilder) -> (StatusCode, Value) {
    let resp = req.send().await.expect("the dev server answers");
    let status = resp.status();
    let bytes = resp.bytes().await.unwrap();
    let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
    (status, body)
}

/// The workspace this harness belongs to.
pub fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ sits in the workspace").to_path_buf()
}

/// `cargo build` (debug) of `packages` in one invocation, so that they share one build
/// of their dependencies; returns each binary's path by name, read from cargo's own
/// artifact messages so that any target directory works. A binary of another package
/// is not built by `cargo test -p acceptance`, and `CARGO_BIN_EXE_*` names only this
/// package's own, so the tests that run the real binaries build them here (at once when
/// they are up to date).
pub fn build_binaries(packages: &[&str]) -> std::collections::BTreeMap<String, std::path::PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    cmd.current_dir(workspace_root()).args(["build", "--message-format=json-render-diagnostics"]);
    for package in packages {
        cmd.args(["-p", package]);
    }
    let out = cmd.stderr(std::process::Stdio::inherit()).output().expect("cargo runs");
    assert!(out.status.success(), "cargo build of {packages:?} failed ({})", out.status);
    let mut bins = std::collections::BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<Value>(line) else { continue };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        if let (Some(name), Some(exe)) = (msg["target"]["name"].as_str(), msg["executable"].as_str()) {
            bins.insert(name.to_string(), std::path::PathBuf::from(exe));
        }
    }
    bins
}

/// An answer read off a raw socket.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The body as JSON (`Null` if it is none).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// Sends `request` as it is on a new connection and reads the one answer: until the
/// server closes the connection, or the answer's `content-length` is complete. Panics
/// when no whole answer comes within `wait`.
pub async fn raw_exchange(addr: std::net::SocketAddr, request: &[u8], wait: std::time::Duration) -> RawResponse {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("the dev server accepts");
    let (mut reader, mut writer) = socket.split();
    let mut received = Vec::new();
    let exchange = async {
        // Written while the answer is read: a server may answer before the request ends.
        let write = async {
            let _ = writer.write_all(request).await;
        };
        let read = async {
            let mut chunk = [0u8; 16 * 1024];
            loop {
                match reader.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => received.extend_from_slice(&chunk[..n]),
                }
                if parse_raw(&received).is_some_and(|r| r.header("content-length") == Some(&r.body.len().to_string())) {
                    break;
                }
            }
        };
        tokio::join!(write, read);
    };
    if tokio::time::timeout(wait, exchange).await.is_err() {
        panic!("no whole answer in {wait:?}; got {:?}", String::from_utf8_lossy(&received));
    }
    parse_raw(&received).unwrap_or_else(|| panic!("not an HTTP answer: {:?}", String::from_utf8_lossy(&received)))
}

fn parse_raw(bytes: &[u8]) -> Option<RawResponse> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&bytes[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(RawResponse { status, headers, body: bytes[end + 4..].to_vec() })
}

/// The slug of a problem document: the last path segment of its `type`.
pub fn slug(problem: &Value) -> &str {
    problem["type"].as_str().and_then(|t| t.rsplit('/').next()).unwrap_or("")
}

/// A day comfortably inside the booking horizon, at midnight UTC.
pub fn day() -> DateTime<Utc> {
    (Utc::now() + Duration::days(30)).duration_trunc(Duration::days(1)).unwrap()
}

/// A resource's creation body for the tests that move a manual clock through expiries:
/// its holds last `hold_ttl_seconds` and may be kept for `max_hold_seconds`.
pub fn short_lived(capacity: i32, hold_ttl_seconds: i64, max_hold_seconds: i64) -> serde_json::Value {
    serde_json::json!({"name": "R", "capacity": capacity, "hold_ttl_seconds": hold_ttl_seconds,
                       "max_hold_seconds": max_hold_seconds})
}

/// `[day + from_hour, day + to_hour)` as RFC 3339 strings.
pub fn hours(from_hour: i64, to_hour: i64) -> (String, String) {
    let d = day();
    (rfc3339(d + Duration::hours(from_hour)), rfc3339(d + Duration::hours(to_hour)))
}

pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A `lambda_http` request as API Gateway would hand it to a function, in header mode.
pub fn lambda_request(method: &str, path: &str, principal: Option<&str>, body: Option<&Value>) -> lambda_http::Request {
    let mut b = http::Request::builder().method(method).uri(path);
    if let Some(p) = principal {
        b = b.header("x-principal", p);
    }
    let body = match body {
        Some(v) => {
            b = b.header("content-type", "application/json");
            lambda_http::Body::Text(v.to_string())
        }
        None => lambda_http::Body::Empty,
    };
    b.body(body).unwrap()
}

/// A moto SQS server on a free port of 127.0.0.1, for the tests of the SQS path
/// (`pip install 'moto[server]'`; `scripts/test` installs it). Killed on drop.
pub struct Moto {
    pub endpoint: String,
    child: std::process::Child,
}

impl Moto {
    pub async fn start() -> Moto {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let args = ["-H", "127.0.0.1", "-p", &port.to_string()];
        let spawn = |program: &str, pre: &[&str]| {
            std::process::Command::new(program)
                .args(pre)
                .args(args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
        };
        let child = spawn("moto_server", &[])
            .or_else(|_| spawn("python3", &["-m", "moto.server"]))
            .expect("moto's server must be installed: pip install 'moto[server]'");
        let endpoint = format!("http://127.0.0.1:{port}");
        let moto = Moto { endpoint, child };
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return moto;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("moto did not start on port {port}");
    }

    pub async fn sqs(&self) -> Sqs {
        sqs_at(self.endpoint.clone())
    }

    /// Creates a queue and returns its URL.
    pub async fn queue(&self, name: &str) -> String {
        let fifo: &[(&str, &str)] = if name.ends_with(".fifo") { &[("FifoQueue", "true")] } else { &[] };
        self.sqs().await.create_queue(name, fifo).await.unwrap()
    }

    /// Every message on the queue, received until it stays empty.
    pub async fn drain(&self, queue_url: &str) -> Vec<Value> {
        let sqs = self.sqs().await;
        let mut out = Vec::new();
        let mut empty = 0;
        while empty < 2 {
            let messages = sqs.receive_message(queue_url, 10, 0).await.unwrap();
            if messages.is_empty() {
                empty += 1;
                continue;
            }
            for m in messages {
                out.push(serde_json::from_str(&m.body).unwrap());
                sqs.delete_message(queue_url, &m.receipt_handle).await.unwrap();
            }
        }
        out
    }
}

/// An app whose functions publish the events they write before they answer, as in
/// AWS, to an in-process queue; and the queue's other end.
pub async fn publishing_after_each_request(
    options: Options,
) -> (TestApp, tokio::sync::mpsc::UnboundedReceiver<shared::outbox::Envelope>) {
    let (tx, queue) = tokio::sync::mpsc::unbounded_channel();
    let events = shared::outbox::EventsRelay::AfterRequest(shared::outbox::Queue::Channel(tx));
    (TestApp::spawn_with(Options { events, ..options }).await, queue)
}

/// Writes `per_subject` due events (`reservation.updated`, payload `{"n": round}`) for
/// each subject, due at `at`, round by round: every subject's round 0, then round 1...
pub async fn write_events(app: &TestApp, subjects: &[Uuid], per_subject: i32, at: chrono::DateTime<Utc>) {
    let mut db = app.db().await;
    let tx = db.transaction().await.unwrap();
    // Hundreds of thousands of rows take longer than the service's statement timeout
    // on a machine busy with the rest of the suite.
    tx.batch_execute("SET LOCAL statement_timeout = '120s'").await.unwrap();
    tx.execute(
        "INSERT INTO outbox (topic, kind, subject_id, payload, created_at, next_attempt_at) \
             SELECT 'events', 'reservation.updated', s, jsonb_build_object('n', n), $2, $2 \
             FROM generate_series(0, $3 - 1) n CROSS JOIN unnest($1::uuid[]) WITH ORDINALITY AS u(s, k) \
             ORDER BY n, k",
        &[&subjects, &at, &per_subject],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

/// An SQS client of the endpoint at `endpoint`, with moto's test credentials.
pub fn sqs_at(endpoint: String) -> Sqs {
    let credentials = shared::sqs::Credentials::new("test", "test", None, None, "moto");
    Sqs::new("us-east-1".into(), credentials, Some(endpoint))
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An SQS record carrying an outbox envelope, as the intents queue delivers it.
pub fn sqs_record(envelope: &shared::outbox::Envelope) -> aws_lambda_events::sqs::SqsMessage {
    let mut m = aws_lambda_events::sqs::SqsMessage::default();
    m.message_id = Some(Uuid::new_v4().to_string());
    m.body = Some(serde_json::to_string(envelope).unwrap());
    m
}

/// Invokes the intent worker's Lambda handler with these records.
pub async fn invoke_worker(
    state: &AppState,
    records: Vec<aws_lambda_events::sqs::SqsMessage>,
) -> aws_lambda_events::sqs::SqsBatchResponse {
    let mut event = aws_lambda_events::sqs::SqsEvent::default();
    event.records = records;
    intent_worker::handler(state, lambda_runtime::LambdaEvent::new(event, Default::default())).await.unwrap()
}

#[cfg(test)]
mod tests {
    use super::url_with_database;

    #[test]
    fn url_with_database_swaps_only_the_database() {
        assert_eq!(url_with_database("postgres://u@h:5432/postgres", "x"), "postgres://u@h:5432/x");
        assert_eq!(
            url_with_database("postgres://u@h/postgres?sslmode=disable", "x"),
            "postgres://u@h/x?sslmode=disable"
        );
        assert_eq!(url_with_database("postgres://u@h", "x"), "postgres://u@h/x");
    }
}
