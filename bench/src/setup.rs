//! The throwaway database and the in-process dev server that every measurement runs
//! against, and the few HTTP calls the measurements share.

use crate::stats::Outcome;
use serde_json::json;
use shared::AppState;
use shared::config::{Config, Defaults};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls};
use uuid::Uuid;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

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

/// `admin_url` pointed at another database, keeping its host, credentials and query.
fn url_for(admin_url: &str, database: &str) -> String {
    let (base, query) = admin_url.split_once('?').map_or((admin_url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..].find('/').map_or(base.len(), |i| scheme_end + i);
    let mut url = format!("{}/{}", &base[..path_start], database);
    if let Some(q) = query {
        url.push('?');
        url.push_str(q);
    }
    url
}

/// A database of the bench's own, so that runs never see each other's rows or a
/// developer's data, and so that the numbers start from empty tables every time.
pub struct BenchDatabase {
    admin_url: String,
    pub name: String,
    pub url: String,
}

impl BenchDatabase {
    /// Creates the (empty) database; migrating it is the caller's first step, inside
    /// the guarded part of the run, so that a failed migration still drops it.
    pub async fn create(admin_url: &str) -> Result<Self, BoxError> {
        let name = format!("rsv_bench_{}", Uuid::new_v4().simple());
        let admin = connect(admin_url).await?;
        admin.batch_execute(&format!("CREATE DATABASE {name}")).await?;
        Ok(Self { admin_url: admin_url.into(), url: url_for(admin_url, &name), name })
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
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    pub async fn start(database_url: &str, pool_size: usize) -> Result<Self, BoxError> {
        let url = database_url.to_string();
        // Only the URL is given: every other setting is the dev server's default, the
        // configuration a developer runs and the acceptance tests exercise.
        let mut config = Config::from_lookup(Defaults::DevServer, move |k| (k == "DATABASE_URL").then(|| url.clone()))?;
        config.db_pool_size = pool_size;
        let state = AppState::new(shared::db::pool(&config)?, config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let task = tokio::spawn(dev_server::serve(listener, state));
        Ok(Self { base, task })
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
    let resp = http.execute(request).await.map_err(|e| format!("request failed: {e}"))?;
    let status = resp.status().as_u16();
    resp.bytes().await.map_err(|e| format!("reading the answer failed: {e}"))?;
    Ok(Outcome::Status(status))
}

/// A capacity-1 resource made by the admin; returns its id.
pub async fn create_resource(http: &reqwest::Client, server: &Server, name: &str) -> Result<Uuid, BoxError> {
    let resp = http
        .post(server.url("/v1/resources"))
        .header("x-principal", "admin")
        .json(&json!({"name": name, "capacity": 1}))
        .send()
        .await?;
    let status = resp.status();
    let body: serde_json::Value = resp.json().await?;
    if status != reqwest::StatusCode::CREATED {
        return Err(format!("POST /v1/resources answered {status}: {body}").into());
    }
    let id = body["id"].as_str().ok_or("POST /v1/resources answered without an id")?;
    Ok(id.parse()?)
}

#[cfg(test)]
mod tests {
    use super::url_for;

    #[test]
    fn url_for_swaps_only_the_database() {
        assert_eq!(url_for("postgres://u@h:5432/postgres", "x"), "postgres://u@h:5432/x");
        assert_eq!(url_for("postgres://u@h/postgres?sslmode=disable", "x"), "postgres://u@h/x?sslmode=disable");
        assert_eq!(url_for("postgres://u@h", "x"), "postgres://u@h/x");
    }
}
