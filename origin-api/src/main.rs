//! `origin-api`: see `origin_api::cli` for the commands.

use clap::Parser;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Logs go to stderr: admin commands print their JSON result on stdout.
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    origin_api::cli::run(origin_api::cli::Cli::parse()).await
}
