//! Start-up: the dev server's own settings, and every way starting can fail as one
//! line a person can act on. The line names the variable, the address or the database
//! host; it never shows `DATABASE_URL` itself, which may carry a password.

use crate::Limits;
use shared::config::{Config, ConfigError};
use shared::db::{self, MigrateError};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::net::TcpListener;

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The shared configuration (`DATABASE_URL`, `HOLD_TTL_SECONDS`, ...).
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{name} must be {expected} (got {value:?})")]
    Setting { name: &'static str, value: String, expected: &'static str },
    #[error("cannot listen on {addr}: {reason}")]
    Listen { addr: SocketAddr, reason: String },
    #[error("cannot reach the database at {at}: {reason}")]
    Database { at: String, reason: String },
    #[error("cannot migrate the database at {at}: {reason}")]
    Migration { at: String, reason: String },
}

/// The settings of the dev server alone (the shared ones are in [`Config`]).
#[derive(Debug, Clone)]
pub struct Settings {
    /// `PORT` on 127.0.0.1; 0 takes a free one.
    pub port: u16,
    /// `SWEEP_INTERVAL_SECONDS`: how often the scheduled jobs run.
    pub sweep_interval: Duration,
    /// `DEV_MAX_CONNECTIONS`, `DEV_HEADER_TIMEOUT_MS`, `DEV_BODY_TIMEOUT_MS`.
    pub limits: Limits,
}

impl Settings {
    pub fn from_env() -> Result<Settings, StartupError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The parser behind [`Settings::from_env`], over any lookup. An empty value counts
    /// as unset.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Settings, StartupError> {
        let number = |name: &'static str, default: u64, min: u64, max: u64, expected: &'static str| match get(name)
            .filter(|v| !v.trim().is_empty())
        {
            None => Ok(default),
            Some(value) => match value.trim().parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(n),
                _ => Err(StartupError::Setting { name, value, expected }),
            },
        };
        let defaults = Limits::default();
        let millis = |d: Duration| d.as_millis() as u64;
        Ok(Settings {
            port: number("PORT", 3000, 0, u16::MAX.into(), "a port number")? as u16,
            sweep_interval: Duration::from_secs(number(
                "SWEEP_INTERVAL_SECONDS",
                15,
                1,
                86_400,
                "a whole number of seconds from 1 to 86400",
            )?),
            limits: Limits {
                max_connections: number(
                    "DEV_MAX_CONNECTIONS",
                    defaults.max_connections as u64,
                    1,
                    1_000_000,
                    "a number of connections from 1 to 1000000",
                )? as usize,
                header_read_timeout: Duration::from_millis(number(
                    "DEV_HEADER_TIMEOUT_MS",
                    millis(defaults.header_read_timeout),
                    1,
                    3_600_000,
                    "a number of milliseconds from 1 to 3600000",
                )?),
                body_read_timeout: Duration::from_millis(number(
                    "DEV_BODY_TIMEOUT_MS",
                    millis(defaults.body_read_timeout),
                    1,
                    3_600_000,
                    "a number of milliseconds from 1 to 3600000",
                )?),
            },
        })
    }
}

/// Binds `port` on 127.0.0.1.
pub async fn listen(port: u16) -> Result<TcpListener, StartupError> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpListener::bind(addr).await.map_err(|e| StartupError::Listen { addr, reason: io_reason(&e) })
}

/// Connects to the database once and applies the migrations.
pub async fn migrate(config: &Config) -> Result<usize, StartupError> {
    db::connect_and_migrate(config).await.map_err(|e| {
        let at = database_address(config.database_url.expose());
        match e {
            MigrateError::Config(e) => StartupError::Config(e),
            MigrateError::Database(e) => StartupError::Database { at, reason: postgres_reason(&e) },
            MigrateError::Migration(e) => StartupError::Migration { at, reason: e.to_string() },
            MigrateError::Function { file, source } => StartupError::Migration {
                at,
                reason: format!("sql/functions/{file}.sql: {}", postgres_reason(&source)),
            },
        }
    })
}

/// `host:port` of a connection string (each host, when it names several), without the
/// user, the password or the database.
pub fn database_address(url: &str) -> String {
    let Ok(pg) = url.parse::<tokio_postgres::Config>() else {
        return "DATABASE_URL".into();
    };
    let ports = pg.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let hosts: Vec<String> = pg
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| match host {
            tokio_postgres::config::Host::Tcp(name) => format!("{name}:{}", port(i)),
            tokio_postgres::config::Host::Unix(dir) => format!("{}/.s.PGSQL.{}", dir.display(), port(i)),
        })
        .collect();
    if hosts.is_empty() { format!("localhost:{}", port(0)) } else { hosts.join(",") }
}

/// Why a connection failed, in a few words: the server's own message (a wrong
/// password, a missing database), else the socket's error (refused, timed out, an
/// unknown host name).
fn postgres_reason(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return db.message().to_string();
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return io_reason(io);
        }
        source = cause.source();
    }
    e.to_string()
}

/// An I/O error as words: "connection refused", not "Os { code: 111, ... }" nor
/// "Connection refused (os error 111)".
pub fn io_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(i) => &text[..i],
        None => &text,
    };
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        // "Connection refused" reads as "connection refused"; "TLS ..." stays as it is.
        (Some(first), Some(second)) if first.is_uppercase() && second.is_lowercase() => {
            first.to_lowercase().chain(text[first.len_utf8()..].chars()).collect()
        }
        _ => text.to_string(),
    }
}
