//! TLS to the database, against the test PostgreSQL's own certificate (Debian's
//! cluster serves a self-signed one for `localhost`; `scripts/pg-throwaway` makes one
//! alike). RDS and RDS Proxy are reached the same way: `sslmode=require` in the URL,
//! the RDS CA bundle in `DB_CA_FILE`.

use acceptance::{admin_url, fresh_database};
use shared::config::{Config, ConfigError, Defaults};
use shared::db::SettingsError;
use std::path::Path;
use tokio_postgres::NoTls;

/// The server's certificate file, which a test trusts as its CA.
async fn server_certificate() -> String {
    let (client, connection) = tokio_postgres::connect(&admin_url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    let show = async |name: &str| -> String { client.query_one(&format!("SHOW {name}"), &[]).await.unwrap().get(0) };
    assert_eq!(show("ssl").await, "on", "the test PostgreSQL must serve TLS (ssl = on)");
    let file = show("ssl_cert_file").await;
    if Path::new(&file).is_absolute() { file } else { format!("{}/{file}", show("data_directory").await) }
}

/// `url` with its host replaced, and a query string added.
fn with_host(url: &str, host: &str, query: &str) -> String {
    let rest = url.split_once('@').expect("the test URL names a user").1;
    let after_host = &rest[rest.find([':', '/']).unwrap_or(rest.len())..];
    let user = url.split_once('@').unwrap().0;
    let sep = if after_host.contains('?') { '&' } else { '?' };
    format!("{user}@{host}{after_host}{sep}{query}")
}

fn config(database_url: String, ca_file: Option<String>) -> Result<Config, ConfigError> {
    Config::from_lookup(Defaults::Lambda, move |k| match k {
        "DATABASE_URL" => Some(database_url.clone()),
        "DB_CA_FILE" => ca_file.clone(),
        _ => None,
    })
}

/// Is the pooled connection encrypted? The server's own word, from `pg_stat_ssl`.
async fn encrypted(config: &Config) -> Result<bool, deadpool_postgres::PoolError> {
    let pool = shared::db::pool(&config.database).expect("pool");
    let client = pool.get().await?;
    let row = client.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).await.unwrap();
    Ok(row.get(0))
}

#[tokio::test]
async fn sslmode_require_with_the_servers_ca_connects_encrypted() {
    let url = with_host(&fresh_database().await, "localhost", "sslmode=require");
    let config = config(url, Some(server_certificate().await)).unwrap();
    assert!(encrypted(&config).await.expect("a verified TLS connection"));
    // The migration command connects outside the pool, through the same connector.
    shared::db::connect_and_migrate(&config.database).await.expect("migrations over TLS");
}

#[tokio::test]
async fn a_server_certificate_that_no_trusted_ca_signed_is_refused() {
    let url = with_host(&fresh_database().await, "localhost", "sslmode=require");
    // Only the public roots: a self-signed database certificate is not among them.
    let config = config(url, None).unwrap();
    let err = encrypted(&config).await.expect_err("an unverified server must not be talked to");
    assert!(format!("{err:?}").contains("UnknownIssuer"), "{err:?}");
}

#[tokio::test]
async fn a_certificate_for_another_host_name_is_refused() {
    // The certificate names localhost; the URL names 127.0.0.1.
    let url = with_host(&fresh_database().await, "127.0.0.1", "sslmode=require");
    let config = config(url, Some(server_certificate().await)).unwrap();
    let err = encrypted(&config).await.expect_err("the host name must match the certificate");
    assert!(format!("{err:?}").contains("NotValidForName"), "{err:?}");
}

#[tokio::test]
async fn without_sslmode_require_the_local_connection_stays_plain() {
    let url = with_host(&fresh_database().await, "localhost", "application_name=plain");
    let config = config(url, Some(server_certificate().await)).unwrap();
    assert!(!encrypted(&config).await.expect("a plain connection"));
}

#[tokio::test]
async fn a_ca_file_without_certificates_is_refused_at_start() {
    let empty = std::env::temp_dir().join(format!("rsv-empty-ca-{}.pem", std::process::id()));
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let config = config(fresh_database().await, Some(empty.display().to_string())).unwrap();
    let err = shared::db::pool(&config.database).expect_err("an unusable CA file is a configuration error");
    assert!(matches!(err, SettingsError::Ca { .. }), "{err}");
    let _ = std::fs::remove_file(empty);
}
