//! `origin-api`: see `origin_api::cli` for the commands.

use clap::Parser;
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Logs go to stderr: admin commands print their JSON result on stdout. LOG_FORMAT=json gives one JSON object per
    // line (for log shippers); anything else but `text` is refused rather than silently ignored.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only for a person at a terminal: a file or journald gets plain text.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match std::env::var("LOG_FORMAT").as_deref() {
        Ok("json") => logs.json().init(),
        Ok("text") | Err(std::env::VarError::NotPresent) => logs.init(),
        Ok(other) => {
            eprintln!("error: LOG_FORMAT must be text or json, not {other:?}");
            return std::process::ExitCode::from(2);
        }
        Err(std::env::VarError::NotUnicode(_)) => {
            eprintln!("error: LOG_FORMAT must be text or json");
            return std::process::ExitCode::from(2);
        }
    }
    origin_api::cli::run(origin_api::cli::Cli::parse()).await
}
