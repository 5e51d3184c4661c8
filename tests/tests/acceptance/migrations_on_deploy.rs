//! The migration step of a deploy (functions/migrate): a CloudFormation custom resource
//! run against a real PostgreSQL, with a local HTTP server standing in for the
//! pre-signed S3 `ResponseURL` its answer is PUT to. The requests are the documented
//! ones (<https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requests.html>),
//! and every answer is checked as CloudFormation reads it: a `PUT` with an empty
//! `Content-Type`, to the URL as it was signed, of a document with `Status`, `Reason`,
//! `PhysicalResourceId`, `StackId`, `RequestId` and `LogicalResourceId`.

use acceptance::{admin_url, database_prefix, drop_database, fresh_database, url_for};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use migrate::{Migrator, PHYSICAL_ID};
use serde_json::{Value, json};
use shared::config::{Config, ConfigError, Defaults};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_postgres::NoTls;
use uuid::Uuid;

const STACK_ID: &str =
    "arn:aws:cloudformation:eu-west-1:123456789012:stack/reservations/5b4ad3a0-0000-11ee-be56-0242ac120002";
const LOGICAL_ID: &str = "Migrations";

/// Where nothing listens: a pooler, or a database, that cannot be reached.
const UNREACHABLE: &str = "postgres://app:s3cret@127.0.0.1:1/reservations";

/// One request the stand-in for S3 received.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    pub content_type: Option<String>,
    pub content_length: Option<usize>,
    pub body: Value,
}

/// The pre-signed `ResponseURL`: a hyper server on 127.0.0.1 that records every request
/// and answers 200, as S3 does.
pub(crate) struct ResponseUrl {
    base: String,
    received: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ResponseUrl {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ResponseUrl {
    pub async fn start() -> ResponseUrl {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let seen = received.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let seen = seen.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let seen = seen.clone();
                        async move {
                            let header = |name: &str| {
                                req.headers().get(name).map(|v| v.to_str().unwrap_or("(not text)").to_string())
                            };
                            let (content_type, content_length) = (header("content-type"), header("content-length"));
                            let method = req.method().to_string();
                            let target = req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            seen.lock().unwrap().push(Received {
                                method,
                                target,
                                content_type,
                                content_length: content_length.and_then(|l| l.parse().ok()),
                                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                            });
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::new())))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        ResponseUrl { base, received, task }
    }

    /// A pre-signed URL of its own for one request (the query as S3 signs it, with
    /// characters that must arrive escaped exactly as they are).
    pub fn url(&self, request_id: &str) -> String {
        format!(
            "{}/cfn-responses/{request_id}?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20260101%2Feu-west-1%2Fs3%2Faws4_request&X-Amz-Signature=0f3a",
            self.base
        )
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// A request of `kind` (Create, Update, Delete) as CloudFormation sends it.
pub(crate) fn request(kind: &str, response_url: &str, request_id: &str) -> Value {
    let mut event = json!({
        "RequestType": kind,
        "ServiceToken": "arn:aws:lambda:eu-west-1:123456789012:function:reservations-migrate",
        "ResponseURL": response_url,
        "StackId": STACK_ID,
        "RequestId": request_id,
        "LogicalResourceId": LOGICAL_ID,
        "ResourceType": "Custom::Migrations",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:eu-west-1:123456789012:function:reservations-migrate",
            "CodeVersion": "arn:aws:lambda:eu-west-1:123456789012:function:reservations-migrate:7"
        }
    });
    if kind != "Create" {
        event["PhysicalResourceId"] = json!(PHYSICAL_ID);
    }
    if kind == "Update" {
        event["OldResourceProperties"] = json!({
            "ServiceToken": "arn:aws:lambda:eu-west-1:123456789012:function:reservations-migrate",
            "CodeVersion": "arn:aws:lambda:eu-west-1:123456789012:function:reservations-migrate:6"
        });
    }
    event
}

/// The migration step's configuration, as the template gives it: `DATABASE_URL`, and
/// `DATABASE_MIGRATION_URL` when there is a direct connection besides it.
fn migrator(database_url: &str, migration_url: Option<&str>) -> Migrator {
    let (database_url, migration_url) = (database_url.to_string(), migration_url.map(String::from));
    Migrator::new(Config::from_lookup(Defaults::Lambda, move |k| match k {
        "DATABASE_URL" => Some(database_url.clone()),
        "DATABASE_MIGRATION_URL" => migration_url.clone(),
        _ => None,
    }))
}

/// Sends one request of `kind` and returns the one answer the ResponseURL received,
/// after checking it is the PUT CloudFormation reads, with the ids of the request.
async fn answer_of(migrator: &Migrator, kind: &str, budget: Duration) -> Value {
    let s3 = ResponseUrl::start().await;
    let request_id = Uuid::new_v4().to_string();
    let url = s3.url(&request_id);
    let sent = migrator.answer(request(kind, &url, &request_id), budget, "2026/12/06/[$LATEST]0f3a").await;
    let sent = sent.unwrap_or_else(|e| panic!("{kind}: no answer: {e}"));
    let received = s3.received();
    assert_eq!(received.len(), 1, "one answer per request: {received:?}");
    let got = &received[0];
    assert_eq!(got.method, "PUT");
    assert_eq!(got.target, url.trim_start_matches(&s3.base), "the pre-signed URL, unchanged");
    assert_eq!(got.content_type.as_deref(), Some(""), "the empty Content-Type the URL was signed for");
    assert_eq!(got.content_length, Some(serde_json::to_vec(&got.body).unwrap().len()));
    assert_eq!(got.body, sent, "the answer returned is the one sent");
    let body = &got.body;
    assert!(matches!(body["Status"].as_str(), Some("SUCCESS" | "FAILED")), "{body}");
    assert!(body["Reason"].as_str().is_some_and(|r| !r.is_empty()), "every answer gives a reason: {body}");
    assert_eq!(
        (&body["StackId"], &body["RequestId"], &body["LogicalResourceId"]),
        (&json!(STACK_ID), &json!(request_id), &json!(LOGICAL_ID)),
        "{body}"
    );
    assert_eq!(body["PhysicalResourceId"], PHYSICAL_ID, "Create names it; Update and Delete keep it: {body}");
    assert!(serde_json::to_vec(body).unwrap().len() < 4096, "CloudFormation reads at most 4 KB");
    body.clone()
}

/// A database of this run with nothing in it (not cloned from the migrated template).
async fn empty_database() -> String {
    let name = format!("{}{}", database_prefix(), Uuid::new_v4().simple());
    let (admin, connection) = tokio_postgres::connect(&admin_url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    url_for(&name)
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

fn migration_files() -> usize {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations");
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".sql"))
        .count()
}

#[tokio::test]
async fn a_create_migrates_over_the_direct_url_and_an_update_applies_what_is_new_then_both_answer_success() {
    let database = empty_database().await;
    // The functions' URL (a pooler) cannot be reached: the step connects directly.
    let step = migrator(UNREACHABLE, Some(&database));

    let created = answer_of(&step, "Create", Duration::from_secs(60)).await;
    assert_eq!(created["Status"], "SUCCESS", "{created}");
    assert_eq!(created["Data"], json!({"Applied": migration_files().to_string()}), "{created}");
    assert!(created["Reason"].as_str().unwrap().contains("(log stream 2026/12/06/[$LATEST]0f3a)"), "{created}");
    let db = connect(&database).await;
    let tables: i64 = db
        .query_one("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 'reservations'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 1, "the schema is there");

    let updated = answer_of(&step, "Update", Duration::from_secs(60)).await;
    assert_eq!((&updated["Status"], &updated["Data"]), (&json!("SUCCESS"), &json!({"Applied": "0"})), "{updated}");
    drop(db);
    drop_database(&database).await;
}

#[tokio::test]
async fn a_create_whose_database_cannot_be_reached_answers_failed_with_the_reason_and_no_password() {
    let failed = answer_of(&migrator(UNREACHABLE, None), "Create", Duration::from_secs(60)).await;
    assert_eq!(failed["Status"], "FAILED", "{failed}");
    let reason = failed["Reason"].as_str().unwrap();
    assert!(reason.starts_with("cannot migrate the database at 127.0.0.1:1: connection refused"), "{reason}");
    assert!(!reason.contains("s3cret"), "{reason}");
}

#[tokio::test]
async fn a_migration_that_cannot_finish_in_the_time_left_answers_failed_before_the_deadline() {
    let database = fresh_database().await;
    // Another migration step holds the lock and does not finish.
    let other = connect(&database).await;
    other.execute("SELECT pg_advisory_lock($1)", &[&shared::db::MIGRATION_LOCK]).await.unwrap();

    let started = Instant::now();
    let failed = answer_of(&migrator(&database, None), "Update", Duration::from_secs(1)).await;
    assert!(started.elapsed() < Duration::from_secs(4), "answered in {:?}", started.elapsed());
    assert_eq!(failed["Status"], "FAILED", "{failed}");
    assert!(failed["Reason"].as_str().unwrap().contains("did not finish within 1 s"), "{failed}");
    drop(other);
    drop_database(&database).await;
}

#[tokio::test]
async fn a_delete_leaves_the_database_alone_and_answers_success_without_connecting() {
    let deleted = answer_of(&migrator(UNREACHABLE, None), "Delete", Duration::from_secs(60)).await;
    assert_eq!(deleted["Status"], "SUCCESS", "{deleted}");
    assert!(deleted["Reason"].as_str().unwrap().starts_with("nothing done"), "{deleted}");
}

#[tokio::test]
async fn an_update_of_a_rollback_on_a_database_ahead_of_this_code_answers_success_and_applies_nothing() {
    let database = fresh_database().await;
    let db = connect(&database).await;
    db.batch_execute(
        "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) \
         VALUES (9999, 'from_newer_code', '2026-12-06T08:00:00Z', '1')",
    )
    .await
    .unwrap();

    let updated = answer_of(&migrator(&database, None), "Update", Duration::from_secs(60)).await;
    assert_eq!(updated["Status"], "SUCCESS", "{updated}");
    assert!(updated["Reason"].as_str().unwrap().contains("V9999__from_newer_code"), "{updated}");
    drop(db);
    drop_database(&database).await;
}

#[tokio::test]
async fn a_configuration_it_cannot_use_and_a_request_it_cannot_read_are_answered_failed() {
    let unconfigured = Migrator::new(Err(ConfigError::Missing("DATABASE_URL")));
    let failed = answer_of(&unconfigured, "Create", Duration::from_secs(60)).await;
    assert_eq!(failed["Status"], "FAILED", "{failed}");
    assert!(failed["Reason"].as_str().unwrap().starts_with("DATABASE_URL is required"), "{failed}");

    let s3 = ResponseUrl::start().await;
    let mut strange = request("Update", &s3.url("r-1"), "r-1");
    strange["RequestType"] = json!("Rename");
    let sent = unconfigured.answer(strange, Duration::from_secs(60), "").await.unwrap();
    assert_eq!((&sent["Status"], &sent["PhysicalResourceId"]), (&json!("FAILED"), &json!(PHYSICAL_ID)), "{sent}");
    assert_eq!(s3.received().len(), 1);
}

#[tokio::test]
async fn without_a_response_url_or_a_server_behind_it_no_answer_is_claimed() {
    let step = migrator(UNREACHABLE, None);
    let mut nowhere = request("Delete", "", "r-2");
    nowhere.as_object_mut().unwrap().remove("ResponseURL");
    assert!(step.answer(nowhere, Duration::from_secs(60), "").await.is_err());

    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/cfn-responses/r-3", listener.local_addr().unwrap())
    };
    let error = step.answer(request("Delete", &closed, "r-3"), Duration::from_secs(60), "").await.unwrap_err();
    assert!(error.to_string().contains("3 tries"), "{error}");
}

/// template.yaml, with CloudFormation's short-form tags kept as tagged values.
fn template() -> serde_yaml_ng::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `!Tag value` as (tag, value).
fn tagged(value: &serde_yaml_ng::Value) -> (String, &serde_yaml_ng::Value) {
    match value {
        serde_yaml_ng::Value::Tagged(t) => (t.tag.to_string().trim_start_matches('!').to_string(), &t.value),
        other => panic!("{other:?} is no short-form intrinsic function"),
    }
}

fn at<'a>(value: &'a serde_yaml_ng::Value, path: &[&str]) -> &'a serde_yaml_ng::Value {
    path.iter().fold(value, |v, key| v.get(*key).unwrap_or_else(|| panic!("no {key} in {path:?}")))
}

#[test]
fn the_template_migrates_over_a_direct_connection_before_any_other_function_changes() {
    let template = template();
    let resources = at(&template, &["Resources"]).as_mapping().unwrap();
    let migrations = at(&template, &["Resources", "Migrations"]);
    assert_eq!(at(migrations, &["Type"]).as_str(), Some("Custom::Migrations"));
    let property = |name: &str| tagged(at(migrations, &["Properties", name]));
    let (tag, target) = property("ServiceToken");
    assert_eq!((tag.as_str(), target.as_str()), ("Ref", Some("MigrateFunction.Alias")));
    // A new binary (new migrations or SQL functions) is a new version: the Update that migrates.
    let (tag, target) = property("CodeVersion");
    assert_eq!((tag.as_str(), target.as_str()), ("Ref", Some("MigrateFunction.Version")));

    let function = at(&template, &["Resources", "MigrateFunction"]);
    assert_eq!(at(function, &["Metadata", "BuildProperties", "Binary"]).as_str(), Some("migrate"));
    assert!(at(function, &["Properties", "AutoPublishAlias"]).is_string());
    let variables = at(function, &["Properties", "Environment", "Variables"]);
    let (tag, target) = tagged(at(variables, &["DATABASE_URL"]));
    assert_eq!((tag.as_str(), target.as_str()), ("Ref", Some("DatabaseUrl")), "never the proxy");
    let (tag, choice) = tagged(at(variables, &["DATABASE_MIGRATION_URL"]));
    assert_eq!((tag.as_str(), choice[0].as_str()), ("If", Some("HasDatabaseMigrationUrl")));

    for (id, resource) in resources {
        let id = id.as_str().unwrap();
        if resource["Type"].as_str() == Some("AWS::Serverless::Function") && id != "MigrateFunction" {
            assert_eq!(resource["DependsOn"].as_str(), Some("Migrations"), "{id} changes only after the migrations");
        }
    }

    // The proxy requires TLS; behind it the functions prepare no named statements.
    let proxy = at(&template, &["Resources", "RdsProxy"]);
    assert_eq!(
        (at(proxy, &["Condition"]).as_str(), at(proxy, &["Properties", "RequireTLS"]).as_bool()),
        (Some("UseRdsProxy"), Some(true))
    );
    let globals = at(&template, &["Globals", "Function", "Environment", "Variables"]);
    let (tag, choice) = tagged(at(globals, &["DATABASE_URL"]));
    assert_eq!((tag.as_str(), choice[0].as_str()), ("If", Some("UseRdsProxy")));
    assert!(tagged(&choice[1]).1.as_str().unwrap().contains("${RdsProxy.Endpoint}"), "{choice:?}");
    let (tag, choice) = tagged(at(globals, &["DB_STATEMENTS"]));
    assert_eq!(
        (tag.as_str(), choice[0].as_str(), choice[1].as_str()),
        ("If", Some("UnnamedStatements"), Some("unnamed"))
    );
}
