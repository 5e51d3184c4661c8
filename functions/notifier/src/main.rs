use lambda_runtime::{run, service_fn, tracing};
use shared::AppState;
use shared::config::{Defaults, exit_on_error};

#[tokio::main]
async fn main() {
    tracing::init_default_subscriber();
    let state = exit_on_error("notifier", AppState::from_env(Defaults::Lambda));
    let notifier = notifier::Notifier::from_env(state);
    exit_on_error("notifier", run(service_fn(|event| notifier::handler(&notifier, event))).await)
}
