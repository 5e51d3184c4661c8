//! The dev server under clients that are slow, stuck or too many: each is cut off or
//! kept waiting in bounded ways, and everyone else is still served.

use acceptance::{Options, TestApp, raw_exchange, send, slug};
use dev_server::Limits;
use dev_server::accept::{AcceptBackoff, is_connection_error};
use reqwest::StatusCode;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn app_with(limits: Limits) -> TestApp {
    TestApp::spawn_with(Options { limits, ..Default::default() }).await
}

/// Waits until the server closes `socket`; returns how long that took, or `None` if it
/// was still open after `patience`.
async fn closed_within(socket: &mut TcpStream, patience: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut sink = Vec::new();
    // Closed is an end of stream or a reset; either way the read returns.
    tokio::time::timeout(patience, socket.read_to_end(&mut sink)).await.ok().map(|_| started.elapsed())
}

#[tokio::test]
async fn a_client_that_stops_in_the_middle_of_its_headers_is_disconnected_after_the_header_timeout() {
    let timeout = Duration::from_millis(300);
    let app = app_with(Limits { header_read_timeout: timeout, ..Default::default() }).await;
    let mut slow = Vec::new();
    for _ in 0..20 {
        let mut socket = TcpStream::connect(app.addr()).await.unwrap();
        socket.write_all(b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ").await.unwrap();
        slow.push(socket);
    }
    for socket in &mut slow {
        let took = closed_within(socket, Duration::from_secs(5)).await;
        let took = took.expect("a half-sent head still holds its connection after 5 s");
        assert!(took < Duration::from_secs(3), "closed only after {took:?}");
    }
    let (status, _) = send(app.get("alice", "/v1/health")).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_client_that_connects_and_sends_nothing_is_disconnected_after_the_header_timeout() {
    let app = app_with(Limits { header_read_timeout: Duration::from_millis(300), ..Default::default() }).await;
    let mut silent = TcpStream::connect(app.addr()).await.unwrap();
    let took = closed_within(&mut silent, Duration::from_secs(5)).await;
    assert!(took.is_some(), "a silent connection is still open after 5 s");
}

#[tokio::test]
async fn a_body_that_stops_arriving_is_answered_with_a_400_problem_after_the_body_timeout() {
    let app = app_with(Limits { body_read_timeout: Duration::from_millis(300), ..Default::default() }).await;
    let request = b"POST /v1/reservations HTTP/1.1\r\nHost: localhost\r\nx-principal: alice\r\n\
        content-type: application/json\r\ncontent-length: 100\r\n\r\n{\"resource_id\":";
    let started = Instant::now();
    let answer = raw_exchange(app.addr(), request, Duration::from_secs(5)).await;
    assert!(started.elapsed() < Duration::from_secs(3), "answered only after {:?}", started.elapsed());
    assert_eq!(answer.status, 400);
    assert_eq!(answer.header("content-type"), Some("application/problem+json"));
    let problem = answer.json();
    assert_eq!(slug(&problem), "bad-request", "{problem}");
    assert_eq!(problem["status"], 400);
}

#[tokio::test]
async fn connections_past_the_limit_wait_until_one_ends_and_are_then_served() {
    let app = app_with(Limits { max_connections: 2, ..Default::default() }).await;
    let mut first = TcpStream::connect(app.addr()).await.unwrap();
    let _second = TcpStream::connect(app.addr()).await.unwrap();
    let mut third = TcpStream::connect(app.addr()).await.unwrap();
    third.write_all(b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    let early = tokio::time::timeout(Duration::from_millis(500), third.read_to_end(&mut answer)).await;
    assert!(early.is_err(), "a third connection was served past a limit of 2: {:?}", String::from_utf8_lossy(&answer));
    // One ends (the client hangs up): the waiting connection is accepted and answered.
    first.shutdown().await.unwrap();
    drop(first);
    tokio::time::timeout(Duration::from_secs(5), third.read_to_end(&mut answer))
        .await
        .expect("the waiting connection is served once another ends")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
}

#[test]
fn failed_accepts_pause_from_10_ms_doubling_to_a_second_and_a_success_starts_over() {
    let mut backoff = AcceptBackoff::default();
    let pauses: Vec<u128> = (0..10).map(|_| backoff.failed().as_millis()).collect();
    assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
    assert_eq!(backoff.succeeded(), 10, "the failures since the last success");
    assert_eq!(backoff.succeeded(), 0);
    assert_eq!(backoff.failed(), Duration::from_millis(10));
}

#[test]
fn running_out_of_file_descriptors_backs_off_but_a_connection_reset_in_the_backlog_does_not() {
    const EMFILE: i32 = 24;
    assert!(!is_connection_error(&std::io::Error::from_raw_os_error(EMFILE)));
    assert!(is_connection_error(&std::io::Error::from(std::io::ErrorKind::ConnectionAborted)));
    assert!(is_connection_error(&std::io::Error::from(std::io::ErrorKind::ConnectionReset)));
}
