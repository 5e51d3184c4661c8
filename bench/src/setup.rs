//! The throwaway database and the in-process dev server that every measurement runs
//! against, what every bench binary does around its measurements (parameters from the
//! environment, the database's life, the exit code), and the few HTTP calls the
//! measurements share.

use crate::stats::Outcome;
use serde_json::json;
use shared::AppState;
use shared::config::{Config, Defaults};
use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls};
use uuid::Uuid;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// `BENCH_DATABASE_URL`: the admin connection the bench databases are made with.
pub fn admin_url() -> String {
    std::env::var("BENCH_DATABASE_URL").unwrap_or_else(|_| DEFAULT_ADMIN_URL.into())
}

/// A positive integer from the environment, or `default` when unset.
pub fn env_number(name: &str, default: usize) -> Result<usize, String> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{name} must be a positive integer, not {v:?}")),
        },
    }
}

/// The parameters a binary read from its arguments and the environment; on a usage
/// error, says it and exits with 2.
pub fn parameters_or_exit<P>(parsed: Result<P, String>) -> P {
    parsed.unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    })
}

/// The machine a number was taken on: its cores, OS and architecture.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or_else(|e| format!("unknown ({e})"), |n| n.to_string());
    format!("{cores} cores, {} {}", std::env::consts::OS, std::env::consts::ARCH)
}

/// Makes a bench database on [`admin_url`], hands its URL to `run`, drops the database
/// whatever happened, and turns the outcome into the exit code: 0 when `run` found the
/// service right, 1 when it found it wrong, 2 when it could not run.
pub async fn in_fresh_database<F, Fut>(run: F) -> ExitCode
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = Result<bool, BoxError>> + Send + 'static,
{
    let db = match BenchDatabase::create(&admin_url()).await {
        Ok(db) => db,
        Err(e) => {
            println!("ERROR: cannot create the bench database: {e}");
            return ExitCode::from(2);
        }
    };
    println!("database: {} (dropped at the end)", db.name);

    // On a task of its own so that a panic comes back here as an error and the
    // database is still dropped.
    let outcome = tokio::spawn(run(db.url.clone())).await;
    if let Err(e) = db.drop().await {
        println!("warning: could not drop the bench database: {e}");
    }
    match outcome {
        Ok(Ok(true)) => ExitCode::SUCCESS,
        Ok(Ok(false)) => ExitCode::FAILURE,
        Ok(Err(e)) => {
            println!("ERROR: the bench could not run: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            println!("ERROR: the bench panicked: {e}");
            ExitCode::from(2)
        }
    }
}

/// The settings that decide what a commit costs, so a number is read in context.
pub async fn print_database_settings(db: &Client) -> Result<(), BoxError> {
    let row = db
        .query_one(
            "SELECT current_setting('server_version'), current_setting('fsync'), \
             current_setting('synchronous_commit'), current_setting('max_connections'), \
             current_setting('shared_buffers')",
            &[],
        )
        .await?;
    let s = |i: usize| row.get::<_, String>(i);
    println!(
        "postgres: {}, fsync={}, synchronous_commit={}, max_connections={}, shared_buffers={}",
        s(0),
        s(1),
        s(2),
        s(3),
        s(4)
    );
    Ok(())
}

/// Opens a plain connection; its driver runs on a task of its own and stops when the
/// client is dropped.
pub async fn connect(url: &str) -> Result<Client, BoxError> {
    let (client, connection) =
        tokio_postgres::connect(url, NoTls).await.map_err(|e| format!("cannot connect to {url}: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// The prefix of the bench databases. Each run drops its own at the end, whatever
/// happened; one killed outright leaves it behind, to be dropped by hand.
const BENCH_PREFIX: &str = "rsv_bench";

/// A database of the bench's own, so that runs never see each other's rows or a
/// developer's data, and so that the numbers start from empty tables every time.
pub struct BenchDatabase {
    admin_url: String,
    pub name: String,
    pub url: String,
}

impl BenchDatabase {
    /// Creates the (empty) database, [`BENCH_PREFIX`] and a random suffix; migrating
    /// it is the caller's first step, inside the guarded part of the run, so that a
    /// failed migration still drops it.
    pub async fn create(admin_url: &str) -> Result<Self, BoxError> {
        let name = format!("{BENCH_PREFIX}_{}", Uuid::new_v4().simple());
        let admin = connect(admin_url).await?;
        admin.batch_execute(&format!("CREATE DATABASE {name}")).await?;
        Ok(Self { admin_url: admin_url.into(), url: acceptance::url_with_database(admin_url, &name), name })
    }

    /// Drops the database; `FORCE` ends whatever connections the run left behind
    /// (the server's pool, a worker that panicked).
    pub async fn drop(self) -> Result<(), BoxError> {
        let admin = connect(&self.admin_url).await?;
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)).await?;
        Ok(())
    }
}

/// The dev server on 127.0.0.1 with a port of its own, on this process's runtime.
pub struct Server {
    pub base: String,
    /// The server's own state: its configuration, and its pool for reading what it
    /// stored.
    pub state: AppState,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

/// How to run the server, beyond the dev server's defaults.
pub struct ServerOptions {
    pub pool_size: usize,
    /// Settings by their environment names (the README's table), over the defaults.
    pub settings: Vec<(&'static str, String)>,
    /// Runs the sweeper's sweep this often, as the dev server's `run_scheduled` does;
    /// `None`: never.
    pub sweep_every: Option<Duration>,
    /// Who publishes the events the requests write.
    pub events: Events,
}

/// Who publishes the events the bench server's requests write.
pub enum Events {
    /// No one: they stay in the outbox (or, with a sweep, go to the log, which nobody
    /// reads here).
    Kept,
    /// The server's own relay, woken after every request that writes, as the dev
    /// server's is.
    Background(shared::outbox::Queue),
    /// The request itself, after its commit and before its answer, as the functions
    /// do in AWS.
    ByRequest(shared::outbox::Queue),
}

impl Server {
    /// Every setting but the URL and the pool is the dev server's default, the
    /// configuration a developer runs and the acceptance tests exercise; no sweeper.
    pub async fn start(database_url: &str, pool_size: usize) -> Result<Self, BoxError> {
        Self::start_with(
            database_url,
            ServerOptions { pool_size, settings: Vec::new(), sweep_every: None, events: Events::Kept },
        )
        .await
    }

    pub async fn start_with(database_url: &str, options: ServerOptions) -> Result<Self, BoxError> {
        let url = database_url.to_string();
        let settings = options.settings;
        let setting = move |k: &str| settings.iter().find(|(name, _)| *name == k).map(|(_, v)| v.clone());
        let mut config = Config::from_lookup(Defaults::DevServer, move |k| match k {
            "DATABASE_URL" => Some(url.clone()),
            // The limit of active holds per principal as the bench's environment sets it
            // (the service's default otherwise), so that one build measures it on and off.
            "MAX_ACTIVE_HOLDS_PER_PRINCIPAL" => setting(k).or_else(|| std::env::var(k).ok()),
            _ => setting(k),
        })?;
        config.database.pool_size = options.pool_size;
        let mut state = AppState::new(shared::db::pool(&config.database)?, config);
        let mut relay = None;
        match options.events {
            Events::Kept => {}
            Events::Background(queue) => {
                let wake = Arc::new(tokio::sync::Notify::new());
                state = state.with_events_relay(shared::outbox::EventsRelay::Background(wake.clone()));
                relay = Some((queue, wake));
            }
            Events::ByRequest(queue) => {
                state = state.with_events_relay(shared::outbox::EventsRelay::AfterRequest(queue))
            }
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let mut tasks = vec![tokio::spawn(dev_server::serve(listener, state.clone()))];
        if let Some(every) = options.sweep_every {
            tasks.push(tokio::spawn(dev_server::run_scheduled(state.clone(), shared::outbox::LogPublisher, every)));
        }
        if let Some((queue, wake)) = relay {
            tasks.push(tokio::spawn(shared::outbox::run_events_relay(state.clone(), queue, wake)));
        }
        Ok(Self { base, state, tasks })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }
}

/// A client with keep-alive and no Nagle delay, as a real API client would use.
pub fn http_client(max_idle: usize) -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(max_idle)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("a client without TLS or proxies always builds")
}

/// `GET /v1/health` until it answers 200: opens (and so warms) a connection.
pub async fn health(http: &reqwest::Client, server: &Server) -> Result<(), BoxError> {
    let resp = http.get(server.url("/v1/health")).send().await?;
    let status = resp.status();
    resp.bytes().await?;
    if status != reqwest::StatusCode::OK {
        return Err(format!("GET /v1/health answered {status}").into());
    }
    Ok(())
}

/// Sends a request and reads its whole answer (so that the connection goes back to the
/// pool and the latency includes the body). `Err` carries why there was no answer.
pub async fn send(http: &reqwest::Client, request: reqwest::Request) -> Result<Outcome, String> {
    exchange(http, request).await.map(|(status, _)| Outcome::Status(status))
}

/// [`send`], keeping the status and the body.
pub async fn exchange(http: &reqwest::Client, request: reqwest::Request) -> Result<(u16, Vec<u8>), String> {
    let resp = http.execute(request).await.map_err(|e| format!("request failed: {e}"))?;
    let status = resp.status().as_u16();
    let body = resp.bytes().await.map_err(|e| format!("reading the answer failed: {e}"))?;
    Ok((status, body.to_vec()))
}

/// A capacity-1 resource made by the admin; returns its id.
pub async fn create_resource(http: &reqwest::Client, server: &Server, name: &str) -> Result<Uuid, BoxError> {
    create_resource_with(http, server, json!({"name": name, "capacity": 1})).await
}

/// A resource made by the admin from `body` (`POST /v1/resources`); returns its id.
pub async fn create_resource_with(
    http: &reqwest::Client,
    server: &Server,
    body: serde_json::Value,
) -> Result<Uuid, BoxError> {
    create_resource_at(http, &server.base, body).await
}

/// [`create_resource_with`] on the server at `base`, this process's or another's.
pub async fn create_resource_at(http: &reqwest::Client, base: &str, body: serde_json::Value) -> Result<Uuid, BoxError> {
    let resp = http.post(format!("{base}/v1/resources")).header("x-principal", "admin").json(&body).send().await?;
    let status = resp.status();
    let body: serde_json::Value = resp.json().await?;
    if status != reqwest::StatusCode::CREATED {
        return Err(format!("POST /v1/resources answered {status}: {body}").into());
    }
    let id = body["id"].as_str().ok_or("POST /v1/resources answered without an id")?;
    Ok(id.parse()?)
}

/// A `least_booked` pool of `members` made by the admin (`POST /v1/pools`); returns its id.
pub async fn create_pool(
    http: &reqwest::Client,
    server: &Server,
    name: &str,
    members: &[Uuid],
) -> Result<Uuid, BoxError> {
    let body = json!({"name": name, "resource_ids": members, "strategy": "least_booked"});
    let resp = http.post(server.url("/v1/pools")).header("x-principal", "admin").json(&body).send().await?;
    let status = resp.status();
    let body: serde_json::Value = resp.json().await?;
    if status != reqwest::StatusCode::CREATED {
        return Err(format!("POST /v1/pools answered {status}: {body}").into());
    }
    let id = body["id"].as_str().ok_or("POST /v1/pools answered without an id")?;
    Ok(id.parse()?)
}
