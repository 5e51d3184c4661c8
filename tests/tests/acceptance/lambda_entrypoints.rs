//! The Lambda entry points (`functions/*/src/main.rs`) under a real Lambda runtime
//! emulator: `cargo lambda watch --only-lambda-apis` serves the Runtime API and the
//! Invoke API, and each function's debug binary, built by `cargo build`, runs its
//! `lambda_runtime` loop against it with the environment the deployment gives it
//! (`AUTH_MODE=jwt`, the database, the queues). The events are the fixtures of
//! tests/events with their placeholder ids replaced by real ones.
//!
//! Needs `cargo-lambda` and moto's server: `scripts/lambda-smoke` installs both and
//! runs this with `cargo test -p acceptance --test acceptance -- --ignored lambda_entrypoints::`.
//!
//! Why the emulator does not start the functions itself: `cargo lambda watch` would
//! `cargo run --bin NAME` each function on its first invocation, package by package,
//! and the eight functions turn on different features of `shared`, so each would
//! rebuild `shared` and its dependents again (minutes on two cores) and replace the
//! binaries just built; a function that fails to build then leaves the invocation
//! waiting with no answer. Started here, the binaries are exactly the ones built once.
//!
//! Why invocations are POSTed to the Invoke API rather than sent with `cargo lambda
//! invoke`: one HTTP request with a timeout, the function's response as raw JSON, no
//! process per call. The CLI is still exercised once (the health check), so both paths
//! into the emulator are proven.

use acceptance::upstream_mock::{self, MockUpstream};
use acceptance::{Moto, build_binaries, day, fresh_database, hours, rfc3339, workspace_root};
use chrono::Duration as ChronoDuration;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio_postgres::NoTls;
use uuid::Uuid;

const FUNCTIONS: [&str; 8] =
    ["reserve", "confirm", "availability", "admin", "sweeper", "intent-worker", "notifier", "migrate"];

/// The ids the fixtures carry in place of real ones.
const RESOURCE_PLACEHOLDER: &str = "00000000-0000-0000-0000-000000000001";
const RESERVATION_PLACEHOLDER: &str = "00000000-0000-0000-0000-000000000002";
const INTENT_PLACEHOLDER: &str = "00000000-0000-0000-0000-000000000003";

/// The `sub` claim of the fixtures' user (the admin fixture has another).
const ALICE: &str = "00000000-0000-0000-0000-00000000a11c";

/// How long one invocation may take, cold start included.
const INVOKE_TIMEOUT: Duration = Duration::from_secs(60);

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// `cargo build` of the eight functions (debug); returns each binary's path.
fn build_functions() -> BTreeMap<String, PathBuf> {
    let started = Instant::now();
    let mut bins = build_binaries(&FUNCTIONS);
    bins.retain(|name, _| FUNCTIONS.contains(&name.as_str()));
    for f in FUNCTIONS {
        assert!(bins.contains_key(f), "cargo build produced no binary for {f}");
    }
    eprintln!("built the function binaries in {:.1?}", started.elapsed());
    bins
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The last `n` lines of a log file.
fn tail(path: &Path, n: usize) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn log_file(path: &Path) -> Stdio {
    Stdio::from(File::create(path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display())))
}

/// Ends a process and everything it started: each child here leads its own group.
fn kill_group(child: &mut Child) {
    if child.try_wait().ok().flatten().is_some() {
        return;
    }
    let group = format!("-{}", child.id());
    let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    let _ = child.wait();
}

/// `cargo lambda watch` on a free port of 127.0.0.1 and one process per function,
/// polling it for invocations. Everything is killed on drop; when the test fails, the
/// logs' tails are printed.
struct Emulator {
    port: u16,
    http: reqwest::Client,
    logs: PathBuf,
    watch: Child,
    functions: Vec<(String, Child)>,
}

impl Emulator {
    async fn start(bins: &BTreeMap<String, PathBuf>, env: &[(&str, String)]) -> Emulator {
        let logs = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lambda_entrypoints").join(Uuid::new_v4().to_string());
        std::fs::create_dir_all(&logs).unwrap();
        eprintln!("emulator and function logs: {}", logs.display());
        let port = free_port();
        let watch = Command::new(cargo())
            .current_dir(workspace_root())
            .args(["lambda", "watch", "--only-lambda-apis", "--ignore-changes", "--invoke-address", "127.0.0.1"])
            .args(["--invoke-port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log_file(&logs.join("watch.log")))
            .stderr(log_file(&logs.join("watch.log")))
            .process_group(0)
            .spawn()
            .expect("cargo lambda must be installed: pip install cargo-lambda (scripts/lambda-smoke does it)");
        let mut emulator = Emulator {
            port,
            http: reqwest::Client::builder().timeout(INVOKE_TIMEOUT).build().unwrap(),
            logs,
            watch,
            functions: Vec::new(),
        };
        emulator.wait_until_listening().await;
        for (name, exe) in bins {
            let log = emulator.logs.join(format!("{name}.log"));
            // A clean environment, as in Lambda: only what the deployment sets, and the
            // variables the runtime gives every function. The Runtime API of one
            // function is the emulator's `/.rt/NAME`.
            let child = Command::new(exe)
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("AWS_LAMBDA_RUNTIME_API", format!("http://127.0.0.1:{port}/.rt/{name}"))
                .env("AWS_LAMBDA_FUNCTION_NAME", name)
                .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
                .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
                .env("AWS_EC2_METADATA_DISABLED", "true")
                .env("RUST_LOG", "info")
                // What the template's `LoggingConfig: LogFormat: JSON` makes Lambda set.
                .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
                .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .stdin(Stdio::null())
                .stdout(log_file(&log))
                .stderr(log_file(&log))
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("starting {}: {e}", exe.display()));
            emulator.functions.push((name.clone(), child));
        }
        emulator
    }

    async fn wait_until_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(status) = self.watch.try_wait().unwrap() {
                panic!("cargo lambda watch exited with {status}:\n{}", tail(&self.logs.join("watch.log"), 40));
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("cargo lambda watch did not listen on port {}:\n{}", self.port, tail(&self.logs.join("watch.log"), 40));
    }

    /// Invokes `function` with `event` through the Invoke API; returns its response.
    async fn invoke(&self, function: &str, event: &Value) -> Value {
        let url = format!("http://127.0.0.1:{}/2015-03-31/functions/{function}/invocations", self.port);
        let resp = self
            .http
            .post(url)
            .json(event)
            .send()
            .await
            .unwrap_or_else(|e| panic!("invoking {function}: {e}\n{}", self.function_log(function)));
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert!(status.is_success(), "invoking {function}: {status} {text}\n{}", self.function_log(function));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{function} answered no JSON ({e}): {text}"))
    }

    /// Invokes an HTTP function; returns the API Gateway response's status and body.
    async fn call(&self, function: &str, event: &Value) -> (u16, Value) {
        let resp = self.invoke(function, event).await;
        http_reply(function, &resp)
    }

    /// `cargo lambda invoke FUNCTION --data-file FILE` against this emulator.
    fn invoke_with_cli(&self, function: &str, data_file: &Path) -> Value {
        let out_path = self.logs.join(format!("invoke-{function}.json"));
        let mut child = Command::new(cargo())
            .current_dir(workspace_root())
            .args(["lambda", "invoke", function, "--invoke-address", "127.0.0.1"])
            .args(["--invoke-port", &self.port.to_string(), "--output-format", "json", "--data-file"])
            .arg(data_file)
            .stdin(Stdio::null())
            .stdout(log_file(&out_path))
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .expect("cargo lambda invoke starts");
        let deadline = Instant::now() + INVOKE_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                kill_group(&mut child);
                panic!("cargo lambda invoke {function} gave no answer in {INVOKE_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let text = std::fs::read_to_string(&out_path).unwrap();
        assert!(status.success(), "cargo lambda invoke {function}: {status} {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("cargo lambda invoke printed no JSON ({e}): {text}"))
    }

    fn function_log(&self, function: &str) -> String {
        format!("--- {function}.log:\n{}", tail(&self.logs.join(format!("{function}.log")), 30))
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        for (_, child) in &mut self.functions {
            kill_group(child);
        }
        kill_group(&mut self.watch);
        if std::thread::panicking() {
            eprintln!("--- watch.log:\n{}", tail(&self.logs.join("watch.log"), 40));
            for (name, _) in &self.functions {
                eprintln!("{}", self.function_log(name));
            }
        }
    }
}

/// The status and JSON body of an API Gateway HTTP API (payload 2.0) response.
fn http_reply(function: &str, resp: &Value) -> (u16, Value) {
    let status = resp["statusCode"].as_u64().unwrap_or_else(|| panic!("{function}: no statusCode in {resp}"));
    let body = match resp["body"].as_str() {
        None | Some("") => Value::Null,
        Some(text) => {
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{function}: body is no JSON ({e}): {text}"))
        }
    };
    (status as u16, body)
}

fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("events").join(format!("{name}.json"))
}

/// A fixture of tests/events with its placeholder ids replaced by real ones, in every
/// string (rawPath, requestContext.http.path, pathParameters, the body).
fn event(name: &str, ids: &[(&str, Uuid)]) -> Value {
    let path = fixture_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut value: Value = serde_json::from_str(&text).unwrap();
    replace_in_strings(&mut value, ids);
    value
}

fn replace_in_strings(value: &mut Value, ids: &[(&str, Uuid)]) {
    match value {
        Value::String(s) => {
            for (placeholder, id) in ids {
                if s.contains(placeholder) {
                    *s = s.replace(placeholder, &id.to_string());
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| replace_in_strings(v, ids)),
        Value::Object(map) => map.values_mut().for_each(|v| replace_in_strings(v, ids)),
        _ => {}
    }
}

/// Replaces an event's body (a JSON text, as API Gateway sends it) and its length.
fn set_body(event: &mut Value, body: &Value) {
    let text = body.to_string();
    event["headers"]["content-length"] = json!(text.len().to_string());
    event["body"] = json!(text);
}

fn uuid_of(value: &Value) -> Uuid {
    value.as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{value} is not a uuid"))
}

#[tokio::test]
#[ignore = "needs cargo-lambda; run by scripts/lambda-smoke"]
async fn the_function_binaries_serve_a_reservation_end_to_end_under_the_lambda_emulator() {
    let bins = build_functions();
    let database_url = fresh_database().await;
    let moto = Moto::start().await;
    let events_queue = moto.queue("events").await;
    let intents_queue = moto.queue("intents").await;
    let upstream = MockUpstream::start().await;
    let env = [
        ("DATABASE_URL", database_url.clone()),
        ("AUTH_MODE", "jwt".to_string()),
        ("EVENTS_QUEUE_URL", events_queue.clone()),
        ("INTENTS_QUEUE_URL", intents_queue.clone()),
        ("UPSTREAM_BASE_URL", upstream.base.clone()),
        ("UPSTREAM_TOKEN", upstream_mock::TOKEN.to_string()),
        ("AWS_ENDPOINT_URL_SQS", moto.endpoint.clone()),
        ("AWS_ACCESS_KEY_ID", "test".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_string()),
        ("AWS_REGION", "us-east-1".to_string()),
    ];
    let lambda = Emulator::start(&bins, &env).await;
    let started = Instant::now();

    // admin: an admin (the `reservations/admin` scope) makes a resource.
    let (status, resource) = lambda.call("admin", &event("create_resource", &[])).await;
    assert_eq!(status, 201, "create resource: {resource}");
    let resource_id = uuid_of(&resource["id"]);
    let ids = [(RESOURCE_PLACEHOLDER, resource_id)];
    let (status, got) = lambda.call("admin", &event("get_resource", &ids)).await;
    assert_eq!((status, got["id"].clone()), (200, json!(resource_id)), "get resource: {got}");

    // reserve: a user holds it for an hour of a day inside the booking horizon.
    let (start, end) = hours(10, 11);
    let mut hold = event("create_reservation", &ids);
    set_body(
        &mut hold,
        &json!({"resource_id": resource_id, "start": start, "end": end, "quantity": 1, "confirm": false}),
    );
    let (status, held) = lambda.call("reserve", &hold).await;
    assert_eq!((status, held["status"].as_str()), (201, Some("HELD")), "hold: {held}");
    let reservation_id = uuid_of(&held["id"]);
    let ids = [(RESOURCE_PLACEHOLDER, resource_id), (RESERVATION_PLACEHOLDER, reservation_id)];

    // confirm
    let (status, confirmed) = lambda.call("confirm", &event("confirm_reservation", &ids)).await;
    assert_eq!((status, confirmed["status"].as_str()), (200, Some("CONFIRMED")), "confirm: {confirmed}");

    // availability: the reservation, and the window that shows it taken.
    let (status, got) = lambda.call("availability", &event("get_reservation", &ids)).await;
    assert_eq!((status, got["status"].as_str()), (200, Some("CONFIRMED")), "get reservation: {got}");
    let (from, to) = (rfc3339(day()), rfc3339(day() + ChronoDuration::days(1)));
    let mut window = event("get_availability", &ids);
    window["rawQueryString"] = json!(format!("from={from}&to={to}"));
    window["queryStringParameters"] = json!({"from": from, "to": to});
    let (status, availability) = lambda.call("availability", &window).await;
    assert_eq!(status, 200, "availability: {availability}");
    let taken = availability["taken"].as_array().expect("availability lists what is taken");
    let ours = taken.iter().find(|t| t["status"] == "CONFIRMED").unwrap_or_else(|| panic!("not taken: {availability}"));
    assert_eq!(ours["quantity"], 1, "{availability}");
    assert_eq!(
        (ours["start"].as_str().map(|s| s.parse::<chrono::DateTime<chrono::Utc>>().unwrap())),
        Some(start.parse().unwrap()),
        "{availability}"
    );

    // reserve: releasing a booking cancels it.
    let (status, released) = lambda.call("reserve", &event("release_reservation", &ids)).await;
    assert_eq!((status, released["status"].as_str()), (200, Some("CANCELLED")), "release: {released}");

    // intent-worker: a one-step booking of an upstream seat answers 202, its intent
    // message goes to the intents queue, and the worker, given it in an SQS batch
    // beside a message it cannot read, books the seat upstream once and reports only
    // the unreadable message as a batch item failure.
    let mut seat_resource = event("create_resource", &[]);
    set_body(&mut seat_resource, &json!({"name": "Library seat 7", "authority": "upstream", "upstream_ref": "seat-7"}));
    let (status, seat) = lambda.call("admin", &seat_resource).await;
    assert_eq!(status, 201, "create upstream resource: {seat}");
    let mut booking = event("create_reservation", &[]);
    booking["headers"]["idempotency-key"] = json!("7d0c9f7e-create-reservation-0002");
    set_body(&mut booking, &json!({"resource_id": seat["id"], "start": start, "end": end, "confirm": true}));
    let (status, booked) = lambda.call("reserve", &booking).await;
    assert_eq!((status, booked["status"].as_str()), (202, Some("CONFIRMING")), "upstream booking: {booked}");
    let booking_id = uuid_of(&booked["id"]);
    let sent = moto.drain(&intents_queue).await;
    assert_eq!(sent.len(), 1, "reserve published the intent message after commit: {sent:?}");
    let batch_ids =
        [(RESERVATION_PLACEHOLDER, booking_id), (INTENT_PLACEHOLDER, uuid_of(&sent[0]["data"]["intent_id"]))];
    let batch = event("sqs_intents_batch", &batch_ids);
    let response = lambda.invoke("intent-worker", &batch).await;
    assert_eq!(
        response,
        json!({"batchItemFailures": [{"itemIdentifier": batch["Records"][1]["messageId"]}]}),
        "partial batch response"
    );
    let booking_ids = [(RESOURCE_PLACEHOLDER, uuid_of(&seat["id"])), (RESERVATION_PLACEHOLDER, booking_id)];
    let (status, settled) = lambda.call("availability", &event("get_reservation", &booking_ids)).await;
    assert_eq!((status, settled["status"].as_str()), (200, Some("CONFIRMED")), "upstream booking: {settled}");
    assert_eq!(settled["intent"]["state"], "SUCCEEDED", "{settled}");
    assert_eq!(upstream.with(|s| s.posts), 1);

    // The health check needs no identity; sent with the CLI, from the fixture file as is.
    let (status, health) = http_reply("availability", &lambda.invoke_with_cli("availability", &fixture_path("health")));
    assert_eq!((status, health), (200, json!({"status": "ok"})));

    // Without the authorizer's claims, a route that needs an identity refuses.
    let mut anonymous = event("get_reservation", &ids);
    anonymous["requestContext"].as_object_mut().unwrap().remove("authorizer");
    let (status, problem) = lambda.call("availability", &anonymous).await;
    assert_eq!(status, 401, "anonymous: {problem}");

    // reserve, confirm and the intent worker published their events before they
    // answered: the reservations' are all out before any sweep, the upstream
    // booking's confirmation among them.
    let (db, connection) = tokio_postgres::connect(&database_url, NoTls).await.unwrap();
    tokio::spawn(connection);
    let unpublished = |subject: Uuid| {
        let db = &db;
        async move {
            let sql = "SELECT count(*) FROM outbox WHERE subject_id = $1 AND published_at IS NULL";
            db.query_one(sql, &[&subject]).await.unwrap().get::<_, i64>(0)
        }
    };
    assert_eq!(unpublished(reservation_id).await, 0, "reserve's and confirm's events were published by them");
    assert_eq!(unpublished(booking_id).await, 0, "the intent worker's confirmation was published by it");
    let confirmed: i64 = db
        .query_one(
            "SELECT count(*) FROM outbox WHERE subject_id = $1 AND kind = 'reservation.confirmed'",
            &[&booking_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(confirmed, 1, "the intent worker wrote the upstream booking's confirmation");
    drop(db);

    // sweeper: the scheduled event relays what is left to the events queue (nothing).
    let scheduled: Value = serde_json::from_str(&std::fs::read_to_string(fixture_path("scheduled")).unwrap()).unwrap();
    let report = lambda.invoke("sweeper", &scheduled).await;
    assert_eq!(report["failed"], json!([]), "sweep report: {report}");
    assert_eq!(report["events"]["failed"], 0, "sweep report: {report}");
    eprintln!("sweep report: {report}");

    // notifier: a batch of the (FIFO) events queue; no endpoint wants its event, and the
    // message that is no event is the one batch item failure.
    let batch = event("sqs_events_batch", &[]);
    let response = lambda.invoke("notifier", &batch).await;
    assert_eq!(
        response,
        json!({"batchItemFailures": [{"itemIdentifier": batch["Records"][1]["messageId"]}]}),
        "notifier's partial batch response"
    );
    // migrate: CloudFormation's Create of the Migrations resource, answered at its
    // ResponseURL (the database is migrated already, so nothing is pending).
    let s3 = crate::migrations_on_deploy::ResponseUrl::start().await;
    let create = crate::migrations_on_deploy::request("Create", &s3.url("smoke-create"), "smoke-create");
    let sent = lambda.invoke("migrate", &create).await;
    assert_eq!((&sent["Status"], &sent["Data"]), (&json!("SUCCESS"), &json!({"Applied": "0"})), "{sent}");
    let received = s3.received();
    assert_eq!(received.len(), 1, "one answer: {received:?}");
    assert_eq!((received[0].method.as_str(), received[0].content_type.as_deref()), ("PUT", Some("")));
    assert_eq!(received[0].body, sent);
    eprintln!("invoked every function in {:.1?}", started.elapsed());

    // The functions printed CloudWatch Embedded Metric Format lines for an operator.
    let emf = |name: &str, metric: &str| {
        std::fs::read_to_string(lambda.logs.join(format!("{name}.log")))
            .unwrap_or_default()
            .lines()
            .any(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v.get("_aws").is_some() && v.get(metric).is_some()))
    };
    assert!(emf("reserve", "Holds"), "reserve emits a Holds metric");
    assert!(emf("intent-worker", "IntentsSucceeded"), "the worker counts settled intents");

    // The functions logged JSON, each line naming the invocation and what it touched.
    let log_lines = |name: &str| -> Vec<Value> {
        std::fs::read_to_string(lambda.logs.join(format!("{name}.log")))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v.get("_aws").is_none())
            .collect()
    };
    let reserve_logs = log_lines("reserve");
    let hold_line = reserve_logs
        .iter()
        .find(|l| l["fields"]["message"] == "request" && l["span"]["reservation_id"] == json!(reservation_id))
        .unwrap_or_else(|| panic!("no request line for the hold in {reserve_logs:#?}"));
    assert_eq!(hold_line["span"]["principal"], ALICE, "{hold_line}");
    let invocation =
        hold_line["spans"].as_array().and_then(|s| s.iter().find(|s| s["name"] == "Lambda runtime invoke"));
    assert!(invocation.is_some_and(|s| s["requestId"].is_string()), "the Lambda request id: {hold_line}");
    let worker_logs = log_lines("intent-worker");
    assert!(
        worker_logs.iter().any(|l| l["span"]["intent_id"] == sent[0]["data"]["intent_id"]),
        "the worker's lines name the intent: {worker_logs:#?}"
    );
    assert!(emf("sweeper", "OutboxLagSeconds"), "the sweeper emits its counts and the outbox lag");

    let messages = moto.drain(&events_queue).await;
    let mut delivered: Vec<(String, Uuid)> = messages
        .iter()
        .filter(|m| m["subject_id"] == json!(reservation_id))
        .map(|m| (m["type"].as_str().unwrap().to_string(), uuid_of(&m["id"])))
        .collect();
    delivered.sort();

    // What PostgreSQL holds: the rows the functions wrote, and every event published.
    let (db, connection) = tokio_postgres::connect(&database_url, NoTls).await.unwrap();
    tokio::spawn(connection);
    let row = db.query_one("SELECT name, capacity, created_by FROM resources WHERE id = $1", &[&resource_id]).await;
    let row = row.expect("the resource is stored");
    let stored: (String, i32, String) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(stored, ("Room 101".to_string(), 1, "00000000-0000-0000-0000-0000000000ad".to_string()));
    let row = db.query_one("SELECT status, owner, quantity FROM reservations WHERE id = $1", &[&reservation_id]).await;
    let row = row.expect("the reservation is stored");
    let stored: (String, String, i32) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(stored, ("CANCELLED".to_string(), ALICE.to_string(), 1));
    let rows = db
        .query("SELECT kind, id, published_at IS NOT NULL FROM outbox WHERE subject_id = $1", &[&reservation_id])
        .await
        .unwrap();
    let mut recorded: Vec<(String, Uuid)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    recorded.sort();
    assert!(rows.iter().all(|r| r.get::<_, bool>(2)), "every event of the reservation is marked published");
    let kinds: Vec<&str> = recorded.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["reservation.cancelled", "reservation.confirmed", "reservation.held"]);
    assert_eq!(delivered, recorded, "the queue got exactly the outbox's events, by id");
    let unpublished: i64 =
        db.query_one("SELECT count(*) FROM outbox WHERE published_at IS NULL", &[]).await.unwrap().get(0);
    assert_eq!(unpublished, 0);

    // Passed: the functions go, and so does the database (a failed run leaves it).
    drop(db);
    drop(lambda);
    acceptance::drop_database(&database_url).await;
}
