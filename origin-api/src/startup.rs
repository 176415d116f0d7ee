//! Building and running the server: bind first (port 0 in tests), then serve until a signal.

use crate::http::{
    AppState, ClientIpSource, IpRateLimiter, Routes, app_for, metrics_app, metrics_handle,
};
use crate::publisher::{PublisherHandle, Sink};
use crate::retention::PRUNE_INTERVAL;
use secrecy::{ExposeSecret, SecretString};
use shortlink_store::{Db, StoreError};
use std::future::{Future, IntoFuture};
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
/// Days raw click events are kept, when not configured.
pub const DEFAULT_CLICK_RETENTION_DAYS: u32 = 90;
/// Longest raw click retention that can be configured (a hundred years: in effect, forever).
pub const MAX_CLICK_RETENTION_DAYS: u32 = 36_500;

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
    /// Serve `/internal/v1/…` on this address only (not on `listen`); None: on `listen`.
    pub internal_listen: Option<SocketAddr>,
    /// Serve Prometheus metrics (`GET /metrics`) on this address; None: no metrics listener.
    pub metrics_listen: Option<SocketAddr>,
    /// Days raw click events are kept (at least 1); the day counters behind the statistics are kept forever.
    pub click_retention_days: u32,
    /// How often old raw clicks and batch ids are pruned.
    pub prune_interval: Duration,
    /// The origin's public base URL (`https://links-admin.example.com`): invitation URLs are built on it, form
    /// posts from it are accepted, and when it is https the dashboard's session cookie is `Secure`. None: the
    /// listen address over http (development).
    pub public_url: Option<String>,
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
            internal_listen: None,
            metrics_listen: None,
            click_retention_days: DEFAULT_CLICK_RETENTION_DAYS,
            prune_interval: PRUNE_INTERVAL,
            public_url: None,
        }
    }

    /// The public base URL without a trailing slash: the setting, or `http://<listen address>`.
    pub fn public_base_url(&self) -> String {
        self.public_url
            .as_deref()
            .map(|u| u.trim_end_matches('/').to_owned())
            .unwrap_or_else(|| format!("http://{}", self.listen))
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The database could not be opened or migrated.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The metrics recorder could not be installed.
    #[error("metrics: {0}")]
    Metrics(String),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Requested address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
}

/// A bound, ready-to-run server: the public listener, and the internal and metrics listeners when asked for.
#[derive(Debug)]
pub struct Application {
    listener: TcpListener,
    addr: SocketAddr,
    internal: Option<(TcpListener, SocketAddr)>,
    metrics: Option<(
        TcpListener,
        SocketAddr,
        metrics_exporter_prometheus::PrometheusHandle,
    )>,
    state: AppState,
    sink: Option<Sink>,
    click_retention_days: u32,
    prune_interval: Duration,
}

/// Binds `addr`, and reads back the port the system chose for port 0.
async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), StartError> {
    let failed = |source| StartError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(failed)?;
    let bound = listener.local_addr().map_err(failed)?;
    Ok((listener, bound))
}

impl Application {
    /// Connects the database, migrates if asked, and binds the listeners.
    pub async fn build(settings: &Settings) -> Result<Self, StartError> {
        let db = Db::connect(
            settings.database_url.expose_secret(),
            settings.max_connections,
        )
        .await?;
        if settings.migrate {
            db.migrate().await?;
        }
        let (listener, addr) = bind(settings.listen).await?;
        let internal = match settings.internal_listen {
            Some(a) => Some(bind(a).await?),
            None => None,
        };
        let metrics = match settings.metrics_listen {
            Some(a) => {
                let handle = metrics_handle().map_err(StartError::Metrics)?;
                let (l, bound) = bind(a).await?;
                Some((l, bound, handle))
            }
            None => None,
        };
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
            public_url: settings
                .public_url
                .as_ref()
                .map(|u| u.trim_end_matches('/').to_owned()),
        };
        Ok(Self {
            listener,
            addr,
            internal,
            metrics,
            state,
            sink: settings.sink.clone(),
            click_retention_days: settings.click_retention_days,
            prune_interval: settings.prune_interval,
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

    /// The internal listener's address, when `/internal/v1/…` has one of its own.
    pub fn internal_addr(&self) -> Option<SocketAddr> {
        self.internal.as_ref().map(|(_, a)| *a)
    }

    /// The metrics listener's address, when metrics are on.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(|(_, a, _)| *a)
    }

    /// Serves until `shutdown` resolves, then lets in-flight requests finish on every listener.
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
                stopped.clone(),
            ))),
            None => {
                tracing::warn!(
                    "no KV sink configured: changes wait in the outbox until a publisher runs"
                );
                None
            }
        };
        let retention = tokio::spawn(crate::retention::run(
            db.clone(),
            self.click_retention_days,
            self.prune_interval,
            stopped.clone(),
        ));
        // Every listener stops when `shutdown` resolves (one signal, told to each).
        let until_stopped = || {
            let mut stopped = stopped.clone();
            async move {
                let _ = stopped.wait_for(|s| *s).await;
            }
        };
        let serve = |listener: TcpListener, router: axum::Router| {
            let service = router.into_make_service_with_connect_info::<SocketAddr>();
            tokio::spawn(
                axum::serve(listener, service)
                    .with_graceful_shutdown(until_stopped())
                    .into_future(),
            )
        };
        let mut others = Vec::new();
        let public_routes = match self.internal {
            Some((listener, addr)) => {
                tracing::info!(%addr, "internal routes on their own listener");
                others.push(serve(
                    listener,
                    app_for(self.state.clone(), Routes::Internal),
                ));
                Routes::Public
            }
            None => Routes::All,
        };
        if let Some((listener, addr, handle)) = self.metrics {
            tracing::info!(%addr, "metrics at /metrics");
            others.push(serve(listener, metrics_app(self.state.clone(), handle)));
        }
        let mut public = serve(self.listener, app_for(self.state, public_routes));
        // The signal, or the public server failing on its own.
        let ended = tokio::select! {
            () = shutdown => None,
            r = &mut public => Some(r),
        };
        // Stop accepting everywhere and stop publishing between rounds: a round in flight finishes.
        let _ = stop.send(true);
        let result = match ended {
            Some(r) => r,
            None => public.await,
        }
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        for other in others {
            let _ = other.await;
        }
        if let Some(p) = publisher {
            let _ = p.await;
        }
        let _ = retention.await;
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
