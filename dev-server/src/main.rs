use shared::{AppState, config::Defaults, db};
use std::net::{Ipv4Addr, SocketAddr};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    lambda_http::tracing::init_default_subscriber();
    let state = AppState::from_env(Defaults::DevServer)?;
    let applied = db::connect_and_migrate(&state.config).await?;
    let port: u16 = std::env::var("PORT").ok().map(|p| p.parse()).transpose()?.unwrap_or(3000);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await?;
    tracing::info!(%port, applied, "dev server listening on http://127.0.0.1:{port}");
    tokio::select! {
        () = dev_server::serve(listener, state) => {}
        _ = tokio::signal::ctrl_c() => tracing::info!("shutting down"),
    }
    Ok(())
}
