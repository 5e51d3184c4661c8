//! The one way every named statement reaches PostgreSQL, in one of two modes
//! (`DB_STATEMENTS`, [`Statements`]):
//!
//! - `unnamed`: each statement is sent as the unnamed statement with its parameters'
//!   types given (`query_typed`: Parse, Bind, Execute in one round trip) and nothing
//!   outlives it on the connection. A transaction-mode pooler (PgBouncer, RDS Proxy)
//!   can hand the server connection to another client after every transaction, and RDS
//!   Proxy does not pin for it.
//! - `cached`: each statement is prepared once per connection under a name and run by
//!   that name (`prepare_cached`). Only for a direct connection: a named statement is
//!   session state, which RDS Proxy answers by pinning and PgBouncer in transaction mode
//!   (before 1.21) does not support.
//!
//! The parameters' types come from their Rust types ([`Param`]): the same types the
//! server infers for them today, which `prepare_cached` checks in `cached` mode and the
//! test suite runs in both.

use chrono::{DateTime, NaiveDate, Utc};
use std::sync::atomic::{AtomicU8, Ordering};
use tokio_postgres::GenericClient as _;
use tokio_postgres::types::{Json, ToSql, Type};
use tokio_postgres::{Error, Row};
use uuid::Uuid;

/// How statements are sent: `DB_STATEMENTS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statements {
    /// Unnamed, typed statements: no session state, safe behind a transaction-mode
    /// pooler.
    Unnamed,
    /// Named statements prepared once per connection: for a direct connection only.
    Cached,
}

impl Statements {
    pub fn as_str(self) -> &'static str {
        match self {
            Statements::Unnamed => "unnamed",
            Statements::Cached => "cached",
        }
    }
}

/// The process's mode: every pool of a process reaches the same database the same way,
/// and the db modules take any client, so the mode is the process's, set with its pool.
static MODE: AtomicU8 = AtomicU8::new(0);

/// Sets how this process sends statements ([`super::pool`] does, from the configuration).
pub fn set_mode(mode: Statements) {
    MODE.store(mode as u8, Ordering::Relaxed);
}

/// How this process sends statements.
pub fn mode() -> Statements {
    match MODE.load(Ordering::Relaxed) {
        0 => Statements::Unnamed,
        _ => Statements::Cached,
    }
}

/// A parameter of a statement: a value and the PostgreSQL type it is sent as.
pub trait Param: Sync {
    fn sql(&self) -> &(dyn ToSql + Sync);
    fn pg_type(&self) -> Type;
}

/// A Rust type's PostgreSQL type, and the type of an array of it.
pub trait Typed: ToSql + Sync {
    const TYPE: Type;
}

/// A type whose values also go in arrays.
pub trait Element: Typed {
    const ARRAY: Type;
}

impl<T: Typed> Param for T {
    fn sql(&self) -> &(dyn ToSql + Sync) {
        self
    }
    fn pg_type(&self) -> Type {
        T::TYPE
    }
}

macro_rules! typed {
    ($($t:ty => $ty:ident $(, $array:ident)?;)+) => {
        $(
            impl Typed for $t {
                const TYPE: Type = Type::$ty;
            }
            $(impl Element for $t {
                const ARRAY: Type = Type::$array;
            })?
        )+
    };
}

typed! {
    bool => BOOL, BOOL_ARRAY;
    i16 => INT2, INT2_ARRAY;
    i32 => INT4, INT4_ARRAY;
    i64 => INT8, INT8_ARRAY;
    f64 => FLOAT8, FLOAT8_ARRAY;
    String => TEXT, TEXT_ARRAY;
    &str => TEXT, TEXT_ARRAY;
    Uuid => UUID, UUID_ARRAY;
    DateTime<Utc> => TIMESTAMPTZ, TIMESTAMPTZ_ARRAY;
    NaiveDate => DATE, DATE_ARRAY;
    serde_json::Value => JSONB, JSONB_ARRAY;
    Vec<u8> => BYTEA;
    &[u8] => BYTEA;
}

impl<T: Typed> Typed for Option<T> {
    const TYPE: Type = T::TYPE;
}

impl<T: Element> Element for Option<T> {
    const ARRAY: Type = T::ARRAY;
}

impl<T: Typed> Typed for &T {
    const TYPE: Type = T::TYPE;
}

impl<T: Element> Element for &T {
    const ARRAY: Type = T::ARRAY;
}

impl<T: serde::Serialize + std::fmt::Debug + Sync> Typed for Json<T> {
    const TYPE: Type = Type::JSONB;
}

impl<T: serde::Serialize + std::fmt::Debug + Sync> Element for Json<T> {
    const ARRAY: Type = Type::JSONB_ARRAY;
}

impl<T: Element> Typed for Vec<T> {
    const TYPE: Type = T::ARRAY;
}

impl<T: Element> Typed for &[T] {
    const TYPE: Type = T::ARRAY;
}

/// The runner's methods: each sends its statement unnamed and typed, or named and
/// cached, by the process's [`mode`].
macro_rules! runs {
    ($($(#[$doc:meta])* $name:ident -> $out:ty = $unnamed:ident, $cached:ident;)+) => {
        $(
            $(#[$doc])*
            fn $name(&self, sql: &str, params: &[&dyn Param]) -> impl Future<Output = Result<$out, Error>> + Send
            where
                Self: Sync,
            {
                async move {
                    match mode() {
                        Statements::Unnamed => self.direct().$unnamed(sql, &typed(params)).await,
                        Statements::Cached => self.$cached(&self.prepare_cached(sql).await?, &untyped(params)).await,
                    }
                }
            }
        )+
    };
}

/// A pooled client or a transaction: what every db function takes. It runs the named
/// statements in the process's [`mode`]; errors are tokio-postgres's own, so that
/// callers read their SQLSTATE as before.
pub trait GenericClient: deadpool_postgres::GenericClient {
    /// The tokio-postgres client or transaction underneath, which sends unnamed typed
    /// statements.
    fn direct(&self) -> &(impl tokio_postgres::GenericClient + Sync);

    runs! {
        /// Every row of `sql`.
        rows -> Vec<Row> = query_typed, query;
        /// The one row of `sql`; an error when there is none or more.
        row -> Row = query_typed_one, query_one;
        /// The row of `sql`, if there is one; an error when there are more.
        opt_row -> Option<Row> = query_typed_opt, query_opt;
        /// Runs `sql`: how many rows it changed.
        exec -> u64 = execute_typed, execute;
    }
}

fn typed<'a>(params: &[&'a dyn Param]) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    params.iter().map(|p| (p.sql(), p.pg_type())).collect()
}

fn untyped<'a>(params: &[&'a dyn Param]) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(|p| p.sql()).collect()
}

impl GenericClient for deadpool_postgres::Client {
    fn direct(&self) -> &(impl tokio_postgres::GenericClient + Sync) {
        let client: &tokio_postgres::Client = self;
        client
    }
}

impl GenericClient for deadpool_postgres::Transaction<'_> {
    fn direct(&self) -> &(impl tokio_postgres::GenericClient + Sync) {
        let tx: &tokio_postgres::Transaction<'_> = self;
        tx
    }
}

#[cfg(test)]
mod tests {
    use super::{Param, Type};
    use chrono::{DateTime, Utc};
    use tokio_postgres::types::Json;
    use uuid::Uuid;

    fn types(params: &[&dyn Param]) -> Vec<Type> {
        params.iter().map(|p| p.pg_type()).collect()
    }

    #[test]
    fn a_parameter_is_sent_as_the_type_of_its_rust_value_whether_or_not_it_is_null() {
        let (owner, name, none): (&str, String, Option<&str>) = ("alice", "Room".into(), None);
        let (id, when, ids): (Uuid, Option<DateTime<Utc>>, Vec<Uuid>) = (Uuid::nil(), None, vec![]);
        let (statuses, metadata) = (Some(vec!["HELD"]), Json(serde_json::json!({})));
        assert_eq!(
            types(&[&owner, &name, &none, &id, &when, &ids.as_slice(), &statuses, &metadata, &7i32, &7i64, &true]),
            [
                Type::TEXT,
                Type::TEXT,
                Type::TEXT,
                Type::UUID,
                Type::TIMESTAMPTZ,
                Type::UUID_ARRAY,
                Type::TEXT_ARRAY,
                Type::JSONB,
                Type::INT4,
                Type::INT8,
                Type::BOOL
            ]
        );
    }
}
