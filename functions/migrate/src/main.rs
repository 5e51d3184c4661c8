use lambda_runtime::{run, service_fn, tracing};
use shared::config::exit_on_error;

#[tokio::main]
async fn main() {
    tracing::init_default_subscriber();
    // A configuration it cannot use is answered to CloudFormation as FAILED rather than
    // ending the process: an unanswered custom resource holds the deploy for an hour.
    let migrator = migrate::Migrator::from_env();
    exit_on_error("migrate", run(service_fn(|event| migrate::handler(&migrator, event))).await)
}
