//! A small SQS client: the operations this service calls, over SQS's AWS JSON 1.0
//! protocol, signed with Signature Version 4 ([`sigv4`]), on the HTTP client the
//! upstream adapter and the notifier use. The functions publish with
//! `SendMessageBatch` (the outbox) and hide a refused message with
//! `ChangeMessageVisibility` (the notifier); the dev server and the tests also receive,
//! delete and create queues. The AWS SDK did the same in about 1.2 MB more of each
//! binary that published, more than the 8 MB budget left `admin` and the intent worker.
//!
//! The client does not retry: a send it could not make leaves its events to the
//! outbox's backoff, a visibility it could not change to the queue's own timeout.

pub mod sigv4;

use crate::config::Secret;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
pub use sigv4::Credentials;
use std::collections::HashMap;
use std::time::Duration;

const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// How long a call may take, besides a receive's own wait.
const TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// An SQS endpoint with the credentials to call it. Cheap to clone: clones share their
/// connections.
#[derive(Clone)]
pub struct Sqs(std::sync::Arc<Endpoint>);

struct Endpoint {
    http: reqwest::Client,
    url: reqwest::Url,
    host: String,
    region: String,
    credentials: Credentials,
}

/// Failures of one call.
#[derive(Debug, thiserror::Error)]
pub enum SqsError {
    /// No answer: the endpoint could not be reached, or the call timed out.
    #[error("SQS {action} had no answer: {reason}")]
    Unreachable { action: &'static str, reason: String },
    /// SQS answered with an error (`code` is its type, such as `QueueDoesNotExist`).
    #[error("SQS refused {action} ({status}): {code}: {message}")]
    Refused { action: &'static str, status: u16, code: String, message: String },
    /// An answer that is not the action's JSON.
    #[error("SQS answered {action} with {status} and what is not its JSON: {reason}")]
    Malformed { action: &'static str, status: u16, reason: String },
}

/// One message of a [`Sqs::send_message_batch`]. `group` and `deduplication` are for
/// FIFO queues only.
#[derive(Serialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct Entry {
    pub id: String,
    pub message_body: String,
    #[serde(rename = "MessageGroupId", skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(rename = "MessageDeduplicationId", skip_serializing_if = "Option::is_none")]
    pub deduplication: Option<String>,
}

/// A message of a batch that SQS did not take.
#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "PascalCase")]
pub struct Refused {
    pub id: String,
    pub code: String,
    #[serde(default)]
    pub message: Option<String>,
}

/// A received message. `attributes` are its system attributes (all of them).
#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "PascalCase")]
pub struct Message {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
    #[serde(default)]
    pub attributes: HashMap<String, String>,
}

impl Sqs {
    /// A client of the endpoint at `endpoint` (`https://sqs.<region>.amazonaws.com`
    /// when `None`). Does no I/O.
    pub fn new(region: String, credentials: Credentials, endpoint: Option<String>) -> Self {
        let endpoint = endpoint.unwrap_or_else(|| format!("https://sqs.{region}.amazonaws.com"));
        let url = reqwest::Url::parse(&endpoint).unwrap_or_else(|e| panic!("the SQS endpoint {endpoint}: {e}"));
        let host = match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_string(),
            (None, _) => panic!("the SQS endpoint {endpoint} names no host"),
        };
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .expect("a client with rustls and compiled-in roots builds");
        Sqs(std::sync::Arc::new(Endpoint { http, url, host, region, credentials }))
    }

    /// The client of a Lambda's environment, built once per process and without I/O:
    /// the region from `AWS_REGION` (or `AWS_DEFAULT_REGION`), the function role's
    /// credentials from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
    /// `AWS_SESSION_TOKEN` (which the Lambda service sets for the life of the execution
    /// environment), and `AWS_ENDPOINT_URL_SQS` (or `AWS_ENDPOINT_URL`) for a local
    /// endpoint such as moto.
    pub fn from_env() -> Self {
        static CLIENT: std::sync::OnceLock<Sqs> = std::sync::OnceLock::new();
        CLIENT
            .get_or_init(|| {
                let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
                let credentials = Credentials {
                    access_key_id: var("AWS_ACCESS_KEY_ID").unwrap_or_default(),
                    secret_access_key: Secret(var("AWS_SECRET_ACCESS_KEY").unwrap_or_default()),
                    session_token: var("AWS_SESSION_TOKEN").map(Secret),
                };
                let region =
                    var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")).unwrap_or_else(|| "us-east-1".into());
                Sqs::new(region, credentials, var("AWS_ENDPOINT_URL_SQS").or_else(|| var("AWS_ENDPOINT_URL")))
            })
            .clone()
    }

    /// Sends up to ten messages; answers those SQS did not take.
    pub async fn send_message_batch(&self, queue_url: &str, entries: &[Entry]) -> Result<Vec<Refused>, SqsError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Sent {
            #[serde(default)]
            failed: Vec<Refused>,
        }
        let request = serde_json::json!({ "QueueUrl": queue_url, "Entries": entries });
        let sent: Sent = self.call("SendMessageBatch", &request, TIMEOUT).await?;
        Ok(sent.failed)
    }

    /// Hides a received message for `seconds` from now.
    pub async fn change_message_visibility(
        &self,
        queue_url: &str,
        receipt: &str,
        seconds: i32,
    ) -> Result<(), SqsError> {
        let request =
            serde_json::json!({ "QueueUrl": queue_url, "ReceiptHandle": receipt, "VisibilityTimeout": seconds });
        self.call::<serde_json::Value>("ChangeMessageVisibility", &request, TIMEOUT).await.map(drop)
    }

    /// Up to `max` messages, waiting up to `wait_seconds` for the first.
    pub async fn receive_message(
        &self,
        queue_url: &str,
        max: i32,
        wait_seconds: i32,
    ) -> Result<Vec<Message>, SqsError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Received {
            #[serde(default)]
            messages: Vec<Message>,
        }
        let request = serde_json::json!({
            "QueueUrl": queue_url,
            "MaxNumberOfMessages": max,
            "WaitTimeSeconds": wait_seconds,
            "MessageSystemAttributeNames": ["All"],
        });
        let wait = Duration::from_secs(u64::try_from(wait_seconds).unwrap_or(0));
        Ok(self.call::<Received>("ReceiveMessage", &request, TIMEOUT + wait).await?.messages)
    }

    pub async fn delete_message(&self, queue_url: &str, receipt: &str) -> Result<(), SqsError> {
        let request = serde_json::json!({ "QueueUrl": queue_url, "ReceiptHandle": receipt });
        self.call::<serde_json::Value>("DeleteMessage", &request, TIMEOUT).await.map(drop)
    }

    /// Creates a queue with these attributes (such as `FifoQueue`) and answers its URL.
    pub async fn create_queue(&self, name: &str, attributes: &[(&str, &str)]) -> Result<String, SqsError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Created {
            queue_url: String,
        }
        let attributes: HashMap<&str, &str> = attributes.iter().copied().collect();
        let request = serde_json::json!({ "QueueName": name, "Attributes": attributes });
        Ok(self.call::<Created>("CreateQueue", &request, TIMEOUT).await?.queue_url)
    }

    /// One signed call of `action`.
    async fn call<T: DeserializeOwned>(
        &self,
        action: &'static str,
        request: &impl Serialize,
        timeout: Duration,
    ) -> Result<T, SqsError> {
        let Endpoint { http, url, host, region, credentials } = self.0.as_ref();
        let body = serde_json::to_vec(request).expect("a request serializes");
        let target = format!("AmazonSQS.{action}");
        let signed = sigv4::sign(
            &sigv4::Request {
                host,
                path: url.path(),
                content_type: CONTENT_TYPE,
                target: &target,
                body: &body,
                region,
                service: "sqs",
            },
            credentials,
            chrono::Utc::now(),
        );
        let mut call = http
            .post(url.clone())
            .timeout(timeout)
            .header(http::header::HOST, host)
            .header(http::header::CONTENT_TYPE, CONTENT_TYPE)
            .header("x-amz-target", &target)
            .header("x-amz-date", &signed.amz_date)
            .header(http::header::AUTHORIZATION, &signed.authorization);
        if let Some(token) = &credentials.session_token {
            call = call.header("x-amz-security-token", token.expose());
        }
        let unreachable = |e: reqwest::Error| SqsError::Unreachable { action, reason: with_sources(&e) };
        let response = call.body(body).send().await.map_err(unreachable)?;
        let status = response.status().as_u16();
        let answer = response.bytes().await.map_err(unreachable)?;
        let malformed = |e: serde_json::Error| SqsError::Malformed { action, status, reason: e.to_string() };
        if (200..300).contains(&status) {
            // An action with nothing to answer may answer an empty body.
            let answer: &[u8] = if answer.is_empty() { b"{}" } else { &answer };
            return serde_json::from_slice(answer).map_err(malformed);
        }
        #[derive(Deserialize)]
        struct Problem {
            #[serde(rename = "__type", default)]
            kind: String,
            // SQS spells it `message`; some answers (moto's) carry `Message` too.
            #[serde(default)]
            message: Option<String>,
            #[serde(rename = "Message", default)]
            message_capitalized: Option<String>,
        }
        let problem: Problem = serde_json::from_slice(&answer).map_err(malformed)?;
        // `__type` is the shape's id, such as `com.amazonaws.sqs#QueueDoesNotExist`.
        let code = problem.kind.rsplit('#').next().unwrap_or_default().to_string();
        let message = problem.message.or(problem.message_capitalized).unwrap_or_default();
        Err(SqsError::Refused { action, status, code, message })
    }
}

/// An error with its causes: reqwest's own message is only "error sending request".
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The read() calls this thread has made so far (`syscr` of /proc/thread-self/io):
    /// the thread's own, so the other tests running beside it do not count.
    fn reads_so_far() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").expect("Linux's per-thread I/O counters");
        io.lines().find_map(|l| l.strip_prefix("syscr: ")).and_then(|n| n.parse().ok()).expect("a syscr line")
    }

    #[test]
    fn building_the_client_reads_no_file() {
        let credentials = Credentials { access_key_id: "a".into(), secret_access_key: "b".into(), session_token: None };
        let before = reads_so_far();
        let client = Sqs::new("eu-west-1".into(), credentials, None);
        // Reading the counters once takes a read() or two of its own.
        let reads = reads_so_far() - before;
        assert!(reads <= 4, "building the client made {reads} read() calls");
        assert_eq!(client.0.host, "sqs.eu-west-1.amazonaws.com");
    }

    #[test]
    fn the_signed_host_names_the_port_the_request_goes_to() {
        let credentials = Credentials { access_key_id: "a".into(), secret_access_key: "b".into(), session_token: None };
        let client = Sqs::new("us-east-1".into(), credentials.clone(), Some("http://127.0.0.1:5000".into()));
        assert_eq!(client.0.host, "127.0.0.1:5000");
        let client = Sqs::new("us-east-1".into(), credentials, Some("https://sqs.us-east-1.amazonaws.com:443".into()));
        assert_eq!(client.0.host, "sqs.us-east-1.amazonaws.com", "a scheme's own port is not in its Host");
    }
}
