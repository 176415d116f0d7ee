//! The dashboard's mail: invitations (the members page) and password-reset links ("Forgot password"), through
//! the origin's [`mailer::Mailer`] when `--smtp-url` is set. A message that cannot be sent never fails the
//! request: the mailer logs the failure by its kind (never an address or a link), and the page goes on.

use crate::DashboardState;

/// Mails an invitation (`url`, good until `expires_at` as the page shows it) to `to`. True when the SMTP server
/// took it; false when mail is not configured or sending failed (logged by kind): the invitation page shows
/// the link either way, so this is never an error page.
pub(crate) async fn send_invitation(
    state: &DashboardState,
    to: &str,
    account_name: &str,
    role: &str,
    url: &str,
    expires_at: &str,
) -> bool {
    match &state.mailer {
        Some(mailer) => mailer
            .invitation(to, account_name, role, url, expires_at)
            .await
            .is_ok(),
        None => false,
    }
}

/// Mails a password-reset link in the background: the "Forgot password" page answers at once, so how long the
/// SMTP server takes can never tell whether the email had a user. Nothing happens without mail configured.
pub(crate) fn send_password_reset(state: &DashboardState, to: String, url: String) {
    if let Some(mailer) = state.mailer.clone() {
        tokio::spawn(async move {
            // A failure is logged by the mailer (its kind only); there is nobody left to tell.
            let _ = mailer.password_reset(&to, &url).await;
        });
    }
}
