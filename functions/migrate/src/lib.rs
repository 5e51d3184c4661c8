//! The migration step of a deploy, as a CloudFormation custom resource (template.yaml's
//! `Migrations`). On Create and Update it applies the pending migrations and every SQL
//! function ([`shared::db::connect_and_migrate`], over `DATABASE_MIGRATION_URL`, a
//! direct connection, when it is set); on Delete it does nothing, since deleting a stack
//! never drops data. Whatever happens it answers: the response document goes by `PUT`
//! to the request's pre-signed `ResponseURL`, with an empty `Content-Type` (the one the
//! URL was signed for), before the function's own deadline. A failed migration then
//! fails the deploy at once, and CloudFormation never waits its hour for an answer.
//!
//! The protocol: <https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref.html>.

use aws_lambda_events::event::cloudformation::{
    CloudFormationCustomResourceRequest as Request, CloudFormationCustomResourceResponse as Response,
    CloudFormationCustomResourceResponseStatus as Status,
};
use lambda_runtime::{Error, LambdaEvent};
use serde::Deserialize;
use serde_json::Value;
use shared::config::{Config, ConfigError, Defaults};
use shared::db;
use std::time::{Duration, SystemTime};

/// The physical id a Create answers with; Update and Delete answer with the one they
/// were given, so the resource is never replaced.
pub const PHYSICAL_ID: &str = "database-schema";

/// The time kept back from the function's deadline for the answer (three tries of
/// [`PUT_TIMEOUT`] and the pauses between them), or half the time left when that is
/// less than twice this (a function run with a short timeout, as an emulator runs it).
pub const ANSWER_MARGIN: Duration = Duration::from_secs(20);

/// The migrations' time when the invocation carries no deadline still ahead of it.
pub const NO_DEADLINE_BUDGET: Duration = Duration::from_secs(60);

const PUT_TIMEOUT: Duration = Duration::from_secs(5);
const PUT_TRIES: u32 = 3;

/// The response document must stay under 4,096 bytes; the reason is cut to this many
/// characters (the ids fill most of the rest).
const MAX_REASON: usize = 1_000;

/// What one request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Create or Update: the pending migrations (this many) and every SQL function were
    /// applied.
    Migrated { applied: usize },
    /// The database holds a migration this code does not have: newer code migrated it
    /// and this is a deploy being rolled back. Nothing was applied (migrations are never
    /// undone), and the rollback goes on.
    DatabaseAhead { migration: String },
    /// Delete: the database and its data were left as they are.
    Left,
    /// The deploy must stop: the configuration, the connection, a migration or a
    /// function failed, the time ran out, or the request could not be read. What
    /// committed before stays applied.
    Failed { reason: String },
}

impl Outcome {
    fn status(&self) -> Status {
        match self {
            Outcome::Migrated { .. } | Outcome::DatabaseAhead { .. } | Outcome::Left => Status::Success,
            Outcome::Failed { .. } => Status::Failed,
        }
    }

    fn reason(&self) -> String {
        match self {
            Outcome::Migrated { applied } => format!("applied {applied} pending migration(s) and every SQL function"),
            Outcome::DatabaseAhead { migration } => format!(
                "the database holds migration {migration}, which this code does not have (a deploy being rolled \
                 back): nothing applied, since migrations are never undone"
            ),
            Outcome::Left => "nothing done: deleting the stack leaves the database and its data as they are".into(),
            Outcome::Failed { reason } => reason.clone(),
        }
    }
}

/// The ids every request carries, read field by field so that a request the typed
/// reading refuses is still answered.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Ids {
    #[serde(rename = "ResponseURL")]
    response_url: String,
    #[serde(default)]
    stack_id: String,
    #[serde(default)]
    request_id: String,
    #[serde(default)]
    logical_resource_id: String,
    #[serde(default)]
    physical_resource_id: Option<String>,
}

/// Built once at cold start: the configuration (or why it cannot be used, which is
/// then the answer to every request) and the HTTP client of the answers.
pub struct Migrator {
    config: Result<Config, ConfigError>,
    http: reqwest::Client,
}

impl Migrator {
    pub fn from_env() -> Self {
        Self::new(Config::from_env(Defaults::Lambda))
    }

    pub fn new(config: Result<Config, ConfigError>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(PUT_TIMEOUT)
            .build()
            .expect("a client with a timeout and the built-in roots always builds");
        Self { config, http }
    }

    /// Answers one request, with `budget` for the migrations; returns the document it
    /// sent. An error means no answer reached CloudFormation: the request named no
    /// `ResponseURL`, or every try of the `PUT` failed.
    pub async fn answer(&self, event: Value, budget: Duration, log_stream: &str) -> Result<Value, Error> {
        let ids = Ids::deserialize(&event)
            .map_err(|e| format!("no answer is possible: the request has no ResponseURL ({e})"))?;
        let outcome = match Request::<Value, Value>::deserialize(&event) {
            Ok(Request::Create(_)) | Ok(Request::Update(_)) => self.migrate(budget).await,
            Ok(Request::Delete(_)) => Outcome::Left,
            Ok(_) => Outcome::Failed { reason: "a request type this function does not know".into() },
            Err(e) => Outcome::Failed { reason: format!("the request is not one CloudFormation sends: {e}") },
        };
        match &outcome {
            Outcome::Failed { reason } => {
                tracing::error!(request_id = %ids.request_id, %reason, "migration step failed")
            }
            _ => tracing::info!(request_id = %ids.request_id, reason = %outcome.reason(), "migration step done"),
        }
        let document = serde_json::to_value(response(&ids, &outcome, log_stream))?;
        self.put(&ids.response_url, serde_json::to_vec(&document)?).await?;
        Ok(document)
    }

    async fn migrate(&self, budget: Duration) -> Outcome {
        let config = match &self.config {
            Ok(config) => config,
            Err(e) => return Outcome::Failed { reason: e.to_string() },
        };
        let at = config.database.migration_address();
        match tokio::time::timeout(budget, db::connect_and_migrate(&config.database)).await {
            Ok(Ok(applied)) => Outcome::Migrated { applied },
            Ok(Err(e)) => match e.database_is_ahead() {
                Some(migration) => Outcome::DatabaseAhead { migration },
                None => Outcome::Failed { reason: format!("cannot migrate the database at {at}: {}", e.reason()) },
            },
            Err(_) => Outcome::Failed {
                reason: format!(
                    "the migrations at {at} did not finish within {} s; those that committed stay applied",
                    budget.as_secs()
                ),
            },
        }
    }

    /// The answer's `PUT`, tried again after a transport error or a 5xx.
    async fn put(&self, url: &str, body: Vec<u8>) -> Result<(), Error> {
        let mut last = String::new();
        for attempt in 0..PUT_TRIES {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt))).await;
            }
            let sent = self.http.put(url).header(reqwest::header::CONTENT_TYPE, "").body(body.clone()).send().await;
            match sent {
                Ok(answer) if answer.status().is_success() => return Ok(()),
                Ok(answer) if answer.status().is_client_error() => {
                    return Err(format!("the ResponseURL refused the answer: {}", answer.status()).into());
                }
                Ok(answer) => last = answer.status().to_string(),
                Err(e) => last = e.without_url().to_string(),
            }
        }
        Err(format!("the answer could not be sent to the ResponseURL ({PUT_TRIES} tries; the last: {last})").into())
    }
}

/// The response document of an outcome.
fn response(ids: &Ids, outcome: &Outcome, log_stream: &str) -> Response {
    let mut reason = outcome.reason();
    if !log_stream.is_empty() {
        reason = format!("{reason} (log stream {log_stream})");
    }
    if reason.chars().count() > MAX_REASON {
        reason = reason.chars().take(MAX_REASON - 3).chain("...".chars()).collect();
    }
    let mut response = Response::default();
    response.status = outcome.status();
    response.reason = Some(reason);
    response.physical_resource_id = ids.physical_resource_id.clone().unwrap_or_else(|| PHYSICAL_ID.into());
    response.stack_id = ids.stack_id.clone();
    response.request_id = ids.request_id.clone();
    response.logical_resource_id = ids.logical_resource_id.clone();
    if let Outcome::Migrated { applied } = outcome {
        response.data.insert("Applied".into(), applied.to_string());
    }
    response
}

/// The Lambda handler: [`Migrator::answer`] with the time left before the function's
/// deadline, less what [`ANSWER_MARGIN`] keeps for the answer.
pub async fn handler(migrator: &Migrator, event: LambdaEvent<Value>) -> Result<Value, Error> {
    let left = event.context.deadline().duration_since(SystemTime::now()).unwrap_or_default();
    // An invocation never starts past its deadline in Lambda; one that does was given no
    // real deadline (cargo-lambda's emulator sends such), and gets a bounded time anyway.
    let budget = if left.is_zero() { NO_DEADLINE_BUDGET } else { budget(left) };
    tracing::info!(time_left_ms = left.as_millis() as u64, budget_ms = budget.as_millis() as u64, "migration step");
    migrator.answer(event.payload, budget, &event.context.env_config.log_stream).await
}

/// The time the migrations get of `left`: all but [`ANSWER_MARGIN`], and at least half.
pub fn budget(left: Duration) -> Duration {
    left.saturating_sub(ANSWER_MARGIN).max(left / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_migrations_get_all_but_the_answers_margin_and_at_least_half_the_time_left() {
        assert_eq!(budget(Duration::from_secs(900)), Duration::from_secs(880));
        assert_eq!(budget(Duration::from_secs(40)), Duration::from_secs(20));
        assert_eq!(budget(Duration::from_secs(30)), Duration::from_secs(15));
        assert_eq!(budget(Duration::ZERO), Duration::ZERO);
    }
}
