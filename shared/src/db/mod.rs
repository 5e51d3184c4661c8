//! The pool, the migrations, and one module of named SQL per table.
//!
//! Every query names its columns. Functions take any [`GenericClient`] (a pooled
//! client or a transaction), so callers decide the transaction boundaries.

pub mod breakers;
pub mod cursor_key;
pub mod idempotency;
pub mod intents;
pub mod outbox;
pub mod reservations;
pub mod resources;
pub mod seat_polls;
pub mod upstream_views;
pub mod waitlist;
pub mod webhooks;

pub use deadpool_postgres::GenericClient;

/// Every named statement, for the test that prepares each against the migrated schema
/// (a typo or a dropped column then fails a test, not a request). A unit test checks
/// that no `pub const` statement of the modules above is missing here.
pub const STATEMENTS: &[(&str, &str)] = &[
    ("breakers::READ", breakers::READ),
    ("breakers::TAKE_PROBE", breakers::TAKE_PROBE),
    ("breakers::FAILURE", breakers::FAILURE),
    ("breakers::SUCCESS", breakers::SUCCESS),
    ("cursor_key::READ", cursor_key::READ),
    ("idempotency::CLAIM", idempotency::CLAIM),
    ("idempotency::READ", idempotency::READ),
    ("idempotency::COMPLETE", idempotency::COMPLETE),
    ("idempotency::STORE_FAILURE", idempotency::STORE_FAILURE),
    ("idempotency::PURGE_EXPIRED", idempotency::PURGE_EXPIRED),
    ("intents::INSERT_APPROVAL", intents::INSERT_APPROVAL),
    ("intents::INSERT", intents::INSERT),
    ("intents::CLAIM", intents::CLAIM),
    ("intents::OLDEST_UNSETTLED", intents::OLDEST_UNSETTLED),
    ("intents::WAITING", intents::WAITING),
    ("intents::TOUCH_STALE", intents::TOUCH_STALE),
    ("intents::CLAIM_LAPSED", intents::CLAIM_LAPSED),
    ("intents::INSERT_CANCEL", intents::INSERT_CANCEL),
    ("intents::UNCLAIM", intents::UNCLAIM),
    ("intents::POSTPONE", intents::POSTPONE),
    ("intents::FINISH", intents::FINISH),
    ("intents::STATE_OF", intents::STATE_OF),
    ("intents::INSERT_WAIT_APPROVAL", intents::INSERT_WAIT_APPROVAL),
    ("intents::INSERT_WAIT", intents::INSERT_WAIT),
    ("intents::START_WAIT", intents::START_WAIT),
    ("intents::REWAIT", intents::REWAIT),
    ("intents::LOCK_WAIT", intents::LOCK_WAIT),
    ("intents::END_WAIT", intents::END_WAIT),
    ("intents::END_STARTED_WAITS", intents::END_STARTED_WAITS),
    ("outbox::CLAIM_DUE", outbox::CLAIM_DUE),
    ("outbox::MARK_PUBLISHED", outbox::MARK_PUBLISHED),
    ("outbox::MARK_FAILED", outbox::MARK_FAILED),
    ("outbox::STALL", outbox::STALL),
    ("outbox::RELEASE", outbox::RELEASE),
    ("outbox::PURGE_PUBLISHED", outbox::PURGE_PUBLISHED),
    ("outbox::PENDING", outbox::PENDING),
    ("outbox::OLDEST_PENDING", outbox::OLDEST_PENDING),
    ("outbox::INSERT_INTENT_MESSAGE", outbox::INSERT_INTENT_MESSAGE),
    ("reservations::INSERT_IF_FITS", reservations::INSERT_IF_FITS),
    ("reservations::HOLD", reservations::HOLD),
    ("reservations::HOLD_KEYED", reservations::HOLD_KEYED),
    ("reservations::FROM_SNAPSHOT", reservations::FROM_SNAPSHOT),
    ("reservations::MOVE_IF_FITS", reservations::MOVE_IF_FITS),
    ("reservations::PEAK_AHEAD", reservations::PEAK_AHEAD),
    ("reservations::DETACH_SETTLED", reservations::DETACH_SETTLED),
    ("reservations::PRECHECK", reservations::PRECHECK),
    ("reservations::EXPIRE_LAPSED_OVERLAPPING", reservations::EXPIRE_LAPSED_OVERLAPPING),
    ("reservations::CLAIM_LAPSED", reservations::CLAIM_LAPSED),
    ("reservations::ANY_LAPSED", reservations::ANY_LAPSED),
    ("reservations::GET", reservations::GET),
    ("reservations::LOCK", reservations::LOCK),
    ("reservations::RESOURCE_OF", reservations::RESOURCE_OF),
    ("reservations::SET_STATUS", reservations::SET_STATUS),
    ("reservations::ACTIVE_IN_WINDOW", reservations::ACTIVE_IN_WINDOW),
    ("reservations::KEPT_NEAR", reservations::KEPT_NEAR),
    ("reservations::EXPIRE_LAPSED_KEEPING_BUFFERS", reservations::EXPIRE_LAPSED_KEEPING_BUFFERS),
    ("reservations::LIST_BY_OWNER", reservations::LIST_BY_OWNER),
    ("reservations::LIST_BY_RESOURCE", reservations::LIST_BY_RESOURCE),
    ("reservations::LIST_ALL", reservations::LIST_ALL),
    ("resources::INSERT", resources::INSERT),
    ("resources::GET", resources::GET),
    ("resources::LOCK", resources::LOCK),
    ("resources::LOCK_FOR_CHANGE", resources::LOCK_FOR_CHANGE),
    ("resources::UPDATE_SETTINGS", resources::UPDATE_SETTINGS),
    ("resources::ARCHIVE", resources::ARCHIVE),
    ("seat_polls::SCHEDULE", seat_polls::SCHEDULE),
    ("seat_polls::DEFER", seat_polls::DEFER),
    ("seat_polls::CLAIM_DUE", seat_polls::CLAIM_DUE),
    ("seat_polls::RESCHEDULE", seat_polls::RESCHEDULE),
    ("seat_polls::FORGET", seat_polls::FORGET),
    ("resources::LIST", resources::LIST),
    ("upstream_views::READ", upstream_views::READ),
    ("upstream_views::TAKE_REFRESH", upstream_views::TAKE_REFRESH),
    ("upstream_views::STORE", upstream_views::STORE),
    ("upstream_views::GIVE_BACK", upstream_views::GIVE_BACK),
    ("waitlist::INSERT", waitlist::INSERT),
    ("waitlist::ACTIVE_FOR_RANGE", waitlist::ACTIVE_FOR_RANGE),
    ("waitlist::GET", waitlist::GET),
    ("waitlist::LOCK", waitlist::LOCK),
    ("waitlist::RESOURCE_OF", waitlist::RESOURCE_OF),
    ("waitlist::WAITING_OVERLAPPING", waitlist::WAITING_OVERLAPPING),
    ("waitlist::MARK_OFFERED", waitlist::MARK_OFFERED),
    ("waitlist::SETTLE_OFFERS", waitlist::SETTLE_OFFERS),
    ("waitlist::SET_STATUS", waitlist::SET_STATUS),
    ("waitlist::CANCEL_WAITING_OF", waitlist::CANCEL_WAITING_OF),
    ("waitlist::EXPIRE_PASSED", waitlist::EXPIRE_PASSED),
    ("waitlist::UPSTREAM_QUEUE", waitlist::UPSTREAM_QUEUE),
    ("waitlist::ACCEPT_WAIT", waitlist::ACCEPT_WAIT),
    ("waitlist::REQUEST_LEAVE", waitlist::REQUEST_LEAVE),
    ("waitlist::LIST", waitlist::LIST),
    ("waitlist::LIST_BY_OWNER", waitlist::LIST_BY_OWNER),
    ("webhooks::INSERT", webhooks::INSERT),
    ("webhooks::GET", webhooks::GET),
    ("webhooks::LIST", webhooks::LIST),
    ("webhooks::DELETE", webhooks::DELETE),
    ("webhooks::ROTATE_SECRET", webhooks::ROTATE_SECRET),
    ("webhooks::DUE_FOR_EVENT", webhooks::DUE_FOR_EVENT),
    ("webhooks::RECORD_DELIVERY", webhooks::RECORD_DELIVERY),
    ("webhooks::PURGE_DELIVERIES", webhooks::PURGE_DELIVERIES),
];

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
    ("reservation_event", include_str!("../../../sql/functions/reservation_event.sql")),
    ("reservation_hold", include_str!("../../../sql/functions/reservation_hold.sql")),
    ("reservation_insert_if_fits", include_str!("../../../sql/functions/reservation_insert_if_fits.sql")),
    ("reservation_load", include_str!("../../../sql/functions/reservation_load.sql")),
    ("reservation_move_if_fits", include_str!("../../../sql/functions/reservation_move_if_fits.sql")),
    ("reservation_row_valid", include_str!("../../../sql/functions/reservation_row_valid.sql")),
    ("reservation_snapshot", include_str!("../../../sql/functions/reservation_snapshot.sql")),
    ("reservations_set_buffered", include_str!("../../../sql/functions/reservations_set_buffered.sql")),
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
        let unavailable = e.is_closed()
            || match e.code() {
                // Class 08 (connection exception), shutdowns, too many connections.
                Some(code) => {
                    code.code().starts_with("08")
                        || *code == SqlState::ADMIN_SHUTDOWN
                        || *code == SqlState::CRASH_SHUTDOWN
                        || *code == SqlState::CANNOT_CONNECT_NOW
                        || *code == SqlState::TOO_MANY_CONNECTIONS
                }
                // No SQLSTATE at all means the error came from the socket, not the server.
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
    let mut pg = tokio_postgres::Config::from_str(config.database_url.expose()).map_err(ConfigError::DatabaseUrl)?;
    let ms = config.db_statement_timeout.as_millis();
    pg.options(format!(
        "-c statement_timeout={ms} -c lock_timeout={ms} -c idle_in_transaction_session_timeout={} -c TimeZone=UTC",
        ms * 2
    ));
    if pg.get_application_name().is_none() {
        pg.application_name("reservations");
    }
    pg.connect_timeout(std::time::Duration::from_secs(5));
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

/// A pool that connects lazily: building it does no I/O, so cold start stays cheap.
///
/// A connection is checked with an empty query before it is handed out (`Verified`,
/// one round trip with no parse or plan). Checking only whether the socket is known to
/// be closed (`Fast`) handed out connections whose backend had been terminated but
/// whose close had not arrived yet: the request after a failover or a killed backend
/// then failed with 503 where it could have run.
pub fn pool(config: &Config) -> Result<Pool, ConfigError> {
    let manager = Manager::from_config(
        pg_config(config)?,
        tls(config)?,
        ManagerConfig { recycling_method: RecyclingMethod::Verified },
    );
    Ok(Pool::builder(manager)
        .max_size(config.db_pool_size)
        .wait_timeout(Some(std::time::Duration::from_secs(5)))
        .create_timeout(Some(std::time::Duration::from_secs(5)))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .build()
        .expect("a pool with a runtime and timeouts always builds"))
}

/// Applies the embedded migrations, then every function of [`FUNCTIONS`] in one
/// transaction, so that a redeploy applies a changed function. An advisory lock makes
/// concurrent starters (several dev servers, parallel test processes, a deploy hook)
/// take turns instead of racing. Returns how many migrations were applied.
pub async fn migrate(client: &mut tokio_postgres::Client) -> Result<usize, MigrateError> {
    const LOCK_KEY: i64 = 0x7265_7365_7276; // "reserv"
    client.execute("SELECT pg_advisory_lock($1)", &[&LOCK_KEY]).await?;
    let outcome = migrate_holding_the_lock(client).await;
    client.execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY]).await?;
    outcome
}

async fn migrate_holding_the_lock(client: &mut tokio_postgres::Client) -> Result<usize, MigrateError> {
    let applied = embedded::migrations::runner().run_async(client).await?.applied_migrations().len();
    let tx = client.transaction().await?;
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

/// Connects once, outside any pool, and migrates: for the dev server, tests and the
/// migration command.
pub async fn connect_and_migrate(config: &Config) -> Result<usize, MigrateError> {
    let (mut client, connection) = pg_config(config)?.connect(tls(config)?).await?;
    let task = tokio::spawn(connection);
    let applied = migrate(&mut client).await;
    drop(client);
    let _ = task.await;
    applied
}

/// Does PostgreSQL answer? For the health route.
pub async fn ping(pool: &Pool) -> Result<(), DbError> {
    let client = pool.get().await?;
    client.simple_query("SELECT 1").await?;
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
mod tests {
    #[test]
    fn every_named_statement_of_every_table_module_is_listed_for_preparation() {
        let sources = [
            ("breakers", include_str!("breakers.rs")),
            ("cursor_key", include_str!("cursor_key.rs")),
            ("idempotency", include_str!("idempotency.rs")),
            ("intents", include_str!("intents.rs")),
            ("outbox", include_str!("outbox.rs")),
            ("reservations", include_str!("reservations.rs")),
            ("resources", include_str!("resources.rs")),
            ("upstream_views", include_str!("upstream_views.rs")),
            ("waitlist", include_str!("waitlist.rs")),
            ("webhooks", include_str!("webhooks.rs")),
        ];
        for (module, source) in sources {
            for line in source.lines().filter(|l| l.starts_with("pub const ") && l.contains(": &str")) {
                let name = line["pub const ".len()..].split(':').next().unwrap();
                let listed = format!("{module}::{name}");
                assert!(super::STATEMENTS.iter().any(|(n, _)| *n == listed), "{listed} is not in db::STATEMENTS");
            }
        }
    }
}
