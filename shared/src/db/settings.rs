//! The database's own settings (`config` reads them from the environment) and what
//! they make: each connection's settings and its TLS.

use super::Statements;
use crate::secret::Secret;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

#[derive(Debug, Clone)]
pub struct Settings {
    /// `DATABASE_URL`, with its password: printed as `***` by `Debug`.
    pub url: Secret,
    /// `DATABASE_MIGRATION_URL`: where the migration step connects when it is set, a
    /// direct connection to the primary, because the step holds a session-level
    /// advisory lock that a transaction-mode pooler (RDS Proxy, PgBouncer) would pin or
    /// lose. Unset: the migration step uses `DATABASE_URL`.
    pub migration_url: Option<Secret>,
    /// `DB_POOL_SIZE`. Small in Lambda: one invocation at a time per instance; a
    /// transaction-mode pooler multiplexes many instances with `statements` unnamed.
    pub pool_size: usize,
    /// `DB_STATEMENT_TIMEOUT_MS`, also each session's lock timeout.
    pub statement_timeout: Duration,
    /// `DB_STATEMENTS`: how statements are sent. `unnamed` (the default) works through a
    /// transaction-mode pooler; `cached` only on a direct connection.
    pub statements: Statements,
    /// `DB_CA_FILE`: PEM certificates trusted for TLS to the database besides the public
    /// roots: the RDS CA bundle when connecting to an RDS instance directly.
    pub ca_file: Option<String>,
}

impl Settings {
    /// Where the migration step connects, and the name of the variable that said so.
    pub fn url_for_migrations(&self) -> (&'static str, &Secret) {
        match &self.migration_url {
            Some(url) => ("DATABASE_MIGRATION_URL", url),
            None => ("DATABASE_URL", &self.url),
        }
    }

    /// `host:port` of where the migration step connects, for its messages.
    pub fn migration_address(&self) -> String {
        database_address(self.url_for_migrations().1.expose())
    }
}

/// Settings that cannot make a connection.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// `DATABASE_URL` or `DATABASE_MIGRATION_URL`.
    #[error("{name} is not a valid PostgreSQL connection string")]
    Url {
        name: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("DB_CA_FILE {path:?} gives no usable CA certificate: {reason}")]
    Ca { path: String, reason: String },
}

/// How long connecting to one address may take (`connect_timeout`).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The connection settings, with per-session guards that keep a frozen or dying
/// function from holding row locks: statements and idle transactions are cut off.
pub fn pg_config(settings: &Settings) -> Result<tokio_postgres::Config, SettingsError> {
    pg_config_of(settings, "DATABASE_URL", settings.url.expose())
}

/// [`pg_config`] for another URL of the same settings (`name` is its variable).
pub(super) fn pg_config_of(
    settings: &Settings,
    name: &'static str,
    url: &str,
) -> Result<tokio_postgres::Config, SettingsError> {
    let mut pg = tokio_postgres::Config::from_str(url).map_err(|source| SettingsError::Url { name, source })?;
    let ms = settings.statement_timeout.as_millis();
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
pub fn tls(settings: &Settings) -> Result<MakeRustlsConnect, SettingsError> {
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    if let Some(path) = &settings.ca_file {
        let bad = |reason: String| SettingsError::Ca { path: path.clone(), reason };
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

#[cfg(test)]
mod connection_tests {
    use super::Settings;
    use crate::secret::Secret;
    use std::time::Duration;
    use tokio_postgres::config::{Host, TargetSessionAttrs};

    fn pg_config_of(url: &str) -> tokio_postgres::Config {
        let settings = Settings {
            url: Secret::from(url),
            migration_url: None,
            pool_size: 2,
            statement_timeout: Duration::from_secs(5),
            statements: super::super::Statements::Unnamed,
            ca_file: None,
        };
        super::pg_config(&settings).unwrap()
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
