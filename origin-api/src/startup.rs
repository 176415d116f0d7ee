//! Building and running the server: bind first (port 0 in tests), then serve until a signal.

use crate::http::{AppState, ClientIpSource, IpRateLimiter, app};
use crate::publisher::{PublisherHandle, Sink};
use secrecy::{ExposeSecret, SecretString};
use shortlink_store::{Db, StoreError};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Pool size when none is given (readers on SQLite, all connections on PostgreSQL).
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;
/// validate-dynamic: requests one IP may make at once, when not configured…
pub const DEFAULT_VALIDATE_BURST: u32 = 120;
/// …and per minute after that.
pub const DEFAULT_VALIDATE_PER_MINUTE: u32 = 600;
/// How long a request may take before it is answered with 503.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything `serve` needs. The command line builds it from `ServeArgs`; tests from [`Settings::new`]. Both
/// take their defaults from the constants above, so each default is stated once.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `sqlite://…` or `postgres://…` (secret: it may carry a password).
    pub database_url: SecretString,
    /// Address to listen on; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Pool size (readers on SQLite, all connections on PostgreSQL).
    pub max_connections: u32,
    /// Per-request time bound.
    pub request_timeout: Duration,
    /// Apply migrations before serving (development convenience; production runs `migrate`).
    pub migrate: bool,
    /// Header carrying the client IP when behind a proxy (None: the socket peer).
    pub client_ip_header: Option<String>,
    /// validate-dynamic: requests one IP may make at once…
    pub validate_burst: u32,
    /// …and per minute after that.
    pub validate_per_minute: u32,
    /// Where the publisher sends changes; None: no publisher in this process (the outbox
    /// keeps every change until one runs).
    pub sink: Option<Sink>,
    /// Secret the edge worker presents on `/internal/…`; None disables those routes.
    pub internal_secret: Option<SecretString>,
}

impl Settings {
    /// Defaults for a database URL: loopback, a random port (tests), no migration, no publisher.
    pub fn new(database_url: impl Into<String>) -> Self {
        Self {
            database_url: SecretString::from(database_url.into()),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            request_timeout: REQUEST_TIMEOUT,
            migrate: false,
            client_ip_header: None,
            validate_burst: DEFAULT_VALIDATE_BURST,
            validate_per_minute: DEFAULT_VALIDATE_PER_MINUTE,
            sink: None,
            internal_secret: None,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The database could not be opened or migrated.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Requested address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
}

/// A bound, ready-to-run server.
#[derive(Debug)]
pub struct Application {
    listener: TcpListener,
    addr: SocketAddr,
    state: AppState,
    sink: Option<Sink>,
}

impl Application {
    /// Connects the database, migrates if asked, and binds the listener.
    pub async fn build(settings: &Settings) -> Result<Self, StartError> {
        let db = Db::connect(
            settings.database_url.expose_secret(),
            settings.max_connections,
        )
        .await?;
        if settings.migrate {
            db.migrate().await?;
        }
        let listener =
            TcpListener::bind(settings.listen)
                .await
                .map_err(|source| StartError::Bind {
                    addr: settings.listen,
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: settings.listen,
            source,
        })?;
        let state = AppState {
            db,
            request_timeout: settings.request_timeout,
            client_ip: ClientIpSource {
                header: settings
                    .client_ip_header
                    .as_ref()
                    .map(|h| h.to_ascii_lowercase()),
            },
            validate_limiter: Arc::new(IpRateLimiter::new(
                settings.validate_burst,
                settings.validate_per_minute,
            )),
            internal_secret: settings
                .internal_secret
                .clone()
                .filter(|s| !s.expose_secret().is_empty()),
            publisher: PublisherHandle::default(),
        };
        Ok(Self {
            listener,
            addr,
            state,
            sink: settings.sink.clone(),
        })
    }

    /// The bound address (with the real port when 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Serves until `shutdown` resolves, then lets in-flight requests finish.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let db = self.state.db.clone();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let publisher = match self.sink {
            Some(sink) => Some(tokio::spawn(crate::publisher::run(
                db.clone(),
                sink,
                self.state.publisher.clone(),
                stopped,
            ))),
            None => {
                tracing::warn!(
                    "no KV sink configured: changes wait in the outbox until a publisher runs"
                );
                None
            }
        };
        let service = app(self.state).into_make_service_with_connect_info::<SocketAddr>();
        let result = axum::serve(self.listener, service)
            .with_graceful_shutdown(shutdown)
            .await;
        // Stop publishing between rounds: a round in flight finishes, so nothing half-done.
        let _ = stop.send(true);
        if let Some(p) = publisher {
            let _ = p.await;
        }
        db.close().await;
        result
    }
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down");
}
