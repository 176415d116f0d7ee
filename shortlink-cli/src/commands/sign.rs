//! `shortlink sign`: build a dynamic-link URL (spec 4.7).

use clap::Args;
use shared_crypto::{Payload, TokenCipher, upgrade_http};

use super::{CliError, GroupKeyArg, print_line, unix_now};
use crate::parse;

#[derive(Args)]
pub(crate) struct SignArgs {
    #[command(flatten)]
    key: GroupKeyArg,
    /// The group's id (a UUID).
    #[arg(long, value_parser = parse::uuid)]
    group_id: String,
    /// An enabled domain to serve the link on, e.g. go.example.com.
    #[arg(long, value_parser = parse::domain)]
    domain: String,
    /// Destination URL: https:// (http:// is upgraded), at most 2048 characters with back_param.
    #[arg(long)]
    destination: String,
    /// Query parameters appended to the destination at redirect time, e.g. utm_source=mail.
    #[arg(long)]
    back_param: Option<String>,
    /// Absolute expiry, UNIX seconds.
    #[arg(long, conflicts_with = "expires_in", allow_negative_numbers = true)]
    expires_at: Option<i64>,
    /// Expiry relative to now: 30s, 15m, 1h, 7d, or combined like 1h30m.
    #[arg(long, value_parser = parse::duration_secs)]
    expires_in: Option<i64>,
}

pub(crate) fn run(args: &SignArgs) -> Result<(), CliError> {
    let expires_at = match (args.expires_at, args.expires_in) {
        (Some(at), _) => Some(at),
        (None, Some(secs)) => Some(
            unix_now()?
                .checked_add(secs)
                .ok_or_else(|| CliError::Input("--expires-in is too large".into()))?,
        ),
        (None, None) => None,
    };
    let payload = Payload {
        // Store the upgraded URL so every reader sees https.
        destination_url: upgrade_http(&args.destination).into_owned(),
        back_param: args.back_param.clone().filter(|b| !b.is_empty()),
        expires_at,
    };
    // The blocklist is the service's, not known here; check everything else now rather than at the edge.
    let no_blocklist: &[&str] = &[];
    payload
        .resolve_destination(no_blocklist)
        .map_err(|e| CliError::Input(format!("--destination: {e}")))?;
    if let Some(at) = expires_at {
        if at <= unix_now()? {
            eprintln!(
                "shortlink: warning: --expires-at {at} is not in the future; the link is already expired"
            );
        }
    }

    let token = TokenCipher::new(&args.key.group_key)
        .seal_random(&payload)
        .map_err(|e| CliError::Runtime(e.to_string()))?;
    print_line(&dynamic_url(&args.domain, &args.group_id, &token))
}

/// `https://<domain>/e/<group_id>?signature=<url-encoded token>` (spec 4.7 step 7).
fn dynamic_url(domain: &str, group_id: &str, token: &str) -> String {
    format!(
        "https://{domain}/e/{group_id}?signature={}",
        parse::percent_encode(token)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_shape() {
        assert_eq!(
            dynamic_url(
                "go.example.com",
                "0b7e2c1a-3f4d-4e5f-8a9b-0c1d2e3f4a5b",
                "AQ-_x"
            ),
            "https://go.example.com/e/0b7e2c1a-3f4d-4e5f-8a9b-0c1d2e3f4a5b?signature=AQ-_x"
        );
    }
}
