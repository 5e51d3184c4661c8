//! Start-up: the dev server's own settings, and every way starting can fail as one
//! line a person can act on. The line names the variable, the address or the database
//! host; it never shows `DATABASE_URL` itself, which may carry a password.

use crate::Limits;
use shared::config::{Config, ConfigError};
use shared::db::{self, MigrateError, io_reason};
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

/// Connects to the database once (`DATABASE_MIGRATION_URL` when it is set, else
/// `DATABASE_URL`) and applies the migrations.
pub async fn migrate(config: &Config) -> Result<usize, StartupError> {
    db::connect_and_migrate(&config.database).await.map_err(|e| {
        let at = config.database.migration_address();
        match e {
            MigrateError::Settings(e) => StartupError::Config(e.into()),
            MigrateError::Database(_) => StartupError::Database { at, reason: e.reason() },
            MigrateError::Migration(_) | MigrateError::Function { .. } => {
                StartupError::Migration { at, reason: e.reason() }
            }
        }
    })
}
