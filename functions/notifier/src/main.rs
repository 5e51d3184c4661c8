use lambda_runtime::{run, service_fn, tracing};
use shared::AppState;
use shared::config::{Defaults, exit_on_error};
use shared::notify::Sender;

#[tokio::main]
async fn main() {
    tracing::init_default_subscriber();
    let state = exit_on_error("notifier", AppState::from_env(Defaults::Lambda));
    let notifier = notifier::Notifier { state, sender: Sender::new(Sender::DEFAULT_TIMEOUT) };
    exit_on_error("notifier", run(service_fn(|event| notifier::handler(&notifier, event))).await)
}
