//! `shortlink`: client and operator CLI for the Shortlink service.
//!
//! `sign` builds a dynamic link (spec 4.7) and `verify` evaluates a token the way the edge does. Each subcommand
//! lives in its own module under `commands/`; `main` only parses arguments and maps errors to exit codes.

mod commands;
mod parse;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "shortlink",
    version,
    about = "Shortlink client and operator CLI"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build a dynamic link: encrypt a destination under a group key and print the URL.
    Sign(commands::sign::SignArgs),
    /// Evaluate a dynamic-link token and print {"valid", "redirect_to", "reason"} as JSON.
    Verify(commands::verify::VerifyArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Sign(args) => commands::sign::run(args),
        Command::Verify(args) => commands::verify::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("shortlink: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}
