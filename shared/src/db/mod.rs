//! The pool, the migrations, and one module of named SQL per table or mechanism.
//!
//! Every query names its columns. Functions take any [`GenericClient`] (a pooled
//! client or a transaction), so callers decide the transaction boundaries.

/// A module's named statements, each under its full path (`shared::db::hold::HOLD`),
/// as the module's `STATEMENTS`: what [`STATEMENTS`] gathers.
macro_rules! statements {
    ($($name:ident),+ $(,)?) => {
        /// This module's named statements, gathered into [`super::STATEMENTS`].
        pub const STATEMENTS: &[(&str, &str)] = &[$((concat!(module_path!(), "::", stringify!($name)), $name)),+];
    };
}

/// Gathers the statements of the modules of named SQL (each declared with a plain
/// `pub mod` below, so that rustfmt formats it): a module named here is in
/// [`STATEMENTS`], and a test fails for a file of this directory that is not named here.
macro_rules! statement_modules {
    ($($module:ident),+ $(,)?) => {
        /// The modules named with their statements, for the test that reads the directory.
        #[cfg(test)]
        const MODULES: &[&str] = &[$(stringify!($module)),+];

        const PARTS: &[&[(&str, &str)]] = &[$($module::STATEMENTS),+];
    };
}

pub mod breakers;
pub mod cursor_key;
pub mod feeds;
pub mod hold;
pub mod idempotency;
pub mod intents;
pub mod lapse;
pub mod limits;
pub mod outbox;
pub mod pools;
pub mod reservation_lists;
pub mod reservations;
pub mod resources;
pub mod seat_polls;
pub mod series;
pub mod upstream_views;
pub mod waitlist;
pub mod webhooks;

statement_modules! {
    breakers,
    cursor_key,
    feeds,
    hold,
    idempotency,
    intents,
    lapse,
    limits,
    outbox,
    pools,
    reservation_lists,
    reservations,
    resources,
    seat_polls,
    series,
    upstream_views,
    waitlist,
    webhooks,
}

pub mod run;

pub use run::{GenericClient, Statements};

/// Every named statement, for the test that prepares each against the migrated schema
/// (a typo or a dropped column then fails a test, not a request): the `STATEMENTS` of
/// every module, as `(full path, SQL)`.
pub const STATEMENTS: &[(&str, &str)] = &STATEMENT_ARRAY;

const STATEMENT_COUNT: usize = {
    let (mut n, mut i) = (0, 0);
    while i < PARTS.len() {
        n += PARTS[i].len();
        i += 1;
    }
    n
};

const STATEMENT_ARRAY: [(&str, &str); STATEMENT_COUNT] = {
    let mut out = [("", ""); STATEMENT_COUNT];
    let (mut n, mut i) = (0, 0);
    while i < PARTS.len() {
        let mut j = 0;
        while j < PARTS[i].len() {
            out[n] = PARTS[i][j];
            n += 1;
            j += 1;
        }
        i += 1;
    }
    out
};

use crate::config::{Config, ConfigError};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::str::FromStr;
use std::sync::Arc;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

mod embedded {
    refinery::embed_migrations!("../migrations");
}

/// Every SQL function and trigger, one file each under sql/functions with its current
/// definition (`CREATE OR REPLACE`), applied by [`migrate`] after the migrations every
/// time it runs. Any order works (sql/README.md says why). A unit test fails when a file
/// is missing here.
const FUNCTIONS: &[(&str, &str)] = &[
    ("idempotency_claim", include_str!("../../../sql/functions/idempotency_claim.sql")),
    ("outbox_claim_due", include_str!("../../../sql/functions/outbox_claim_due.sql")),
    ("principal_holds", include_str!("../../../sql/functions/principal_holds.sql")),
    ("reservation_booking_lapse", include_str!("../../../sql/functions/reservation_booking_lapse.sql")),
    ("reservation_claim_lapsed", include_str!("../../../sql/functions/reservation_claim_lapsed.sql")),
    ("reservation_event", include_str!("../../../sql/functions/reservation_event.sql")),
    ("reservation_expire_lapsed", include_str!("../../../sql/functions/reservation_expire_lapsed.sql")),
    ("reservation_hold", include_str!("../../../sql/functions/reservation_hold.sql")),
    ("reservation_hold_items", include_str!("../../../sql/functions/reservation_hold_items.sql")),
    ("reservation_insert_if_fits", include_str!("../../../sql/functions/reservation_insert_if_fits.sql")),
    ("reservation_is_item", include_str!("../../../sql/functions/reservation_is_item.sql")),
    ("reservation_items", include_str!("../../../sql/functions/reservation_items.sql")),
    ("reservation_load", include_str!("../../../sql/functions/reservation_load.sql")),
    ("reservation_move_if_fits", include_str!("../../../sql/functions/reservation_move_if_fits.sql")),
    ("reservation_row_valid", include_str!("../../../sql/functions/reservation_row_valid.sql")),
    ("reservation_series_field", include_str!("../../../sql/functions/reservation_series_field.sql")),
    ("reservation_snapshot", include_str!("../../../sql/functions/reservation_snapshot.sql")),
    ("reservations_set_buffered", include_str!("../../../sql/functions/reservations_set_buffered.sql")),
    ("resources_rules_version", include_str!("../../../sql/functions/resources_rules_version.sql")),
    ("uuidv7", include_str!("../../../sql/functions/uuidv7.sql")),
];

/// Failures at the database boundary.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// No connection could be had or it broke: the caller may retry later.
    #[error("the database is unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The statement gave way to another one: a lock or statement timeout, a deadlock,
    /// a serialization failure. Nothing was changed, and the same request may succeed
    /// when tried again.
    #[error("the database is busy")]
    Busy(#[source] tokio_postgres::Error),
    #[error("database query failed")]
    Query(#[source] tokio_postgres::Error),
    #[error("a stored value is not one this code knows: {0}")]
    Corrupt(String),
}

impl DbError {
    /// The SQLSTATE of a server-side error, such as `23P01` for an exclusion violation.
    pub fn sql_state(&self) -> Option<&tokio_postgres::error::SqlState> {
        match self {
            DbError::Query(e) | DbError::Busy(e) => e.code(),
            _ => None,
        }
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        use tokio_postgres::error::SqlState;
        // A server that cannot write, or is going away: a standby not yet promoted, a
        // primary made read-only, a shutdown, a crash, a recovery. During a failover
        // the connections made before it may all lead there, so none of them is handed
        // out again ([`pool`]'s check).
        let not_writable = e.code().is_some_and(|code| {
            *code == SqlState::READ_ONLY_SQL_TRANSACTION
                || *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
        });
        if not_writable {
            write_off_connections();
        }
        let unavailable = not_writable
            || e.is_closed()
            || match e.code() {
                // Class 08 (connection exception), too many connections.
                Some(code) => code.code().starts_with("08") || *code == SqlState::TOO_MANY_CONNECTIONS,
                // No SQLSTATE at all means the error came from the socket, not the server
                // (or from the read-write check of a new connection).
                None => e.as_db_error().is_none(),
            };
        let busy = e.code().is_some_and(|code| {
            *code == SqlState::LOCK_NOT_AVAILABLE
                || *code == SqlState::QUERY_CANCELED
                || *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::T_R_SERIALIZATION_FAILURE
        });
        if unavailable {
            DbError::Unavailable(Box::new(e))
        } else if busy {
            DbError::Busy(e)
        } else {
            DbError::Query(e)
        }
    }
}

impl From<crate::domain::UnknownValue> for DbError {
    fn from(e: crate::domain::UnknownValue) -> Self {
        DbError::Corrupt(e.to_string())
    }
}

impl From<deadpool_postgres::PoolError> for DbError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match e {
            deadpool_postgres::PoolError::Backend(e) => e.into(),
            other => DbError::Unavailable(Box::new(other)),
        }
    }
}

/// The connection settings, with per-session guards that keep a frozen or dying
/// function from holding row locks: statements and idle transactions are cut off.
pub fn pg_config(config: &Config) -> Result<tokio_postgres::Config, ConfigError> {
    pg_config_of(config, "DATABASE_URL", config.database_url.expose())
}

/// [`pg_config`] for another URL of the same settings (`name` is its variable).
fn pg_config_of(config: &Config, name: &'static str, url: &str) -> Result<tokio_postgres::Config, ConfigError> {
    let mut pg = tokio_postgres::Config::from_str(url).map_err(|source| ConfigError::DatabaseUrl { name, source })?;
    let ms = config.db_statement_timeout.as_millis();
    pg.options(format!(
        "-c statement_timeout={ms} -c lock_timeout={ms} -c idle_in_transaction_session_timeout={} -c TimeZone=UTC",
        ms * 2
    ));
    if pg.get_application_name().is_none() {
        pg.application_name("reservations");
    }
    // Every connection must be able to write: a standby in recovery or a server made
    // read-only is passed over for the URL's next host, or refused (503), whatever the
    // URL says (the service writes on every path that matters).
    pg.target_session_attrs(tokio_postgres::config::TargetSessionAttrs::ReadWrite);
    // A peer that vanished without closing (a partition, a dead host) is found within
    // about 4 s: an idle connection by keepalives (2 s idle, then 2 probes a second
    // apart), one with unacknowledged data by the TCP user timeout. The URL's own
    // settings win.
    pg.keepalives(true);
    if pg.get_keepalives_idle() == std::time::Duration::from_secs(2 * 60 * 60) {
        pg.keepalives_idle(std::time::Duration::from_secs(2));
    }
    if pg.get_keepalives_interval().is_none() {
        pg.keepalives_interval(std::time::Duration::from_secs(1));
    }
    if pg.get_keepalives_retries().is_none() {
        pg.keepalives_retries(2);
    }
    if pg.get_tcp_user_timeout().is_none() {
        pg.tcp_user_timeout(std::time::Duration::from_secs(4));
    }
    // Per address: a multi-host URL tries the next host after it. The whole connection
    // (with TLS, authentication and the read-write check) is bounded by the pool.
    if pg.get_connect_timeout().is_none() {
        pg.connect_timeout(CONNECT_TIMEOUT);
    }
    // TLS only where asked for: `prefer` (the default) would try it against a local
    // server's self-signed certificate and fail verification instead of falling back.
    if pg.get_ssl_mode() != SslMode::Require {
        pg.ssl_mode(SslMode::Disable);
    }
    Ok(pg)
}

/// The TLS connector of every connection. TLS is on when `DATABASE_URL` says
/// `sslmode=require`, and it is then verified the way libpq's `verify-full` is: the
/// chain against the public roots (RDS Proxy presents an ACM certificate) and the
/// certificates in `DB_CA_FILE` (the RDS CA bundle, for an RDS instance directly), and
/// the host name against the certificate. An unverified encrypted connection is not
/// offered: it would only look safe.
pub fn tls(config: &Config) -> Result<MakeRustlsConnect, ConfigError> {
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    if let Some(path) = &config.db_ca_file {
        let bad = |reason: String| ConfigError::DatabaseCa { path: path.clone(), reason };
        let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
        let certs =
            CertificateDer::pem_slice_iter(&pem).collect::<Result<Vec<_>, _>>().map_err(|e| bad(e.to_string()))?;
        let (added, _ignored) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(bad("it holds no parsable certificate".into()));
        }
    }
    // The provider is named rather than taken from the process default, so that no
    // dependency's crypto features can change which one the database connection uses.
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(tls))
}

/// How long connecting to one address may take (`connect_timeout`).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long the check of a pooled connection before its use may take: an empty query
/// answers in a round trip, so one that takes longer leads to a peer that is gone or
/// stalled, and the connection is dropped rather than waited for.
const CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The last time this process met a server that could not write or was going away
/// ([`DbError`]'s conversion records it). Connections made before it are not handed
/// out again: after a failover they may all lead to the old primary or to a standby.
/// The process's, as every pool of a process reaches the same database.
static WRITTEN_OFF_BEFORE: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

fn write_off_connections() {
    *WRITTEN_OFF_BEFORE.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
}

fn written_off(created: std::time::Instant) -> bool {
    WRITTEN_OFF_BEFORE.lock().unwrap_or_else(|e| e.into_inner()).is_some_and(|at| created <= at)
}

/// A pool that connects lazily: building it does no I/O, so cold start stays cheap.
///
/// A connection is checked before it is handed out ([`check_before_use`]); one that
/// fails the check is dropped and the next one (or a new one) is tried. Waiting for a
/// connection and making one are bounded (5 s each); a request's whole time is bounded
/// by `DB_REQUEST_TIMEOUT_MS` ([`crate::http::respond`]).
///
/// It also sets how this process sends statements (`DB_STATEMENTS`, [`run::set_mode`]).
pub fn pool(config: &Config) -> Result<Pool, ConfigError> {
    run::set_mode(config.db_statements);
    // The manager's own recycling only looks at whether the socket is known to be
    // closed: the round trip is the hook's, with its time bound.
    let manager = Manager::from_config(
        pg_config(config)?,
        tls(config)?,
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    Ok(Pool::builder(manager)
        .max_size(config.db_pool_size)
        .wait_timeout(Some(std::time::Duration::from_secs(5)))
        .create_timeout(Some(std::time::Duration::from_secs(5)))
        .pre_recycle(deadpool_postgres::Hook::async_fn(|client, metrics| Box::pin(check_before_use(client, metrics))))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .build()
        .expect("a pool with a runtime and timeouts always builds"))
}

/// The check of a pooled connection before it is handed out again.
///
/// - A connection made before the process last met a server that could not write or
///   was going away is dropped unasked: after a failover it may lead to the old
///   primary or to a standby.
/// - The others get an empty query (one round trip with no parse or plan), which must
///   answer within [`CHECK_TIMEOUT`]. Checking only whether the socket is known to be
///   closed handed out connections whose backend had been terminated but whose close
///   had not arrived yet: the request after a failover or a killed backend then failed
///   with 503 where it could have run. A check that gets no answer in time means a peer
///   that is gone without closing (a partition, a dead host, a stalled proxy), and
///   every connection made before it is then written off, so that the requests after
///   it do not each wait on one more of them.
async fn check_before_use(
    client: &mut deadpool_postgres::ClientWrapper,
    metrics: &deadpool_postgres::Metrics,
) -> Result<(), deadpool_postgres::HookError> {
    use deadpool_postgres::HookError;
    if written_off(metrics.created) {
        return Err(HookError::message("made before the server was last found unable to write"));
    }
    match tokio::time::timeout(CHECK_TIMEOUT, client.simple_query("")).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => {
            // The conversion records a server that cannot write or is going away.
            let reason = DbError::from(e).to_string();
            Err(HookError::message(reason))
        }
        Err(_) => {
            write_off_connections();
            Err(HookError::message("the check got no answer in time"))
        }
    }
}

/// The key of the session-level advisory lock [`migrate`] holds: the only advisory
/// lock of the service, so the one thing that needs a direct connection rather than a
/// transaction-mode pooler.
pub const MIGRATION_LOCK: i64 = 0x7265_7365_7276; // "reserv"

/// Applies the embedded migrations, then every function of [`FUNCTIONS`] in one
/// transaction, so that a redeploy applies a changed function. An advisory lock makes
/// concurrent starters (several dev servers, parallel test processes, a deploy hook)
/// take turns instead of racing. Returns how many migrations were applied.
pub async fn migrate(client: &mut tokio_postgres::Client) -> Result<usize, MigrateError> {
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK]).await?;
    let outcome = migrate_holding_the_lock(client).await;
    client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]).await?;
    outcome
}

async fn migrate_holding_the_lock(client: &mut tokio_postgres::Client) -> Result<usize, MigrateError> {
    let applied = embedded::migrations::runner().run_async(client).await?.applied_migrations().len();
    let tx = client.transaction().await?;
    // SQL functions may call each other: their bodies are checked when first planned,
    // not here, so the files apply in any order (as pg_dump's restores do).
    tx.batch_execute("SET LOCAL check_function_bodies = off").await?;
    for (file, sql) in FUNCTIONS {
        tx.batch_execute(sql).await.map_err(|source| MigrateError::Function { file, source })?;
    }
    tx.commit().await?;
    Ok(applied)
}

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("the database settings are invalid")]
    Config(#[from] ConfigError),
    #[error("could not talk to the database")]
    Database(#[from] tokio_postgres::Error),
    #[error("a migration failed")]
    Migration(#[from] refinery::Error),
    #[error("sql/functions/{file}.sql failed")]
    Function { file: &'static str, source: tokio_postgres::Error },
}

impl MigrateError {
    /// Why it failed, in one line a person can act on: the server's own message (a
    /// wrong password, a failing statement), the socket's error (connection refused),
    /// or the migration or function file at fault. Never the connection string.
    pub fn reason(&self) -> String {
        match self {
            MigrateError::Config(e) => e.to_string(),
            MigrateError::Database(e) => postgres_reason(e),
            MigrateError::Migration(e) => match e.kind() {
                refinery::error::Kind::Connection(what, source) => match source.downcast_ref::<tokio_postgres::Error>()
                {
                    Some(pg) => format!("{what}: {}", postgres_reason(pg)),
                    None => format!("{what}: {source}"),
                },
                _ => e.to_string(),
            },
            MigrateError::Function { file, source } => format!("sql/functions/{file}.sql: {}", postgres_reason(source)),
        }
    }

    /// The database holds a migration this code does not have: newer code migrated it
    /// (this code is a deploy being rolled back). Nothing was applied.
    pub fn database_is_ahead(&self) -> Option<String> {
        match self {
            MigrateError::Migration(e) => match e.kind() {
                refinery::error::Kind::MissingVersion(migration) => Some(migration.to_string()),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Why a connection or statement failed, in a few words: the server's own message (a
/// wrong password, a missing database), else the socket's error (refused, timed out, an
/// unknown host name).
pub fn postgres_reason(e: &tokio_postgres::Error) -> String {
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

/// Connects once, outside any pool, and migrates: for the dev server, tests, the
/// migration command and the migration function of a deploy. It connects to
/// [`Config::migration_url`]: a direct connection where one is given, because the
/// advisory lock of [`migrate`] is a session's, which a transaction-mode pooler does not
/// keep.
pub async fn connect_and_migrate(config: &Config) -> Result<usize, MigrateError> {
    let name = match config.database_migration_url {
        Some(_) => "DATABASE_MIGRATION_URL",
        None => "DATABASE_URL",
    };
    let pg = pg_config_of(config, name, config.migration_url().expose())?;
    let (mut client, connection) = pg.connect(tls(config)?).await?;
    let task = tokio::spawn(connection);
    let applied = migrate(&mut client).await;
    drop(client);
    let _ = task.await;
    applied
}

/// A request that did not finish within its time ([`crate::config::Config::request_timeout`]):
/// its database work waited on a peer that is gone or stalled.
#[derive(Debug, thiserror::Error)]
#[error("the request did not finish within {0:?}")]
pub struct TimedOut(pub std::time::Duration);

/// A server that answers but cannot write: a standby in recovery, or a server made
/// read-only.
#[derive(Debug, thiserror::Error)]
#[error("the database server cannot write (in recovery or read-only)")]
pub struct NotWritable;

/// Does PostgreSQL answer, and can it write? For the health route: a server that
/// answers but cannot write is unavailable to this service.
pub async fn ping(pool: &Pool) -> Result<(), DbError> {
    let client = pool.get().await?;
    let rows =
        client.simple_query("SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::boolean").await?;
    let writable =
        rows.iter().any(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(r) if r.get(0) == Some("f")));
    if !writable {
        write_off_connections();
        return Err(DbError::Unavailable(Box::new(NotWritable)));
    }
    Ok(())
}

/// A fingerprint of the embedded migrations and functions, so that a test template
/// database built from another schema or another function's definition is never reused.
pub fn schema_fingerprint() -> u64 {
    const FNV_PRIME: u64 = 0x0100_0000_01b3;
    let migrations = embedded::migrations::runner().get_migrations().iter().map(|m| m.checksum()).collect::<Vec<_>>();
    let functions = FUNCTIONS.iter().flat_map(|(file, sql)| file.bytes().chain(sql.bytes())).map(u64::from);
    migrations.into_iter().chain(functions).fold(0xcbf2_9ce4_8422_2325u64, |acc, v| (acc ^ v).wrapping_mul(FNV_PRIME))
}

#[cfg(test)]
mod migration_tests {
    #[test]
    fn every_file_of_sql_functions_is_applied_by_the_migration_step() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../sql/functions");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        files.sort();
        let listed: Vec<String> = super::FUNCTIONS.iter().map(|(file, _)| format!("{file}.sql")).collect();
        assert_eq!(files, listed, "db::FUNCTIONS must list every file of sql/functions, in name order");
        for (file, sql) in super::FUNCTIONS {
            let on_disk = std::fs::read_to_string(format!("{dir}/{file}.sql")).unwrap();
            assert_eq!(*sql, on_disk, "{file}: db::FUNCTIONS embeds another file");
        }
    }
}

#[cfg(test)]
mod connection_tests {
    use crate::config::{Config, Defaults};
    use std::time::Duration;
    use tokio_postgres::config::{Host, TargetSessionAttrs};

    fn pg_config_of(url: &str) -> tokio_postgres::Config {
        let url = url.to_string();
        let config =
            Config::from_lookup(Defaults::Lambda, move |k| (k == "DATABASE_URL").then(|| url.clone())).unwrap();
        super::pg_config(&config).unwrap()
    }

    #[test]
    fn every_connection_must_write_and_finds_a_silent_peer_within_seconds() {
        let pg = pg_config_of("postgres://u@db.example.com/reservations");
        assert_eq!(pg.get_target_session_attrs(), TargetSessionAttrs::ReadWrite);
        assert!(pg.get_keepalives());
        assert_eq!(pg.get_keepalives_idle(), Duration::from_secs(2));
        assert_eq!(pg.get_keepalives_interval(), Some(Duration::from_secs(1)));
        assert_eq!(pg.get_keepalives_retries(), Some(2));
        assert_eq!(pg.get_tcp_user_timeout(), Some(&Duration::from_secs(4)));
        assert_eq!(pg.get_connect_timeout(), Some(&Duration::from_secs(2)));
        // The host stays a name, resolved at every connection: no address is kept.
        assert_eq!(pg.get_hosts(), &[Host::Tcp("db.example.com".into())]);
        assert!(pg.get_hostaddrs().is_empty());
    }

    #[test]
    fn the_urls_own_connection_settings_win_but_a_connection_must_still_write() {
        let pg = pg_config_of(
            "postgres://u@a,b/r?keepalives_idle=7&connect_timeout=9&tcp_user_timeout=11&target_session_attrs=any",
        );
        assert_eq!(pg.get_keepalives_idle(), Duration::from_secs(7));
        assert_eq!(pg.get_connect_timeout(), Some(&Duration::from_secs(9)));
        assert_eq!(pg.get_tcp_user_timeout(), Some(&Duration::from_secs(11)));
        assert_eq!(pg.get_target_session_attrs(), TargetSessionAttrs::ReadWrite);
        assert_eq!(pg.get_hosts().len(), 2);
    }
}

#[cfg(test)]
mod tests {
    use super::{MODULES, STATEMENTS};

    /// Every file of `src/db` is a module declared with `statement_modules!`, and every
    /// `pub const X: &str` in it (a named statement) is in [`STATEMENTS`].
    #[test]
    fn every_module_and_every_named_statement_is_in_the_registry() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/db");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let module = path.file_stem().and_then(|s| s.to_str()).unwrap().to_string();
            if module == "mod" || module == "run" {
                continue;
            }
            assert!(MODULES.contains(&module.as_str()), "db/{module} is not named in statement_modules!");
            seen += 1;
            let source = std::fs::read_to_string(&path).unwrap();
            for line in source.lines().filter(|l| l.starts_with("pub const ") && l.contains(": &str")) {
                let name = line["pub const ".len()..].split(':').next().unwrap();
                let listed = format!("shared::db::{module}::{name}");
                assert!(STATEMENTS.iter().any(|(n, _)| *n == listed), "{listed} is not in its module's statements!");
            }
        }
        assert_eq!(seen, MODULES.len());
    }

    #[test]
    fn every_statement_is_registered_once() {
        let mut names: Vec<&str> = STATEMENTS.iter().map(|(n, _)| *n).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), STATEMENTS.len());
        assert!(STATEMENTS.iter().all(|(_, sql)| !sql.trim().is_empty()));
    }
}
