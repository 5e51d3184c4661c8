//! The migrations and the SQL functions, applied by one starter at a time.

use super::error::postgres_reason;
use super::settings::{Settings, SettingsError, pg_config_of, tls};

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
    ("reservation_expire_in_way", include_str!("../../../sql/functions/reservation_expire_in_way.sql")),
    ("reservation_expire_lapsed", include_str!("../../../sql/functions/reservation_expire_lapsed.sql")),
    ("reservation_hold", include_str!("../../../sql/functions/reservation_hold.sql")),
    ("reservation_hold_items", include_str!("../../../sql/functions/reservation_hold_items.sql")),
    ("reservation_insert_if_fits", include_str!("../../../sql/functions/reservation_insert_if_fits.sql")),
    ("reservation_is_item", include_str!("../../../sql/functions/reservation_is_item.sql")),
    ("reservation_items", include_str!("../../../sql/functions/reservation_items.sql")),
    ("reservation_load", include_str!("../../../sql/functions/reservation_load.sql")),
    ("reservation_load_follow", include_str!("../../../sql/functions/reservation_load_follow.sql")),
    ("reservation_move_if_fits", include_str!("../../../sql/functions/reservation_move_if_fits.sql")),
    ("reservation_row_valid", include_str!("../../../sql/functions/reservation_row_valid.sql")),
    ("reservation_series_field", include_str!("../../../sql/functions/reservation_series_field.sql")),
    ("reservation_snapshot", include_str!("../../../sql/functions/reservation_snapshot.sql")),
    ("reservations_set_buffered", include_str!("../../../sql/functions/reservations_set_buffered.sql")),
    ("resource_live_load", include_str!("../../../sql/functions/resource_live_load.sql")),
    ("resource_load_mismatches", include_str!("../../../sql/functions/resource_load_mismatches.sql")),
    ("resources_rules_version", include_str!("../../../sql/functions/resources_rules_version.sql")),
    ("uuidv7", include_str!("../../../sql/functions/uuidv7.sql")),
];

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
    Settings(#[from] SettingsError),
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
            MigrateError::Settings(e) => e.to_string(),
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

/// Connects once, outside any pool, and migrates: for the dev server, tests, the
/// migration command and the migration function of a deploy. It connects to
/// [`Settings::url_for_migrations`]: a direct connection where one is given, because the
/// advisory lock of [`migrate`] is a session's, which a transaction-mode pooler does not
/// keep.
pub async fn connect_and_migrate(settings: &Settings) -> Result<usize, MigrateError> {
    let (name, url) = settings.url_for_migrations();
    let pg = pg_config_of(settings, name, url.expose())?;
    let (mut client, connection) = pg.connect(tls(settings)?).await?;
    let task = tokio::spawn(connection);
    let applied = migrate(&mut client).await;
    drop(client);
    let _ = task.await;
    applied
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
