//! `shortlink verify`: evaluate a token as the edge would and print the verdict as one JSON object.

use clap::Args;
use serde::Serialize;
use shared_crypto::{DomainBlocklist, TokenCipher};

use super::{CliError, GroupKeyArg, print_line, unix_now};
use crate::parse;

#[derive(Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    key: GroupKeyArg,
    /// Evaluate at this time (UNIX seconds) instead of the system clock.
    #[arg(long, allow_negative_numbers = true)]
    now: Option<i64>,
    /// A blocked destination domain (blocks its subdomains too). Repeatable.
    #[arg(long = "blocked-domain", value_name = "DOMAIN")]
    blocked_domains: Vec<String>,
    /// The token, or a whole dynamic-link URL containing `signature=<token>`.
    // A malformed token starting with `-` gets the verdict "signature", not a usage error.
    #[arg(allow_hyphen_values = true)]
    token: String,
}

/// The verdict printed on stdout.
#[derive(Serialize)]
struct Verdict<'a> {
    valid: bool,
    redirect_to: Option<String>,
    reason: Option<&'a str>,
}

pub(crate) fn run(args: &VerifyArgs) -> Result<(), CliError> {
    let now = match args.now {
        Some(now) => now,
        None => unix_now()?,
    };
    let blocklist: DomainBlocklist = args.blocked_domains.iter().collect();
    let token = parse::token_from_arg(&args.token);
    let verdict = match TokenCipher::new(&args.key.group_key).evaluate(&token, now, &blocklist) {
        Ok(url) => Verdict {
            valid: true,
            redirect_to: Some(url),
            reason: None,
        },
        Err(err) => {
            // The detail goes to stderr; stdout keeps the fixed shape.
            eprintln!("shortlink: token rejected: {err}");
            Verdict {
                valid: false,
                redirect_to: None,
                reason: Some(err.reason()),
            }
        }
    };
    let json = serde_json::to_string(&verdict).map_err(|e| CliError::Runtime(e.to_string()))?;
    print_line(&json)
}
