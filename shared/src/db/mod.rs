//! The database: its settings ([`settings`]), the pool ([`pool`]), the migrations
//! ([`migrate`]), its errors ([`error`]), how statements are sent ([`run`]), and one
//! module of named SQL per table or mechanism, gathered here into [`STATEMENTS`].
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

pub mod error;
pub mod migrate;
pub mod pool;
pub mod run;
pub mod settings;

pub use error::{DbError, NotWritable, TimedOut, io_reason, postgres_reason};
pub use migrate::{MIGRATION_LOCK, MigrateError, connect_and_migrate, migrate, schema_fingerprint};
pub use pool::{ping, pool};
pub use run::{GenericClient, Statements};
pub use settings::{Settings, SettingsError, database_address, pg_config, tls};

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
            if ["mod", "run", "error", "migrate", "pool", "settings"].contains(&module.as_str()) {
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
