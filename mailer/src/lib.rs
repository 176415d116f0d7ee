//! Shortlink's outgoing mail: the two messages the dashboard sends (an invitation to join an account, a link to
//! reset a password), plain text, over SMTP with [`lettre`] (tokio, rustls; no hand-written protocol).
//!
//! [`Mailer::from_url`] takes the operator's `--smtp-url`:
//! - `smtp://user:password@host:port`: a plain connection (port 25 when none is given), no TLS at all. For a relay
//!   on the same host or a private network, and for tests. `?tls=required` upgrades it with STARTTLS and refuses a
//!   server that does not offer it (port 587 by default), `?tls=opportunistic` upgrades when offered.
//! - `smtps://user:password@host:port`: TLS from the first byte (port 465 by default), the server's certificate
//!   checked against the web's public roots (compiled in).
//!
//! User and password are optional and percent-decoded. Nothing here logs an address, a link, a URL or a
//! credential: a failure is logged as its kind only ([`MailError::kind`]), and [`Mailer`]'s `Debug` shows none
//! of its settings.

use lettre::message::header::{ContentTransferEncoding, ContentType};
use lettre::message::{Body, Mailbox, SinglePart};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use std::fmt;
use std::time::Duration;

/// How long sending one message may take in all (connecting, TLS, every command and answer) before it counts
/// as not sent: short enough for a request that waits on it to finish well within the origin's 10 s bound.
/// lettre's own timeout bounds only the connection, so a server that accepts and then stays silent is cut here.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a message was not sent, or the mailer not made. The texts name no address, link or credential.
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// The SMTP URL is unusable.
    #[error("{0}")]
    Url(&'static str),
    /// The sender address is not an email address.
    #[error("the sender must be an email address, e.g. `Shortlink <no-reply@example.com>`")]
    From,
    /// The recipient is not an email address.
    #[error("the recipient is not a valid email address")]
    Recipient,
    /// The message could not be put together.
    #[error("the message could not be built")]
    Message,
    /// The SMTP exchange failed.
    #[error("sending failed ({})", .0.as_str())]
    Send(SendFailure),
}

/// How an SMTP exchange failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendFailure {
    /// No connection to the server (refused, unreachable, name not resolved, closed early).
    Connection,
    /// The server did not answer in time ([`SEND_TIMEOUT`]).
    Timeout,
    /// TLS could not be set up (certificate, STARTTLS not offered with `tls=required`).
    Tls,
    /// The server refused for now (a 4xx reply): trying later may work.
    Transient,
    /// The server refused (a 5xx reply: authentication, sender or recipient refused).
    Permanent,
    /// Anything else: an answer that could not be read, no usable authentication mechanism.
    Protocol,
}

impl SendFailure {
    /// A word for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connection => "connection",
            Self::Timeout => "timeout",
            Self::Tls => "tls",
            Self::Transient => "transient",
            Self::Permanent => "permanent",
            Self::Protocol => "protocol",
        }
    }

    fn of(e: &lettre::transport::smtp::Error) -> Self {
        if e.is_timeout() {
            Self::Timeout
        } else if e.is_tls() {
            Self::Tls
        } else if e.is_transient() {
            Self::Transient
        } else if e.is_permanent() {
            Self::Permanent
        } else if e.is_response() || e.is_client() {
            Self::Protocol
        } else {
            Self::Connection
        }
    }
}

impl MailError {
    /// The kind of failure, as logged: `url`, `from`, `recipient`, `message` or `send.<failure>`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Url(_) => "url",
            Self::From => "from",
            Self::Recipient => "recipient",
            Self::Message => "message",
            Self::Send(SendFailure::Connection) => "send.connection",
            Self::Send(SendFailure::Timeout) => "send.timeout",
            Self::Send(SendFailure::Tls) => "send.tls",
            Self::Send(SendFailure::Transient) => "send.transient",
            Self::Send(SendFailure::Permanent) => "send.permanent",
            Self::Send(SendFailure::Protocol) => "send.protocol",
        }
    }
}

/// Sends the dashboard's messages through one SMTP server, from one sender. A connection per message (they are
/// rare: invitations and password resets), closed with `QUIT`.
#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    timeout: Duration,
}

impl fmt::Debug for Mailer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The transport holds the credentials: nothing of it is shown.
        f.write_str("Mailer { .. }")
    }
}

impl Mailer {
    /// A mailer for `smtp_url` (`smtp://…` or `smtps://…`, see the crate's documentation) sending as `from`
    /// (`no-reply@example.com` or `Shortlink <no-reply@example.com>`). Nothing is connected yet: a server that is
    /// down shows when a message is sent.
    pub fn from_url(smtp_url: &str, from: &str) -> Result<Self, MailError> {
        let scheme = smtp_url
            .split_once("://")
            .map(|(s, _)| s.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("smtp" | "smtps")) {
            return Err(MailError::Url(
                "the SMTP URL must start with smtp:// or smtps://",
            ));
        }
        // lettre's own parser: scheme, host, port, credentials and `tls=`. Its error is not shown: it could
        // quote the URL, which carries the password.
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(smtp_url)
            .map_err(|_| {
                MailError::Url(
                    "the SMTP URL must be smtp://[user:password@]host[:port][?tls=required|opportunistic] or smtps://[user:password@]host[:port]",
                )
            })?
            .timeout(Some(SEND_TIMEOUT))
            .build();
        let from: Mailbox = from.trim().parse().map_err(|_| MailError::From)?;
        Ok(Self {
            transport,
            from,
            timeout: SEND_TIMEOUT,
        })
    }

    /// The same mailer with another bound on sending one message than [`SEND_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The invitation to join `account_name` with `role`: its one-use `url`, good until `expires_at` (as the
    /// dashboard shows times, e.g. `2026-11-23 14:05 UTC`).
    pub async fn invitation(
        &self,
        to: &str,
        account_name: &str,
        role: &str,
        url: &str,
        expires_at: &str,
    ) -> Result<(), MailError> {
        let (subject, body) = invitation_text(account_name, role, url, expires_at);
        self.send("invitation", to, subject, body).await
    }

    /// The one-use link that sets a new password (valid one hour).
    pub async fn password_reset(&self, to: &str, url: &str) -> Result<(), MailError> {
        let (subject, body) = password_reset_text(url);
        self.send("password_reset", to, subject, body).await
    }

    /// Sends one message; the outcome is logged by its kind only (`mail`: which message).
    async fn send(
        &self,
        mail: &'static str,
        to: &str,
        subject: String,
        body: String,
    ) -> Result<(), MailError> {
        let outcome = self.try_send(to, subject, body).await;
        match &outcome {
            Ok(()) => tracing::info!(mail, "mail sent"),
            Err(e) => tracing::warn!(mail, kind = e.kind(), "mail not sent"),
        }
        outcome
    }

    async fn try_send(&self, to: &str, subject: String, body: String) -> Result<(), MailError> {
        let message = self.compose(to, subject, body)?;
        // Dropping the exchange on time-out closes its connection.
        match tokio::time::timeout(self.timeout, self.transport.send(message)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(MailError::Send(SendFailure::of(&e))),
            Err(_) => Err(MailError::Send(SendFailure::Timeout)),
        }
    }

    fn compose(&self, to: &str, subject: String, text: String) -> Result<Message, MailError> {
        let to: Mailbox = to.trim().parse().map_err(|_| MailError::Recipient)?;
        let body = body(text);
        let message_id = format!(
            "<{}@{}>",
            uuid::Uuid::new_v4().simple(),
            self.from.email.domain()
        );
        Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .message_id(Some(message_id))
            .singlepart(
                SinglePart::builder()
                    .header(ContentType::TEXT_PLAIN)
                    .body(body),
            )
            .map_err(|_| MailError::Message)
    }
}

/// The longest line a message may have (RFC 5322, 2.1.1), without its CRLF.
const MAX_LINE: usize = 998;

/// The text as a message body: `7bit` when it is ASCII without control characters and its lines are within
/// [`MAX_LINE`] (then the link's line reaches every client exactly as written, however long the link),
/// quoted-printable otherwise (an account name in another script). lettre's own choice would take
/// quoted-printable for any line over 76 characters, which every link is.
fn body(text: String) -> Body {
    let plain = text
        .lines()
        .all(|l| l.len() <= MAX_LINE && l.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)));
    if plain {
        let mut crlf = text.lines().collect::<Vec<_>>().join("\r\n");
        crlf.push_str("\r\n");
        Body::dangerous_pre_encoded(crlf.into_bytes(), ContentTransferEncoding::SevenBit)
    } else {
        Body::new(text)
    }
}

/// A name from the account's owner, made safe for a subject line and a sentence: no control characters (so no
/// line breaks), at most 100 characters.
fn one_line(raw: &str) -> String {
    raw.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(100)
        .collect::<String>()
        .trim()
        .to_owned()
}

/// Subject and text of an invitation.
fn invitation_text(
    account_name: &str,
    role: &str,
    url: &str,
    expires_at: &str,
) -> (String, String) {
    let name = one_line(account_name);
    let role = one_line(role);
    let subject = format!("You are invited to join {name} on Shortlink");
    let body = format!(
        "You are invited to join the Shortlink account \"{name}\" as {role}.\n\
         \n\
         Open this link to accept the invitation. It works once, until {expires}:\n\
         \n\
         {url}\n\
         \n\
         If you did not expect this invitation, ignore this message: nothing happens until the link is opened.\n",
        expires = one_line(expires_at),
    );
    (subject, body)
}

/// Subject and text of a password reset.
fn password_reset_text(url: &str) -> (String, String) {
    let subject = "Reset your Shortlink password".to_owned();
    let body = format!(
        "Someone, hopefully you, asked to reset the Shortlink password of this email address.\n\
         \n\
         Open this link to choose a new password. It works once, for one hour:\n\
         \n\
         {url}\n\
         \n\
         Setting a new password signs you out everywhere. If you did not ask for this, ignore this message: your \
         password stays as it is.\n"
    );
    (subject, body)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const LINK: &str = "https://links-admin.example.com/dashboard/reset/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn urls() {
        for ok in [
            "smtp://127.0.0.1:2525",
            "smtp://user:p%40ss@mail.example.com:587?tls=required",
            "smtp://mail.example.com?tls=opportunistic",
            "smtps://user:pass@mail.example.com",
            "SMTPS://mail.example.com:465",
        ] {
            assert!(Mailer::from_url(ok, "no-reply@example.com").is_ok(), "{ok}");
        }
        for bad in [
            "",
            "mail.example.com",
            "http://mail.example.com",
            "smtp://",
            "smtp://mail.example.com?tls=sometimes",
        ] {
            let e = Mailer::from_url(bad, "no-reply@example.com").unwrap_err();
            assert_eq!(e.kind(), "url", "{bad}");
        }
        // The URL's password never shows in the error or in Debug.
        let e = Mailer::from_url("smtp://u:hunter2@[bad", "x@example.com").unwrap_err();
        assert!(!e.to_string().contains("hunter2"));
        let m = Mailer::from_url("smtps://u:hunter2@mail.example.com", "x@example.com").unwrap();
        assert_eq!(format!("{m:?}"), "Mailer { .. }");
        for from in ["no-reply@example.com", "Shortlink <no-reply@example.com>"] {
            assert!(Mailer::from_url("smtp://localhost", from).is_ok(), "{from}");
        }
        for from in ["", "no-reply", "<>"] {
            let e = Mailer::from_url("smtp://localhost", from).unwrap_err();
            assert_eq!(e.kind(), "from", "{from}");
        }
    }

    #[test]
    fn the_link_is_on_its_own_line() {
        let (subject, body) = invitation_text(
            "Acme\r\nBcc: x@evil.example",
            "member",
            LINK,
            "2026-11-23 14:05 UTC",
        );
        assert_eq!(
            subject,
            "You are invited to join Acme  Bcc: x@evil.example on Shortlink"
        );
        assert!(body.lines().any(|l| l == LINK), "{body}");
        assert!(body.contains("as member") && body.contains("until 2026-11-23 14:05 UTC"));
        let (subject, body) = password_reset_text(LINK);
        assert_eq!(subject, "Reset your Shortlink password");
        assert!(body.lines().any(|l| l == LINK), "{body}");
        assert!(body.contains("one hour"));
    }

    #[test]
    fn messages_are_plain_text_with_the_link_intact() {
        let m = Mailer::from_url("smtp://localhost", "Shortlink <no-reply@example.com>").unwrap();
        let (subject, body) = password_reset_text(LINK);
        let raw = String::from_utf8(
            m.compose("Someone@Example.com", subject, body)
                .unwrap()
                .formatted(),
        )
        .unwrap();
        assert!(
            raw.contains("Content-Type: text/plain; charset=utf-8"),
            "{raw}"
        );
        assert!(raw.contains("Content-Transfer-Encoding: 7bit"), "{raw}");
        assert!(raw.contains(&format!("\r\n{LINK}\r\n")), "{raw}");
        assert!(
            raw.contains("Message-ID: <") && raw.contains("@example.com>"),
            "{raw}"
        );
        assert!(
            raw.contains("Subject: Reset your Shortlink password"),
            "{raw}"
        );
        // Another script in the account's name: quoted-printable, still a message.
        let (subject, body) = invitation_text("Équipe 東京", "viewer", LINK, "soon");
        let raw = m
            .compose("a@example.com", subject, body)
            .unwrap()
            .formatted();
        assert!(String::from_utf8_lossy(&raw).contains("quoted-printable"));
        assert_eq!(
            m.compose("not an address", String::new(), String::new())
                .unwrap_err()
                .kind(),
            "recipient"
        );
    }

    #[tokio::test]
    async fn a_server_that_is_not_there_is_a_connection_failure() {
        // A port nothing listens on: bound, then released.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let m = Mailer::from_url(&format!("smtp://127.0.0.1:{port}"), "x@example.com").unwrap();
        let e = m.password_reset("a@example.com", LINK).await.unwrap_err();
        assert_eq!(e.kind(), "send.connection", "{e:?}");
        assert!(!e.to_string().contains("a@example.com"));
    }

    #[tokio::test]
    async fn a_silent_server_is_a_timeout() {
        // Connections are accepted (by the backlog) and never answered.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let m = Mailer::from_url(&format!("smtp://127.0.0.1:{port}"), "x@example.com")
            .unwrap()
            .with_timeout(Duration::from_millis(300));
        let started = std::time::Instant::now();
        let e = m.password_reset("a@example.com", LINK).await.unwrap_err();
        assert_eq!(e.kind(), "send.timeout", "{e:?}");
        assert!(started.elapsed() < Duration::from_secs(3));
        drop(silent);
    }
}
