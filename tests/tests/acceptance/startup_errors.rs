//! A binary that cannot start says why in one line on stderr, naming the variable,
//! the address or the database host (never the password), and exits non-zero: the
//! real binaries, run with a bad environment.

use acceptance::build_binaries;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const FUNCTIONS: [&str; 7] = ["reserve", "confirm", "availability", "admin", "sweeper", "intent-worker", "notifier"];

/// A database URL with a password, on a port where nothing listens.
const UNREACHABLE_DATABASE: &str = "postgres://reservations:s3cret-pw@127.0.0.1:1/reservations";

fn dev_server() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build_binaries(&["dev-server"]).remove("dev-server").expect("cargo built dev-server"))
}

/// The seven functions, built together as `scripts/lambda-smoke` builds them.
fn function(name: &str) -> PathBuf {
    static BINS: OnceLock<std::collections::BTreeMap<String, PathBuf>> = OnceLock::new();
    BINS.get_or_init(|| build_binaries(&FUNCTIONS))[name].clone()
}

struct Failure {
    code: Option<i32>,
    stderr: String,
}

/// Runs `exe` with only `env` (and PATH); it must exit within 20 s, and not with 0.
fn fails(exe: &PathBuf, env: &[(&str, &str)]) -> Failure {
    let mut child = Command::new(exe)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", exe.display()));
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{} with {env:?} did not stop in 20 s", exe.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "{} with {env:?} exited 0", exe.display());
    Failure { code: out.status.code(), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

/// The one line of stderr, which must be exactly `expected`.
fn assert_one_line(failure: &Failure, expected: &str) {
    assert_eq!(failure.stderr, format!("{expected}\n"), "stderr must be one human line");
    assert_eq!(failure.code, Some(1));
}

#[test]
fn a_port_that_is_not_a_number_stops_the_dev_server_with_one_line_naming_port() {
    let failure = fails(dev_server(), &[("DATABASE_URL", UNREACHABLE_DATABASE), ("PORT", "abc")]);
    assert_one_line(&failure, r#"dev-server: PORT must be a port number (got "abc")"#);
}

#[test]
fn a_sweep_interval_that_is_not_a_positive_number_stops_the_dev_server_by_name() {
    let failure = fails(dev_server(), &[("DATABASE_URL", UNREACHABLE_DATABASE), ("SWEEP_INTERVAL_SECONDS", "0")]);
    assert_one_line(
        &failure,
        r#"dev-server: SWEEP_INTERVAL_SECONDS must be a whole number of seconds from 1 to 86400 (got "0")"#,
    );
}

#[test]
fn a_busy_port_stops_the_dev_server_with_one_line_naming_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let failure = fails(dev_server(), &[("DATABASE_URL", UNREACHABLE_DATABASE), ("PORT", &port)]);
    assert_one_line(&failure, &format!("dev-server: cannot listen on 127.0.0.1:{port}: address already in use"));
}

#[test]
fn an_unreachable_database_stops_the_dev_server_with_one_line_naming_its_host_and_not_its_password() {
    let failure = fails(dev_server(), &[("DATABASE_URL", UNREACHABLE_DATABASE), ("PORT", "0")]);
    assert_one_line(&failure, "dev-server: cannot reach the database at 127.0.0.1:1: connection refused");
    assert!(!failure.stderr.contains("s3cret"));
}

#[test]
fn a_bad_shared_setting_stops_the_dev_server_with_its_message_not_a_debug_dump() {
    let failure = fails(dev_server(), &[("DATABASE_URL", UNREACHABLE_DATABASE), ("HOLD_TTL_SECONDS", "0")]);
    assert_one_line(&failure, r#"dev-server: HOLD_TTL_SECONDS has an invalid value "0": not an integer in range"#);
    let failure = fails(dev_server(), &[]);
    assert_one_line(&failure, "dev-server: DATABASE_URL is required");
}

#[test]
fn every_lambda_function_without_a_database_url_stops_with_one_line_naming_it() {
    for name in FUNCTIONS {
        let failure = fails(&function(name), &[]);
        assert_one_line(&failure, &format!("{name}: DATABASE_URL is required"));
    }
    let failure = fails(&function("sweeper"), &[("DATABASE_URL", UNREACHABLE_DATABASE)]);
    assert_one_line(&failure, "sweeper: EVENTS_QUEUE_URL is required");
}
