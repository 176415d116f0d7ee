//! One module per subcommand, each with its clap `Args` struct and a `run` function.

use std::fmt;
use std::io::Write as _;

use clap::Args;
use shared_crypto::GroupKey;

use crate::parse;

pub(crate) mod sign;
pub(crate) mod verify;

/// `--group-key`, the same for `sign` and `verify`.
#[derive(Args)]
pub(crate) struct GroupKeyArg {
    /// The group's key (base64url, 32 bytes), from the dashboard's group settings.
    // A base64url key starts with `-` one time in 64: it is a value, never an option.
    #[arg(
        long,
        env = "SHORTLINK_GROUP_KEY",
        hide_env_values = true,
        allow_hyphen_values = true,
        value_parser = parse::group_key
    )]
    pub(crate) group_key: GroupKey,
}

/// A failed command: bad input (exit 2, like clap's usage errors) or a failure while running (exit 1).
#[derive(Debug)]
pub(crate) enum CliError {
    Input(String),
    Runtime(String),
}

impl CliError {
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            CliError::Input(_) => 2,
            CliError::Runtime(_) => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Input(msg) | CliError::Runtime(msg) => f.write_str(msg),
        }
    }
}

/// Writes one line to stdout; a closed pipe is an error, not a panic.
fn print_line(line: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| CliError::Runtime(format!("writing output: {e}")))
}

/// Seconds since the UNIX epoch from the system clock.
fn unix_now() -> Result<i64, CliError> {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| CliError::Runtime("system clock is before 1970".into()))?;
    i64::try_from(since_epoch.as_secs())
        .map_err(|_| CliError::Runtime("system clock out of range".into()))
}
