//! Configuration, read once from the environment at cold start.
//!
//! The names are the ones in docs/operations.md's table; clients and tests rely on them.

pub use crate::secret::Secret;
use std::env;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0} is required")]
    Missing(&'static str),
    #[error("{name} has an invalid value {value:?}: {reason}")]
    Invalid { name: &'static str, value: String, reason: &'static str },
    #[error(transparent)]
    Database(#[from] crate::db::SettingsError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// The principal is the `sub` claim put in the request context by API Gateway.
    Jwt,
    /// The principal is the `X-Principal` header (dev server and tests).
    Header,
}

/// Where the process runs decides the defaults that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defaults {
    Lambda,
    DevServer,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// The database's own settings: its URLs, pool, statement timeout, how statements
    /// are sent, its CA file.
    pub database: crate::db::Settings,
    /// `DB_REQUEST_TIMEOUT_MS`: the longest a request may take, its waits for a
    /// connection and its statements included; past it the answer is 503. Unset: the
    /// statement timeout ([`Config::request_timeout`]).
    pub db_request_timeout: Option<Duration>,
    pub auth_mode: AuthMode,
    pub admin_principals: Vec<String>,
    pub hold_ttl_seconds: i32,
    pub offer_ttl_seconds: i32,
    pub max_reservation: chrono::Duration,
    pub booking_horizon: chrono::Duration,
    /// How far in the past a start may lie (clock skew between client and server).
    pub start_grace: chrono::Duration,
    /// `MAX_ACTIVE_HOLDS_PER_PRINCIPAL`: the most active holds one principal may have
    /// across the service (admins are not limited); 0: no limit, and no principal lock.
    pub max_active_holds_per_principal: i32,
    pub max_availability_window: chrono::Duration,
    pub idempotency_wait: Duration,
    pub idempotency_retention: chrono::Duration,
    /// How many retries of in-progress keys may wait for their originals at once in one
    /// process; past that a retry is told to come back (409 with `Retry-After`). Waiting
    /// holds no database connection, so this bounds memory and tasks, not the pool.
    pub idempotency_max_waiters: usize,
    /// How long a published outbox row is kept before the sweeper deletes it.
    pub outbox_retention: chrono::Duration,
    pub upstream: UpstreamConfig,
    /// `CORS_ALLOWED_ORIGINS`: the browser origins (`https://app.example.com`) the dev
    /// server answers CORS for; none by default. In AWS the HTTP API's own CORS
    /// configuration does this, from the template's `CorsAllowedOrigins`.
    pub cors_allowed_origins: Vec<String>,
    /// `PUBLIC_CALENDAR=true`: the availability and slots reads answer without a
    /// principal (they show no owners and no metadata). Off by default; in AWS the
    /// template's `PublicCalendar` also takes the JWT authorizer off those routes.
    pub public_calendar: bool,
}

/// The system of record for `authority: upstream` resources (`upstream::SystemOfRecord`).
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    pub base_url: Option<String>,
    pub token: Option<Secret>,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// How long a read of the upstream's view is served from the cache.
    pub cache_ttl: chrono::Duration,
    /// The oldest view an availability answer may use when no fresh one can be had.
    pub max_staleness: chrono::Duration,
    /// Consecutive failures (5xx, timeout, reset) that open the breaker.
    pub breaker_failures: i32,
    /// How long the breaker stays open before one probe.
    pub breaker_open: chrono::Duration,
    /// A worker's lease on an intent; longer than the worker's whole upstream call, so
    /// that when it lapses the call has surely ended.
    pub intent_lease: chrono::Duration,
    /// How long a due `REQUESTED` intent may sit untouched before the sweeper queues a
    /// new message for it (its message was lost, or dead-lettered after its retries).
    pub intent_requeue_after: chrono::Duration,
    /// The longest a seat with waiters goes unread while it stays taken: the poll's
    /// backoff doubles from one second up to this.
    pub wait_poll_max: chrono::Duration,
}

impl Config {
    /// The longest a request may take: `DB_REQUEST_TIMEOUT_MS`, else the statement
    /// timeout, so that a statement the server would let run is not cut short by
    /// default, while one that waits on a peer that is gone (a failover, a partition) is.
    pub fn request_timeout(&self) -> Duration {
        self.db_request_timeout.unwrap_or(self.database.statement_timeout)
    }

    /// The booking limits every range is judged by.
    pub fn limits(&self) -> crate::domain::Limits {
        crate::domain::Limits {
            max_duration: self.max_reservation,
            horizon: self.booking_horizon,
            start_grace: self.start_grace,
            max_active_holds: self.max_active_holds_per_principal,
        }
    }

    pub fn from_env(mode: Defaults) -> Result<Self, ConfigError> {
        Self::from_lookup(mode, |name| env::var(name).ok())
    }

    /// The parser behind [`Config::from_env`], over any lookup, so tests need not touch
    /// the process environment.
    pub fn from_lookup(mode: Defaults, get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let num = |name: &'static str, default: i64, min: i64, max: i64| -> Result<i64, ConfigError> {
            match get(name) {
                None => Ok(default),
                Some(v) => match v.trim().parse::<i64>() {
                    Ok(n) if (min..=max).contains(&n) => Ok(n),
                    _ => Err(ConfigError::Invalid { name, value: v, reason: "not an integer in range" }),
                },
            }
        };
        // No silent default: the dev server's run script makes a throwaway cluster and
        // sets this, and a Lambda reads it from its environment.
        let database_url = get("DATABASE_URL").filter(|u| !u.is_empty()).ok_or(ConfigError::Missing("DATABASE_URL"))?;
        let auth_mode = match get("AUTH_MODE").as_deref().map(str::trim) {
            None | Some("") => match mode {
                Defaults::Lambda => AuthMode::Jwt,
                Defaults::DevServer => AuthMode::Header,
            },
            Some("jwt") => AuthMode::Jwt,
            Some("header") => AuthMode::Header,
            Some(other) => {
                return Err(ConfigError::Invalid {
                    name: "AUTH_MODE",
                    value: other.into(),
                    reason: "expected jwt or header",
                });
            }
        };
        let admin_principals = get("ADMIN_PRINCIPALS")
            .unwrap_or_else(|| "admin".into())
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let cors_allowed_origins = get("CORS_ALLOWED_ORIGINS")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|origin| match is_origin(origin) {
                true => Ok(origin.to_string()),
                false => Err(ConfigError::Invalid {
                    name: "CORS_ALLOWED_ORIGINS",
                    value: origin.into(),
                    reason: "expected origins such as https://app.example.com, comma-separated",
                }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let public_calendar = match get("PUBLIC_CALENDAR").as_deref() {
            None | Some("") | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ConfigError::Invalid {
                    name: "PUBLIC_CALENDAR",
                    value: other.into(),
                    reason: "expected true or false",
                });
            }
        };
        let db_statements = match get("DB_STATEMENTS").as_deref() {
            None | Some("") | Some("unnamed") => crate::db::Statements::Unnamed,
            Some("cached") => crate::db::Statements::Cached,
            Some(other) => {
                return Err(ConfigError::Invalid {
                    name: "DB_STATEMENTS",
                    value: other.into(),
                    reason: "expected unnamed (through a pooler or direct) or cached (direct only)",
                });
            }
        };
        let pool_default = match mode {
            Defaults::Lambda => 2,
            Defaults::DevServer => 16,
        };
        Ok(Self {
            database: crate::db::Settings {
                url: Secret::from(database_url),
                migration_url: get("DATABASE_MIGRATION_URL").filter(|u| !u.is_empty()).map(Secret::from),
                pool_size: num("DB_POOL_SIZE", pool_default, 1, 1000)? as usize,
                statement_timeout: Duration::from_millis(num("DB_STATEMENT_TIMEOUT_MS", 5_000, 100, 600_000)? as u64),
                statements: db_statements,
                ca_file: get("DB_CA_FILE").filter(|v| !v.is_empty()),
            },
            db_request_timeout: match get("DB_REQUEST_TIMEOUT_MS") {
                None => None,
                Some(_) => Some(Duration::from_millis(num("DB_REQUEST_TIMEOUT_MS", 0, 100, 600_000)? as u64)),
            },
            auth_mode,
            admin_principals,
            hold_ttl_seconds: num("HOLD_TTL_SECONDS", 300, 1, i32::MAX as i64)? as i32,
            offer_ttl_seconds: num("OFFER_TTL_SECONDS", 900, 1, i32::MAX as i64)? as i32,
            max_reservation: chrono::Duration::days(num("MAX_RESERVATION_DAYS", 31, 1, 3_650)?),
            booking_horizon: chrono::Duration::days(num("BOOKING_HORIZON_DAYS", 730, 1, 36_500)?),
            start_grace: chrono::Duration::seconds(num("START_GRACE_SECONDS", 300, 0, 86_400)?),
            max_active_holds_per_principal: num("MAX_ACTIVE_HOLDS_PER_PRINCIPAL", 20, 0, 1_000_000)? as i32,
            max_availability_window: chrono::Duration::days(62),
            idempotency_wait: Duration::from_millis(num("IDEMPOTENCY_WAIT_MS", 2_000, 0, 60_000)? as u64),
            idempotency_retention: chrono::Duration::hours(num("IDEMPOTENCY_RETENTION_HOURS", 24, 24, 24 * 365)?),
            idempotency_max_waiters: num("IDEMPOTENCY_MAX_WAITERS", 64, 0, 100_000)? as usize,
            outbox_retention: chrono::Duration::hours(num("OUTBOX_RETENTION_HOURS", 24, 1, 24 * 365)?),
            upstream: UpstreamConfig {
                base_url: get("UPSTREAM_BASE_URL").filter(|v| !v.is_empty()),
                token: get("UPSTREAM_TOKEN").filter(|v| !v.is_empty()).map(Secret::from),
                connect_timeout: Duration::from_millis(num("UPSTREAM_CONNECT_TIMEOUT_MS", 2_000, 1, 60_000)? as u64),
                request_timeout: Duration::from_millis(num("UPSTREAM_TIMEOUT_MS", 5_000, 1, 60_000)? as u64),
                cache_ttl: chrono::Duration::milliseconds(num("UPSTREAM_CACHE_TTL_MS", 1_000, 0, 3_600_000)?),
                max_staleness: chrono::Duration::milliseconds(num("UPSTREAM_MAX_STALENESS_MS", 60_000, 0, 3_600_000)?),
                breaker_failures: num("BREAKER_FAILURES", 5, 1, 1_000)? as i32,
                breaker_open: chrono::Duration::milliseconds(num("BREAKER_OPEN_MS", 5_000, 1, 3_600_000)?),
                intent_lease: chrono::Duration::seconds(num("INTENT_LEASE_SECONDS", 60, 1, 3_600)?),
                intent_requeue_after: chrono::Duration::seconds(num("INTENT_REQUEUE_AFTER_SECONDS", 300, 1, 86_400)?),
                wait_poll_max: chrono::Duration::seconds(num("WAIT_POLL_MAX_SECONDS", 60, 1, 3_600)?),
            },
            cors_allowed_origins,
            public_calendar,
        })
    }

    pub fn is_admin(&self, principal: &str) -> bool {
        self.admin_principals.iter().any(|a| a == principal)
    }

    /// Whether a browser on `origin` may call the API (compared as the browser sends
    /// it: scheme, host and port, no path).
    pub fn cors_allows(&self, origin: &str) -> bool {
        self.cors_allowed_origins.iter().any(|o| o == origin)
    }
}

/// A serialized origin: `http` or `https`, `://`, a host and maybe a port; no path, no
/// wildcard (a wildcard would let every site's scripts read the answers).
fn is_origin(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("https://").or_else(|| s.strip_prefix("http://")) else {
        return false;
    };
    !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
}

/// For a binary's `main`: the value, or the error as one line on stderr (`reserve:
/// DATABASE_URL is required`) and exit status 1. A `main` that returns the `Err` itself
/// prints its Debug form instead, such as `Error: Missing("DATABASE_URL")`.
pub fn exit_on_error<T, E: std::fmt::Display>(program: &str, result: Result<T, E>) -> T {
    match result {
        Ok(value) => value,
        Err(e) => {
            eprintln!("{program}: {e}");
            std::process::exit(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_of_the_configuration_shows_no_password_and_no_token() {
        let c = Config::from_lookup(
            Defaults::Lambda,
            lookup(&[("DATABASE_URL", "postgres://app:hunter2@db:5432/r"), ("UPSTREAM_TOKEN", "tok-s3cret")]),
        )
        .unwrap();
        let printed = format!("{c:?}");
        assert!(!printed.contains("hunter2") && !printed.contains("tok-s3cret"), "{printed}");
        assert_eq!(c.database.url.expose(), "postgres://app:hunter2@db:5432/r");
    }

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn lambda_defaults_to_jwt_and_requires_a_database() {
        assert!(matches!(
            Config::from_lookup(Defaults::Lambda, lookup(&[])),
            Err(ConfigError::Missing("DATABASE_URL"))
        ));
        let c = Config::from_lookup(Defaults::Lambda, lookup(&[("DATABASE_URL", "postgres://x@h/db")])).unwrap();
        assert_eq!(c.auth_mode, AuthMode::Jwt);
        assert_eq!(c.database.pool_size, 2);
    }

    #[test]
    fn the_migration_step_connects_to_database_migration_url_when_it_is_set_and_to_database_url_otherwise() {
        let direct = "postgres://app@primary:5432/r";
        let pooled = "postgres://app@proxy:5432/r";
        let c = Config::from_lookup(Defaults::Lambda, lookup(&[("DATABASE_URL", pooled)])).unwrap();
        assert_eq!(c.database.url_for_migrations().1.expose(), pooled);
        let c =
            Config::from_lookup(Defaults::Lambda, lookup(&[("DATABASE_URL", pooled), ("DATABASE_MIGRATION_URL", "")]))
                .unwrap();
        assert_eq!(c.database.url_for_migrations().1.expose(), pooled, "empty counts as unset");
        let c = Config::from_lookup(
            Defaults::Lambda,
            lookup(&[("DATABASE_URL", pooled), ("DATABASE_MIGRATION_URL", direct)]),
        )
        .unwrap();
        assert_eq!((c.database.url.expose(), c.database.url_for_migrations().1.expose()), (pooled, direct));
    }

    #[test]
    fn dev_server_defaults_to_header_identity_and_admin() {
        let c = Config::from_lookup(Defaults::DevServer, lookup(&[("DATABASE_URL", "postgres://x@h/db")])).unwrap();
        assert_eq!(c.auth_mode, AuthMode::Header);
        assert!(c.is_admin("admin"));
        assert!(!c.is_admin("alice"));
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        let err = Config::from_lookup(
            Defaults::DevServer,
            lookup(&[("DATABASE_URL", "postgres://x@h/db"), ("HOLD_TTL_SECONDS", "0")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("HOLD_TTL_SECONDS"));
        let err = Config::from_lookup(
            Defaults::DevServer,
            lookup(&[("DATABASE_URL", "postgres://x@h/db"), ("AUTH_MODE", "magic")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("AUTH_MODE"));
    }

    #[test]
    fn cors_origins_are_a_comma_separated_list_of_origins_and_none_by_default() {
        let base = ("DATABASE_URL", "postgres://x@h/db");
        let c = Config::from_lookup(Defaults::DevServer, lookup(&[base])).unwrap();
        assert!(c.cors_allowed_origins.is_empty());
        let list = ("CORS_ALLOWED_ORIGINS", " https://app.example.com, http://localhost:5173 ,");
        let c = Config::from_lookup(Defaults::DevServer, lookup(&[base, list])).unwrap();
        assert_eq!(c.cors_allowed_origins, ["https://app.example.com", "http://localhost:5173"]);
        assert!(c.cors_allows("http://localhost:5173") && !c.cors_allows("http://localhost:5174"));
        for bad in ["*", "app.example.com", "https://app.example.com/", "https://"] {
            let err = Config::from_lookup(Defaults::DevServer, lookup(&[base, ("CORS_ALLOWED_ORIGINS", bad)]));
            assert!(err.unwrap_err().to_string().contains("CORS_ALLOWED_ORIGINS"), "{bad}");
        }
    }

    #[test]
    fn active_holds_per_principal_are_twenty_by_default_zero_turns_the_limit_off_and_bad_values_are_refused() {
        let base = ("DATABASE_URL", "postgres://x@h/db");
        let c = Config::from_lookup(Defaults::Lambda, lookup(&[base])).unwrap();
        assert_eq!((c.max_active_holds_per_principal, c.limits().max_active_holds), (20, 20));
        let c = Config::from_lookup(Defaults::DevServer, lookup(&[base, ("MAX_ACTIVE_HOLDS_PER_PRINCIPAL", "0")]));
        assert_eq!(c.unwrap().limits().max_active_holds, 0);
        let c = Config::from_lookup(Defaults::DevServer, lookup(&[base, ("MAX_ACTIVE_HOLDS_PER_PRINCIPAL", " 3 ")]));
        assert_eq!(c.unwrap().max_active_holds_per_principal, 3);
        for bad in ["-1", "twenty", "1.5"] {
            let err =
                Config::from_lookup(Defaults::DevServer, lookup(&[base, ("MAX_ACTIVE_HOLDS_PER_PRINCIPAL", bad)]));
            assert!(err.unwrap_err().to_string().contains("MAX_ACTIVE_HOLDS_PER_PRINCIPAL"), "{bad}");
        }
    }

    #[test]
    fn idempotency_keys_are_kept_at_least_a_day() {
        assert!(
            Config::from_lookup(
                Defaults::DevServer,
                lookup(&[("DATABASE_URL", "postgres://x@h/db"), ("IDEMPOTENCY_RETENTION_HOURS", "1")])
            )
            .is_err()
        );
    }
}
