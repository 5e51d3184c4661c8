//! SQS through the AWS SDK (aws-sdk-sqs): the calls this service makes, with the SDK's
//! standard retry mode (throttling, 5xx, a connection the thawed environment finds
//! broken), its endpoint resolution (partition, FIPS, dual-stack), its clock-skew
//! correction and its request ids in every error. The functions publish with
//! `SendMessageBatch` (the outbox) and hide a refused message with
//! `ChangeMessageVisibility` (the notifier); the dev server and the tests also receive,
//! delete and create queues (against moto).
//!
//! The client is built without I/O, as a cold start needs: no profile file, no
//! instance metadata, no system certificate store (see [`trust_store`]).

pub use aws_sdk_sqs::config::Credentials;
use aws_sdk_sqs::config::{BehaviorVersion, Region, retry::RetryConfig, timeout::TimeoutConfig};
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::operation::RequestId;
/// A message of a batch that SQS did not take: its `id`, `code` and `message`.
pub use aws_sdk_sqs::types::BatchResultErrorEntry as Refused;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName, SendMessageBatchRequestEntry};
use std::collections::HashMap;
use std::time::Duration;

/// How long a call may take, its retries included, besides a receive's own wait.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The first wait before a retry (the standard mode's is 1 s, doubling): a function
/// publishes before it answers, so the retries stay within a request's time; what still
/// fails after the mode's three attempts waits in the outbox for the relay's backoff.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// An SQS client. Cheap to clone: clones share their connections.
#[derive(Clone, Debug)]
pub struct Sqs(aws_sdk_sqs::Client);

/// A call that failed after the SDK's retries: `reason` names SQS's error code and
/// message with the request id, or why no answer came.
#[derive(Debug, thiserror::Error)]
#[error("SQS {action} failed: {reason}")]
pub struct SqsError {
    pub action: &'static str,
    pub reason: String,
}

impl SqsError {
    fn of<E>(action: &'static str, error: SdkError<E, aws_sdk_sqs::config::http::HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let reason = match error.as_service_error() {
            Some(refused) => {
                // The error's type and message (`QueueDoesNotExist: ...`); an error the
                // model does not name shows only its code, so its message is added.
                let mut reason = refused.to_string();
                if let Some(message) = refused.message().filter(|m| !reason.contains(m)) {
                    reason = format!("{reason}: {message}");
                }
                format!("{reason} (request id {})", error.request_id().unwrap_or("none"))
            }
            None => DisplayErrorContext(&error).to_string(),
        };
        SqsError { action, reason }
    }
}

/// One message of a [`Sqs::send_message_batch`]. `group` and `deduplication` are for
/// FIFO queues only.
#[derive(Debug)]
pub struct Entry {
    pub id: String,
    pub message_body: String,
    pub group: Option<String>,
    pub deduplication: Option<String>,
}

impl Sqs {
    /// A client of SQS in `region`, at `endpoint` when given (moto), else where the
    /// SDK resolves the region's endpoint (`use_fips`, `use_dual_stack` as asked).
    /// Does no I/O.
    pub fn new(region: String, credentials: Credentials, endpoint: Option<String>) -> Self {
        Self::with(region, credentials, endpoint, false, false)
    }

    fn with(
        region: String,
        credentials: Credentials,
        endpoint: Option<String>,
        use_fips: bool,
        use_dual_stack: bool,
    ) -> Self {
        use aws_smithy_http_client::tls::{Provider, TlsContext, rustls_provider::CryptoMode};
        let tls = TlsContext::builder().with_trust_store(trust_store()).build().expect("a trust store is all it takes");
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .tls_context(tls)
            .build_https();
        let timeouts =
            TimeoutConfig::builder().connect_timeout(CONNECT_TIMEOUT).operation_timeout(CALL_TIMEOUT).build();
        let mut config = aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(region))
            .credentials_provider(credentials)
            .retry_config(RetryConfig::standard().with_initial_backoff(FIRST_BACKOFF))
            .timeout_config(timeouts)
            .use_fips(use_fips)
            .use_dual_stack(use_dual_stack)
            .http_client(http);
        config.set_endpoint_url(endpoint);
        Sqs(aws_sdk_sqs::Client::from_conf(config.build()))
    }

    /// The client of a Lambda's environment, built once per process and without I/O:
    /// the region from `AWS_REGION` (or `AWS_DEFAULT_REGION`), the function role's
    /// credentials from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
    /// `AWS_SESSION_TOKEN` (which the Lambda service sets for the life of the execution
    /// environment), `AWS_USE_FIPS_ENDPOINT` and `AWS_USE_DUALSTACK_ENDPOINT`, and
    /// `AWS_ENDPOINT_URL_SQS` (or `AWS_ENDPOINT_URL`) for a local endpoint such as moto.
    pub fn from_env() -> Self {
        static CLIENT: std::sync::OnceLock<Sqs> = std::sync::OnceLock::new();
        CLIENT
            .get_or_init(|| {
                let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
                let on = |name: &str| var(name).is_some_and(|v| v.eq_ignore_ascii_case("true"));
                let credentials = Credentials::new(
                    var("AWS_ACCESS_KEY_ID").unwrap_or_default(),
                    var("AWS_SECRET_ACCESS_KEY").unwrap_or_default(),
                    var("AWS_SESSION_TOKEN"),
                    None,
                    "environment",
                );
                let region =
                    var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")).unwrap_or_else(|| "us-east-1".into());
                let endpoint = var("AWS_ENDPOINT_URL_SQS").or_else(|| var("AWS_ENDPOINT_URL"));
                Sqs::with(region, credentials, endpoint, on("AWS_USE_FIPS_ENDPOINT"), on("AWS_USE_DUALSTACK_ENDPOINT"))
            })
            .clone()
    }

    /// Sends up to ten messages; answers those SQS did not take.
    pub async fn send_message_batch(&self, queue_url: &str, entries: &[Entry]) -> Result<Vec<Refused>, SqsError> {
        let entries = entries
            .iter()
            .map(|e| {
                SendMessageBatchRequestEntry::builder()
                    .id(&e.id)
                    .message_body(&e.message_body)
                    .set_message_group_id(e.group.clone())
                    .set_message_deduplication_id(e.deduplication.clone())
                    .build()
                    .map_err(|e| SqsError { action: "SendMessageBatch", reason: e.to_string() })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let call = self.0.send_message_batch().queue_url(queue_url).set_entries(Some(entries));
        Ok(call.send().await.map_err(|e| SqsError::of("SendMessageBatch", e))?.failed)
    }

    /// Hides a received message for `seconds` from now.
    pub async fn change_message_visibility(
        &self,
        queue_url: &str,
        receipt: &str,
        seconds: i32,
    ) -> Result<(), SqsError> {
        let call = self.0.change_message_visibility().queue_url(queue_url).receipt_handle(receipt);
        call.visibility_timeout(seconds).send().await.map(drop).map_err(|e| SqsError::of("ChangeMessageVisibility", e))
    }

    /// Up to `max` messages, waiting up to `wait_seconds` for the first.
    pub async fn receive_message(
        &self,
        queue_url: &str,
        max: i32,
        wait_seconds: i32,
    ) -> Result<Vec<Message>, SqsError> {
        let wait = Duration::from_secs(u64::try_from(wait_seconds).unwrap_or(0));
        let long_poll = TimeoutConfig::builder().operation_timeout(CALL_TIMEOUT + wait).build();
        let received = self
            .0
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(max)
            .wait_time_seconds(wait_seconds)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .customize()
            .config_override(aws_sdk_sqs::Config::builder().timeout_config(long_poll))
            .send()
            .await
            .map_err(|e| SqsError::of("ReceiveMessage", e))?;
        Ok(received
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(|m| Message {
                message_id: m.message_id.unwrap_or_default(),
                receipt_handle: m.receipt_handle.unwrap_or_default(),
                body: m.body.unwrap_or_default(),
                attributes: m
                    .attributes
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(name, value)| (name.as_str().to_string(), value))
                    .collect(),
            })
            .collect())
    }

    pub async fn delete_message(&self, queue_url: &str, receipt: &str) -> Result<(), SqsError> {
        let call = self.0.delete_message().queue_url(queue_url).receipt_handle(receipt);
        call.send().await.map(drop).map_err(|e| SqsError::of("DeleteMessage", e))
    }

    /// Creates a queue with these attributes (such as `FifoQueue`) and answers its URL.
    pub async fn create_queue(&self, name: &str, attributes: &[(&str, &str)]) -> Result<String, SqsError> {
        let attributes = attributes.iter().map(|&(k, v)| (QueueAttributeName::from(k), v.to_string())).collect();
        let call = self.0.create_queue().queue_name(name).set_attributes(Some(attributes));
        Ok(call.send().await.map_err(|e| SqsError::of("CreateQueue", e))?.queue_url.unwrap_or_default())
    }
}

/// A received message. `attributes` are its system attributes (all of them).
#[derive(Debug, Clone)]
pub struct Message {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
    pub attributes: HashMap<String, String>,
}

/// Mozilla's roots, compiled in, as the database and upstream clients trust them. The
/// SDK's default store is the system's, which it reads when the client is built (146
/// files of /etc/ssl/certs here, 1-4 ms of a cold start's init). The SDK takes extra
/// roots as PEM only, so each root's DER is wrapped in PEM; it parses them back when it
/// makes its TLS configuration.
fn trust_store() -> aws_smithy_http_client::tls::TrustStore {
    let mut store = aws_smithy_http_client::tls::TrustStore::empty();
    for pem in roots_as_pem() {
        store.add_pem_certificate(pem);
    }
    store
}

fn roots_as_pem() -> impl Iterator<Item = String> {
    use base64::Engine;
    webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().map(|root| {
        let body = base64::engine::general_purpose::STANDARD.encode(root.as_ref());
        let mut pem = String::with_capacity(body.len() + body.len() / 64 + 64);
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in body.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
        pem
    })
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
    fn building_the_client_reads_no_file_and_connects_nowhere() {
        let endpoint = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        endpoint.set_nonblocking(true).unwrap();
        let url = format!("http://{}", endpoint.local_addr().unwrap());
        let before = reads_so_far();
        let client = Sqs::new("eu-west-1".into(), Credentials::new("a", "b", None, None, "test"), Some(url));
        // Reading the counters once takes a read() or two of its own.
        let reads = reads_so_far() - before;
        assert!(reads <= 4, "building the client made {reads} read() calls");
        let accepted = endpoint.accept().map(drop).map_err(|e| e.kind());
        assert_eq!(accepted, Err(std::io::ErrorKind::WouldBlock), "building the client connected to its endpoint");
        drop(client);
    }

    #[test]
    fn each_root_reads_back_from_its_pem_as_the_same_certificate() {
        use rustls::pki_types::{CertificateDer, pem::PemObject};
        let pems: Vec<String> = roots_as_pem().collect();
        assert!(pems.len() > 100, "Mozilla's store has well over a hundred roots");
        for (pem, root) in pems.iter().zip(webpki_root_certs::TLS_SERVER_ROOT_CERTS) {
            let read = CertificateDer::from_pem_slice(pem.as_bytes()).expect("a PEM certificate");
            assert_eq!(read.as_ref(), root.as_ref());
        }
    }
}
