use shared::events::{LogPublisher, SqsPublisher};
use shared::{AppState, config::Defaults, db};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    lambda_http::tracing::init_default_subscriber();
    let state = AppState::from_env(Defaults::DevServer)?;
    let applied = db::connect_and_migrate(&state.config).await?;
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let port: u16 = env("PORT").map(|p| p.parse()).transpose()?.unwrap_or(3000);
    let sweep_every = Duration::from_secs(env("SWEEP_INTERVAL_SECONDS").map(|s| s.parse()).transpose()?.unwrap_or(15));
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await?;
    tracing::info!(%port, applied, "dev server listening on http://127.0.0.1:{port}");
    // Events go to EVENTS_QUEUE_URL when one is given (moto, LocalStack, AWS), else to the log.
    let scheduled = match env("EVENTS_QUEUE_URL") {
        Some(url) => {
            tokio::spawn(dev_server::run_scheduled(state.clone(), SqsPublisher::from_env(url).await, sweep_every))
        }
        None => tokio::spawn(dev_server::run_scheduled(state.clone(), LogPublisher, sweep_every)),
    };
    tokio::select! {
        () = dev_server::serve(listener, state) => {}
        _ = tokio::signal::ctrl_c() => tracing::info!("shutting down"),
    }
    scheduled.abort();
    Ok(())
}
