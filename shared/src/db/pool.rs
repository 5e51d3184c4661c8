//! The pool: lazy, its connections checked before use and written off after a
//! failover.

use super::error::{DbError, NotWritable};
use super::settings::{Settings, SettingsError, pg_config, tls};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};

/// How long the check of a pooled connection before its use may take: an empty query
/// answers in a round trip, so one that takes longer leads to a peer that is gone or
/// stalled, and the connection is dropped rather than waited for.
const CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The last time this process met a server that could not write or was going away
/// ([`DbError`]'s conversion records it). Connections made before it are not handed
/// out again: after a failover they may all lead to the old primary or to a standby.
/// The process's, as every pool of a process reaches the same database.
static WRITTEN_OFF_BEFORE: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

pub(super) fn write_off_connections() {
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
/// It also sets how this process sends statements (`DB_STATEMENTS`, [`super::run::set_mode`]).
pub fn pool(settings: &Settings) -> Result<Pool, SettingsError> {
    super::run::set_mode(settings.statements);
    // The manager's own recycling only looks at whether the socket is known to be
    // closed: the round trip is the hook's, with its time bound.
    let manager = Manager::from_config(
        pg_config(settings)?,
        tls(settings)?,
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    Ok(Pool::builder(manager)
        .max_size(settings.pool_size)
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
