//! One delivery attempt: a signed POST to an endpoint, connecting only to public addresses.

use crate::addr::{UrlError, check_url, is_public};
use crate::secret::{WebhookSecret, sign};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::CONTENT_TYPE;
use std::error::Error as StdError;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use url::Url;

/// How long one attempt may take in all: connecting, sending, and the receiver's answer.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a response body read (and discarded) at most.
pub const MAX_RESPONSE_BODY: usize = 64 * 1024;
/// The `user-agent` of every delivery.
pub const USER_AGENT: &str = concat!("Shortlink-Webhooks/", env!("CARGO_PKG_VERSION"));
/// Longest fallback error text kept in an [`Outcome`], in characters.
const MAX_ERROR_LEN: usize = 200;

/// What one attempt came to, as the delivery log shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The response's status, when one came.
    pub status_code: Option<u16>,
    /// From the start of the attempt to its end (the response's head, and its body read or abandoned).
    pub duration_ms: u64,
    /// Why it failed, short and without any secret: "timeout", "connection refused", "HTTP 500", "address not
    /// public", "host not found", …; `None` on success.
    pub error: Option<String>,
    /// A `2xx` status came back.
    pub success: bool,
}

/// Sends one webhook: POST body (JSON) with headers webhook-id, webhook-timestamp, webhook-signature, content-type
/// application/json, user-agent; 10 s total timeout; no redirects followed; the connection goes ONLY to addresses
/// that passed [`is_public`](crate::is_public) at connect time (a DNS resolver that resolves and filters, so DNS
/// rebinding between check and connect cannot reach a private address) unless `allow_private`. Response body read
/// at most 64 KiB and discarded. 2xx = success.
///
/// Cheap to clone (one connection pool inside); make one per process and share it.
#[derive(Debug, Clone)]
pub struct Sender {
    client: reqwest::Client,
    allow_private: bool,
    timeout: Duration,
}

impl Sender {
    /// A sender with the 10 s timeout. With `allow_private`, loopback and private addresses and plain `http` are
    /// allowed (the operator's `--webhooks-allow-private`).
    pub fn new(allow_private: bool) -> Self {
        Self::with_timeout(allow_private, TIMEOUT)
    }

    /// A sender with another total timeout, for tests of slow receivers.
    pub fn with_timeout(allow_private: bool, timeout: Duration) -> Self {
        let resolver = (!allow_private).then(PublicResolver::system);
        Self::build(allow_private, timeout, resolver)
    }

    fn build(allow_private: bool, timeout: Duration, resolver: Option<PublicResolver>) -> Self {
        let mut builder = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            // A 3xx is a failure: the client should update the URL (and a redirect could point anywhere).
            .redirect(reqwest::redirect::Policy::none())
            // A proxy from the environment would resolve the host itself, out of the resolver's reach.
            .no_proxy()
            .https_only(!allow_private)
            .connect_timeout(timeout)
            .timeout(timeout);
        if let Some(resolver) = resolver {
            builder = builder.dns_resolver(Arc::new(resolver));
        }
        // Building fails only when the TLS backend cannot start, which compiled-in rustls and roots always can.
        let client = builder
            .build()
            .expect("the webhook HTTP client (rustls, compiled-in roots) builds");
        Self {
            client,
            allow_private,
            timeout,
        }
    }

    /// Makes one attempt: POSTs `body` to `url`, signed with `secret` over `msg_id` and `timestamp_secs` (which
    /// the caller keeps: the id is the same for every attempt of an event, the timestamp is the attempt's).
    ///
    /// The URL is checked again ([`check_url`](crate::check_url) under this sender's rule) since it may have been
    /// stored under another; an IP-literal host is checked here because no resolver is asked for it.
    pub async fn send(
        &self,
        url: &Url,
        secret: &WebhookSecret,
        msg_id: &str,
        timestamp_secs: i64,
        body: &[u8],
    ) -> Outcome {
        let start = Instant::now();
        let result = self
            .attempt(
                url,
                secret,
                msg_id,
                timestamp_secs,
                body,
                start + self.timeout,
            )
            .await;
        let duration_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        match result {
            Ok(status) if (200..300).contains(&status) => Outcome {
                status_code: Some(status),
                duration_ms,
                error: None,
                success: true,
            },
            Ok(status) => Outcome {
                status_code: Some(status),
                duration_ms,
                error: Some(format!("HTTP {status}")),
                success: false,
            },
            Err(error) => Outcome {
                status_code: None,
                duration_ms,
                error: Some(error),
                success: false,
            },
        }
    }

    async fn attempt(
        &self,
        url: &Url,
        secret: &WebhookSecret,
        msg_id: &str,
        timestamp_secs: i64,
        body: &[u8],
        deadline: Instant,
    ) -> Result<u16, String> {
        check_url(url.as_str(), self.allow_private).map_err(|e| match e {
            UrlError::NotPublic => Refused::NotPublic.to_string(),
            other => other.to_string(),
        })?;
        let request = self
            .client
            .post(url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header("webhook-id", msg_id)
            .header("webhook-timestamp", timestamp_secs.to_string())
            .header(
                "webhook-signature",
                sign(secret, msg_id, timestamp_secs, body),
            )
            .body(body.to_vec());
        let mut response = match tokio::time::timeout_at(deadline, request.send()).await {
            Err(_) => return Err("timeout".to_owned()),
            Ok(Err(e)) => return Err(describe(&e)),
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        // The status alone decides; the body is read (so the connection can be reused) up to a bound, within
        // what is left of the time, and dropped.
        let _ = tokio::time::timeout_at(deadline, drain(&mut response)).await;
        Ok(status)
    }
}

/// Reads and discards the body, stopping after [`MAX_RESPONSE_BODY`] bytes or at the first error.
async fn drain(response: &mut reqwest::Response) {
    let mut read = 0;
    while read < MAX_RESPONSE_BODY {
        match response.chunk().await {
            Ok(Some(chunk)) => read += chunk.len(),
            Ok(None) | Err(_) => break,
        }
    }
}

/// A short, secret-free text for a failed request.
fn describe(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        return "timeout".to_owned();
    }
    if err.is_builder() {
        return "invalid request".to_owned();
    }
    let mut innermost: Option<&(dyn StdError + 'static)> = None;
    let mut source = err.source();
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<Refused>() {
            return refused.to_string();
        }
        if let Some(io) = e.downcast_ref::<io::Error>() {
            let known = match io.kind() {
                io::ErrorKind::ConnectionRefused => Some("connection refused"),
                io::ErrorKind::ConnectionReset => Some("connection reset"),
                io::ErrorKind::ConnectionAborted => Some("connection aborted"),
                io::ErrorKind::TimedOut => Some("timeout"),
                io::ErrorKind::HostUnreachable => Some("host unreachable"),
                io::ErrorKind::NetworkUnreachable => Some("network unreachable"),
                _ => None,
            };
            if let Some(known) = known {
                return known.to_owned();
            }
        }
        innermost = Some(e);
        source = e.source();
    }
    // The innermost cause (a TLS or protocol error, say), never the top level, which names the URL.
    let detail: String = innermost
        .map(|e| e.to_string())
        .unwrap_or_default()
        .chars()
        .take(MAX_ERROR_LEN)
        .collect();
    let what = if err.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    if detail.is_empty() {
        what.to_owned()
    } else {
        format!("{what}: {detail}")
    }
}

/// Why the resolver gave no address to connect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Refused {
    /// Every address the name resolved to is not public.
    #[error("address not public")]
    NotPublic,
    /// The name did not resolve.
    #[error("host not found")]
    NotFound,
}

/// Resolves a host name and keeps only public addresses, at connect time.
#[derive(Debug)]
struct PublicResolver {
    /// A fixed answer in place of the system's, for tests of what a (rebound) name resolves to.
    fixed: Option<Vec<IpAddr>>,
}

impl PublicResolver {
    fn system() -> Self {
        Self { fixed: None }
    }

    async fn lookup(&self, host: &str) -> Result<Vec<SocketAddr>, Refused> {
        let all: Vec<SocketAddr> = match &self.fixed {
            Some(ips) => ips.iter().map(|ip| SocketAddr::new(*ip, 0)).collect(),
            // Port 0: the connector puts the URL's port in.
            None => tokio::net::lookup_host((host, 0))
                .await
                .map_err(|_| Refused::NotFound)?
                .collect(),
        };
        if all.is_empty() {
            return Err(Refused::NotFound);
        }
        let public: Vec<SocketAddr> = all.into_iter().filter(|a| is_public(a.ip())).collect();
        if public.is_empty() {
            return Err(Refused::NotPublic);
        }
        Ok(public)
    }
}

impl Resolve for PublicResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let fixed = self.fixed.clone();
        Box::pin(async move {
            let resolver = PublicResolver { fixed };
            match resolver.lookup(name.as_str()).await {
                Ok(addrs) => Ok(Box::new(addrs.into_iter()) as Addrs),
                Err(refused) => Err(Box::new(refused) as Box<dyn StdError + Send + Sync>),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::mpsc;

    const SECRET: &str = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

    /// What the receiver answers.
    #[derive(Clone)]
    struct Reply {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
        delay: Duration,
    }

    impl Reply {
        fn status(status: u16) -> Self {
            Self {
                status,
                headers: Vec::new(),
                body: b"ok".to_vec(),
                delay: Duration::ZERO,
            }
        }
    }

    /// A request as the receiver saw it.
    #[derive(Debug)]
    struct Seen {
        method: String,
        target: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    }

    impl Seen {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        }
    }

    /// A small HTTP/1.1 receiver on loopback: one request per connection, answered with `reply`.
    struct Receiver {
        addr: SocketAddr,
        seen: mpsc::UnboundedReceiver<Seen>,
        connections: Arc<AtomicUsize>,
    }

    async fn receiver(reply: Reply) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, seen) = mpsc::unbounded_channel();
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(answer(stream, reply.clone(), tx.clone()));
            }
        });
        Receiver {
            addr,
            seen,
            connections,
        }
    }

    async fn answer(mut stream: TcpStream, reply: Reply, tx: mpsc::UnboundedSender<Seen>) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let mut request_line = lines.next().unwrap_or_default().split(' ');
        let method = request_line.next().unwrap_or_default().to_owned();
        let target = request_line.next().unwrap_or_default().to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = buf[head_end + 4..].to_vec();
        while body.len() < length {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => body.extend_from_slice(&chunk[..n]),
            }
        }
        let _ = tx.send(Seen {
            method,
            target,
            headers,
            body,
        });
        tokio::time::sleep(reply.delay).await;
        let mut out = format!(
            "HTTP/1.1 {} Whatever\r\ncontent-length: {}\r\nconnection: close\r\n",
            reply.status,
            reply.body.len()
        );
        for (name, value) in &reply.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("\r\n");
        let _ = stream.write_all(out.as_bytes()).await;
        let _ = stream.write_all(&reply.body).await;
        let _ = stream.shutdown().await;
    }

    fn now_secs() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            .try_into()
            .unwrap()
    }

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    const BODY: &[u8] = br#"{"type":"ping","timestamp":"2025-01-02T03:04:05Z","data":{}}"#;

    #[tokio::test]
    async fn success_on_200_with_signed_headers() {
        let mut rx = receiver(Reply::status(200)).await;
        let secret = WebhookSecret::parse(SECRET).unwrap();
        let ts = now_secs();
        let target = url(&format!("http://{}/hooks/in?src=shortlink", rx.addr));
        let outcome = Sender::new(true)
            .send(&target, &secret, "msg_abc123", ts, BODY)
            .await;
        assert!(outcome.success, "{outcome:?}");
        assert_eq!(outcome.status_code, Some(200));
        assert_eq!(outcome.error, None);
        assert!(outcome.duration_ms < 5_000);

        let seen = rx.seen.recv().await.unwrap();
        assert_eq!(seen.method, "POST");
        assert_eq!(seen.target, "/hooks/in?src=shortlink");
        assert_eq!(seen.body, BODY);
        assert_eq!(seen.header("content-type"), Some("application/json"));
        assert_eq!(seen.header("user-agent"), Some(USER_AGENT));
        assert_eq!(seen.header("webhook-id"), Some("msg_abc123"));
        assert_eq!(
            seen.header("webhook-timestamp"),
            Some(ts.to_string().as_str())
        );
        let signature = seen.header("webhook-signature").unwrap();
        assert_eq!(signature, sign(&secret, "msg_abc123", ts, BODY));
        assert!(signature.starts_with("v1,"));
        // Only the signature derives from the secret.
        for (name, value) in &seen.headers {
            assert!(!value.contains("whsec_"), "{name} carries the secret");
        }
    }

    #[tokio::test]
    async fn any_2xx_is_success_and_a_large_answer_is_cut_short() {
        let rx = receiver(Reply::status(204)).await;
        let secret = WebhookSecret::generate();
        let target = url(&format!("http://{}/", rx.addr));
        let outcome = Sender::new(true)
            .send(&target, &secret, "msg_1", now_secs(), BODY)
            .await;
        assert!(outcome.success);
        assert_eq!(outcome.status_code, Some(204));

        let big = Reply {
            body: vec![b'x'; 8 * 1024 * 1024],
            ..Reply::status(202)
        };
        let rx = receiver(big).await;
        let target = url(&format!("http://{}/", rx.addr));
        let outcome = Sender::new(true)
            .send(&target, &secret, "msg_2", now_secs(), BODY)
            .await;
        assert!(outcome.success, "{outcome:?}");
        assert_eq!(outcome.status_code, Some(202));
    }

    #[tokio::test]
    async fn failure_on_500_keeps_the_status() {
        let rx = receiver(Reply {
            body: b"internal error with details".to_vec(),
            ..Reply::status(500)
        })
        .await;
        let target = url(&format!("http://{}/", rx.addr));
        let outcome = Sender::new(true)
            .send(
                &target,
                &WebhookSecret::generate(),
                "msg_1",
                now_secs(),
                BODY,
            )
            .await;
        assert!(!outcome.success);
        assert_eq!(outcome.status_code, Some(500));
        assert_eq!(outcome.error.as_deref(), Some("HTTP 500"));
    }

    #[tokio::test]
    async fn a_slow_receiver_times_out() {
        let rx = receiver(Reply {
            delay: Duration::from_secs(30),
            ..Reply::status(200)
        })
        .await;
        let target = url(&format!("http://{}/", rx.addr));
        let outcome = Sender::with_timeout(true, Duration::from_millis(300))
            .send(
                &target,
                &WebhookSecret::generate(),
                "msg_1",
                now_secs(),
                BODY,
            )
            .await;
        assert!(!outcome.success);
        assert_eq!(outcome.status_code, None);
        assert_eq!(outcome.error.as_deref(), Some("timeout"));
        assert!(
            (300..5_000).contains(&outcome.duration_ms),
            "{}",
            outcome.duration_ms
        );
    }

    #[tokio::test]
    async fn redirects_are_not_followed() {
        let mut rx = receiver(Reply {
            headers: vec![("location", "/elsewhere".to_owned())],
            ..Reply::status(302)
        })
        .await;
        let target = url(&format!("http://{}/", rx.addr));
        let outcome = Sender::new(true)
            .send(
                &target,
                &WebhookSecret::generate(),
                "msg_1",
                now_secs(),
                BODY,
            )
            .await;
        assert!(!outcome.success);
        assert_eq!(outcome.status_code, Some(302));
        assert_eq!(outcome.error.as_deref(), Some("HTTP 302"));
        assert_eq!(rx.seen.recv().await.unwrap().target, "/");
        assert!(rx.seen.try_recv().is_err(), "the redirect was followed");
        assert_eq!(rx.connections.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn connection_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let outcome = Sender::new(true)
            .send(
                &url(&format!("http://{addr}/")),
                &WebhookSecret::generate(),
                "msg_1",
                now_secs(),
                BODY,
            )
            .await;
        assert!(!outcome.success);
        assert_eq!(outcome.status_code, None);
        assert_eq!(outcome.error.as_deref(), Some("connection refused"));
    }

    /// Sends to `target` without the operator flag and returns the error.
    async fn refused_error(sender: &Sender, target: &str) -> String {
        let outcome = sender
            .send(
                &url(target),
                &WebhookSecret::generate(),
                "msg_1",
                now_secs(),
                BODY,
            )
            .await;
        assert!(!outcome.success);
        assert_eq!(outcome.status_code, None);
        outcome.error.unwrap()
    }

    #[tokio::test]
    async fn private_addresses_are_never_connected_to_without_the_flag() {
        let rx = receiver(Reply::status(200)).await;
        let port = rx.addr.port();
        let sender = Sender::new(false);
        for target in [
            format!("https://127.0.0.1:{port}/"),
            format!("https://localhost:{port}/"),
            format!("https://[::1]:{port}/"),
            format!("https://[::ffff:127.0.0.1]:{port}/"),
            format!("https://2130706433:{port}/"),
            "https://10.0.0.1/".to_owned(),
            "https://169.254.169.254/latest/meta-data/".to_owned(),
        ] {
            assert_eq!(
                refused_error(&sender, &target).await,
                "address not public",
                "{target}"
            );
        }
        // Plain http needs the flag too.
        assert_eq!(
            refused_error(&sender, &format!("http://example.com:{port}/")).await,
            "url must use https"
        );
        assert_eq!(rx.connections.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_name_resolving_to_private_addresses_at_connect_time_is_refused() {
        // As if a name that passed the creation check now resolves (rebinds) to loopback or private addresses.
        let rx = receiver(Reply::status(200)).await;
        let port = rx.addr.port();
        for ips in [
            vec!["127.0.0.1"],
            vec!["::1"],
            vec!["10.0.0.1", "169.254.169.254", "::ffff:127.0.0.1"],
        ] {
            let fixed = ips.iter().map(|s| s.parse().unwrap()).collect();
            let sender = Sender::build(false, TIMEOUT, Some(PublicResolver { fixed: Some(fixed) }));
            let target = format!("https://hooks.example.com:{port}/");
            assert_eq!(
                refused_error(&sender, &target).await,
                "address not public",
                "{ips:?}"
            );
        }
        let sender = Sender::build(
            false,
            TIMEOUT,
            Some(PublicResolver {
                fixed: Some(vec![]),
            }),
        );
        assert_eq!(
            refused_error(&sender, "https://hooks.example.com/").await,
            "host not found"
        );
        assert_eq!(rx.connections.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn the_resolver_filters_real_lookups() {
        let system = PublicResolver::system();
        assert_eq!(system.lookup("localhost").await, Err(Refused::NotPublic));
        assert_eq!(
            system.lookup("no-such-host.invalid").await,
            Err(Refused::NotFound)
        );
        let mixed = PublicResolver {
            fixed: Some(vec![
                "127.0.0.1".parse().unwrap(),
                "8.8.8.8".parse().unwrap(),
                "fd00::1".parse().unwrap(),
                "2001:4860:4860::8888".parse().unwrap(),
            ]),
        };
        let kept: Vec<IpAddr> = mixed
            .lookup("x")
            .await
            .unwrap()
            .iter()
            .map(SocketAddr::ip)
            .collect();
        assert_eq!(
            kept,
            vec![
                "8.8.8.8".parse::<IpAddr>().unwrap(),
                "2001:4860:4860::8888".parse().unwrap()
            ]
        );
    }

    #[tokio::test]
    async fn an_invalid_message_id_is_a_failed_attempt_not_a_panic() {
        let rx = receiver(Reply::status(200)).await;
        let target = url(&format!("http://{}/", rx.addr));
        let outcome = Sender::new(true)
            .send(
                &target,
                &WebhookSecret::generate(),
                "bad\nid",
                now_secs(),
                BODY,
            )
            .await;
        assert!(!outcome.success);
        assert_eq!(outcome.error.as_deref(), Some("invalid request"));
    }

    /// The workspace's check script (the `standardwebhooks` package from PyPI), when python3 has it.
    fn python_verifier() -> Option<std::path::PathBuf> {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/support/verify_webhook.py");
        let has_package = std::process::Command::new("python3")
            .args(["-c", "import standardwebhooks"])
            .output()
            .is_ok_and(|o| o.status.success());
        has_package.then_some(script)
    }

    fn python_accepts(
        script: &std::path::Path,
        secret: &str,
        id: &str,
        ts: &str,
        sig: &str,
        body: &[u8],
        now: Option<i64>,
    ) -> bool {
        use std::io::Write as _;
        let mut cmd = std::process::Command::new("python3");
        cmd.arg(script).args([secret, id, ts, sig]);
        if let Some(now) = now {
            cmd.args(["--now", &now.to_string()]);
        }
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(body).unwrap();
        let out = child.wait_with_output().unwrap();
        let code = out.status.code();
        assert!(
            matches!(code, Some(0 | 1)),
            "verify_webhook.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        code == Some(0)
    }

    #[tokio::test]
    async fn the_python_standardwebhooks_package_verifies_what_was_received() {
        // Installed by `cargo xtask test`; a missing checker is a failure, never a silent pass.
        let script = python_verifier().expect(
            "python3 with standardwebhooks is needed: pip install -r tests/support/requirements-webhooks.txt",
        );
        let mut rx = receiver(Reply::status(200)).await;
        let secret = WebhookSecret::generate();
        let body = r#"{"type":"link.created","timestamp":"2025-01-02T03:04:05Z","data":{"title":"café ☕"}}"#;
        let target = url(&format!("http://{}/", rx.addr));
        let outcome = Sender::new(true)
            .send(&target, &secret, "msg_py1", now_secs(), body.as_bytes())
            .await;
        assert!(outcome.success, "{outcome:?}");
        let seen = rx.seen.recv().await.unwrap();
        let header = |n| seen.header(n).unwrap();
        let (id, ts, sig) = (
            header("webhook-id"),
            header("webhook-timestamp"),
            header("webhook-signature"),
        );
        assert!(python_accepts(
            &script,
            secret.expose(),
            id,
            ts,
            sig,
            &seen.body,
            None
        ));
        // A changed body, another secret, an old timestamp: refused.
        let mut tampered = seen.body.clone();
        tampered[2] ^= 1;
        assert!(!python_accepts(
            &script,
            secret.expose(),
            id,
            ts,
            sig,
            &tampered,
            None
        ));
        let other = WebhookSecret::generate();
        assert!(!python_accepts(
            &script,
            other.expose(),
            id,
            ts,
            sig,
            &seen.body,
            None
        ));
        let old = "1674087231";
        let old_sig = sign(&secret, id, 1_674_087_231, &seen.body);
        assert!(!python_accepts(
            &script,
            secret.expose(),
            id,
            old,
            &old_sig,
            &seen.body,
            None
        ));
        // …unless the check's clock is set to the attempt's time (for tests with a fixed clock).
        assert!(python_accepts(
            &script,
            secret.expose(),
            id,
            old,
            &old_sig,
            &seen.body,
            Some(1_674_087_231 + 60)
        ));
    }
}
