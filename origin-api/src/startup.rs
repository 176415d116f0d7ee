//! Building and running the server: bind first (port 0 in tests), then serve until a signal.

use crate::http::{
    AppState, IpRateLimiter, Limits, RenderGate, Routes, app_for, metrics_app, metrics_handle,
};
use crate::publisher::{PublisherHandle, Sink};
use crate::retention::{PRUNE_INTERVAL, Retention};
use crate::webhooks::{WebhookHandle, WebhookSettings};
use client_addr::ClientAddrRule;
use secrecy::{ExposeSecret, SecretString};
use shortlink_store::{DEFAULT_HASH_WAIT, Db, HashLimit, StoreError};
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
pub use crate::retention::DEFAULT_CLICK_RETENTION_DAYS;
/// The shortest internal secret `serve` accepts, in bytes: 256 bits, as `openssl rand -hex 32` gives.
pub const MIN_INTERNAL_SECRET_BYTES: usize = 32;
/// Wrong-secret requests to `/internal/…` one address may make at once…
pub const INTERNAL_AUTH_FAILURE_BURST: u32 = 10;
/// …and per minute after that.
pub const INTERNAL_AUTH_FAILURES_PER_MINUTE: u32 = 10;
/// Longest raw click retention that can be configured (a hundred years: in effect, forever).
pub const MAX_CLICK_RETENTION_DAYS: u32 = 36_500;
/// Days activity-log rows are kept, when not configured.
pub const DEFAULT_AUDIT_RETENTION_DAYS: u32 = shortlink_store::DEFAULT_AUDIT_RETENTION_DAYS;
/// Longest activity-log retention that can be configured (a hundred years: in effect, forever).
pub const MAX_AUDIT_RETENTION_DAYS: u32 = 36_500;
/// Management writes per API key (and per account's dashboard) in any rolling minute, when not configured.
pub const DEFAULT_WRITE_LIMIT_PER_MINUTE: u32 = shortlink_store::DEFAULT_WRITES_PER_MINUTE;
/// Most groups an account may have (its default group included), when not configured.
pub const DEFAULT_MAX_GROUPS_PER_ACCOUNT: u32 = shortlink_store::DEFAULT_MAX_GROUPS_PER_ACCOUNT;
/// How long a PNG QR code or CSV export waits for a place under the render bound before it gets 503.
pub const RENDER_WAIT: Duration = Duration::from_secs(2);

/// PNG QR codes and CSV exports made at once, when not configured: one per core, so a burst of them leaves the
/// other requests no worse off than one busy core each.
pub fn default_render_concurrency() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

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
    /// With `X-Forwarded-For`: how many proxies the operator runs in front of the origin (the address is that
    /// many entries from the right).
    pub trusted_proxy_hops: usize,
    /// Password hashes (argon2id, 19 MiB each) computed at once; None: one per core.
    pub password_hash_concurrency: Option<usize>,
    /// How long a password check may wait for a place before it is answered "busy" (429): [`DEFAULT_HASH_WAIT`]
    /// (not an operator setting; tests shorten it).
    pub password_hash_wait: Duration,
    /// Management writes (link PATCH/DELETE, group writes) per API key, and per account's dashboard, in any
    /// rolling minute.
    pub write_limit_per_minute: u32,
    /// Most groups an account may have, its default group included.
    pub max_groups_per_account: u32,
    /// Links an account may import per UTC day.
    pub import_limit_per_day: u32,
    /// Whether this process runs imports (not an operator setting: a test plays the runners itself).
    pub import_runner: bool,
    /// PNG QR codes and CSV exports made at once in this process (at least 1)…
    pub render_concurrency: usize,
    /// …and how long one beyond waits for a place before it gets 503.
    pub render_wait: Duration,
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
    /// Days activity-log rows are kept (at least 1).
    pub audit_retention_days: u32,
    /// How often old raw clicks, batch ids and activity-log rows are pruned.
    pub prune_interval: Duration,
    /// How often the click reports' digest deltas are folded into the day rows ([`crate::click_folding`]).
    pub click_fold_interval: Duration,
    /// Transactions storing click reports at once on PostgreSQL; None: the store's default (not an operator
    /// setting: the bench compares counts).
    pub click_writers: Option<usize>,
    /// The origin's public base URL (`https://links-admin.example.com`): invitation URLs are built on it, form
    /// posts from it are accepted, and when it is https the dashboard's session cookie is `Secure`. None: the
    /// listen address over http (development).
    pub public_url: Option<String>,
    /// Outgoing mail (invitations, password resets): `smtp://user:password@host:port` or `smtps://…` (secret: it
    /// carries the password). None: nothing is mailed.
    pub smtp_url: Option<SecretString>,
    /// The sender of that mail (`Shortlink <no-reply@example.com>`); required with `smtp_url`.
    pub mail_from: Option<String>,
    /// Who may create an account on the dashboard.
    pub signup: SignupMode,
    /// The webhook delivery loop (`--webhooks-allow-private`; the rest only for tests).
    pub webhooks: WebhookSettings,
}

/// `--signup`: who may create an account on the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SignupMode {
    /// Only people invited (by the operator or an account's admins and owners); the sign-up page is a 404.
    #[default]
    Invite,
    /// Anyone, on "Create account" (throttled per client address): a user and an account they own.
    Open,
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
            trusted_proxy_hops: client_addr::DEFAULT_TRUSTED_PROXY_HOPS,
            password_hash_concurrency: None,
            password_hash_wait: DEFAULT_HASH_WAIT,
            write_limit_per_minute: DEFAULT_WRITE_LIMIT_PER_MINUTE,
            max_groups_per_account: DEFAULT_MAX_GROUPS_PER_ACCOUNT,
            import_limit_per_day: shortlink_store::DEFAULT_IMPORT_LIMIT_PER_DAY,
            import_runner: true,
            render_concurrency: default_render_concurrency(),
            render_wait: RENDER_WAIT,
            validate_burst: DEFAULT_VALIDATE_BURST,
            validate_per_minute: DEFAULT_VALIDATE_PER_MINUTE,
            sink: None,
            internal_secret: None,
            internal_listen: None,
            metrics_listen: None,
            click_retention_days: DEFAULT_CLICK_RETENTION_DAYS,
            audit_retention_days: DEFAULT_AUDIT_RETENTION_DAYS,
            prune_interval: PRUNE_INTERVAL,
            click_fold_interval: crate::click_folding::INTERVAL,
            click_writers: None,
            public_url: None,
            smtp_url: None,
            mail_from: None,
            signup: SignupMode::Invite,
            webhooks: WebhookSettings::default(),
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
    /// A setting is unusable.
    #[error("{0}")]
    Config(String),
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
    retention: Retention,
    prune_interval: Duration,
    click_fold_interval: Duration,
    import_runner: bool,
}

/// Forwards every commit signal handlers give (`wake`) to the publisher and to the webhook loop, which each wait
/// on a notifier of their own (a `Notify` wakes one waiter), until `stopped`.
async fn relay_wakes(
    wake: Arc<tokio::sync::Notify>,
    to: [Arc<tokio::sync::Notify>; 2],
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = wake.notified() => to.iter().for_each(|n| n.notify_one()),
            _ = stopped.wait_for(|s| *s) => return,
        }
    }
}

/// The mailer `--smtp-url` and `--mail-from` describe, or None without `--smtp-url`. Mail needs `--mail-from`
/// (a sender) and `--public-url` (every mailed link points there: a link built from a request's `Host` header
/// could send a working reset token to whatever site a client named). The URL is never in a message: it holds
/// the SMTP password.
fn mailer_for(settings: &Settings) -> Result<Option<Arc<mailer::Mailer>>, StartError> {
    let Some(url) = settings
        .smtp_url
        .as_ref()
        .filter(|u| !u.expose_secret().is_empty())
    else {
        return Ok(None);
    };
    let from = settings
        .mail_from
        .as_deref()
        .filter(|f| !f.trim().is_empty())
        .ok_or_else(|| {
            StartError::Config(
                "--smtp-url needs --mail-from (MAIL_FROM), the sender of the mail, e.g. `Shortlink <no-reply@example.com>`"
                    .to_owned(),
            )
        })?;
    if settings.public_url.is_none() {
        return Err(StartError::Config(
            "--smtp-url needs --public-url (PUBLIC_BASE_URL): mailed links point at the dashboard's public address"
                .to_owned(),
        ));
    }
    let mailer = mailer::Mailer::from_url(url.expose_secret(), from).map_err(|e| match e {
        mailer::MailError::From => StartError::Config(format!("--mail-from: {e}")),
        e => StartError::Config(format!("--smtp-url: {e}")),
    })?;
    Ok(Some(Arc::new(mailer)))
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
        let internal_secret = settings
            .internal_secret
            .clone()
            .filter(|s| !s.expose_secret().is_empty());
        if let Some(secret) = &internal_secret {
            // A short secret can be guessed offline from nothing; the worker's calls carry it on every request.
            if secret.expose_secret().len() < MIN_INTERNAL_SECRET_BYTES {
                return Err(StartError::Config(format!(
                    "INTERNAL_API_SECRET must be at least {MIN_INTERNAL_SECRET_BYTES} bytes (e.g. `openssl rand -hex 32`)"
                )));
            }
        }
        let mailer = mailer_for(settings)?;
        let client_ip = match &settings.client_ip_header {
            Some(name) => ClientAddrRule::header(name, settings.trusted_proxy_hops)
                .map_err(|e| StartError::Config(format!("--client-ip-header: {e}")))?,
            None => ClientAddrRule::peer(),
        };
        let hashing = match settings.password_hash_concurrency {
            Some(n) => HashLimit::new(n, settings.password_hash_wait),
            None => HashLimit::new(HashLimit::per_core().size(), settings.password_hash_wait),
        };
        let db = Db::connect(
            settings.database_url.expose_secret(),
            settings.max_connections,
        )
        .await?
        .with_hash_limit(hashing);
        let db = match settings.click_writers {
            Some(n) => db.with_click_writers(n),
            None => db,
        };
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
            client_ip,
            validate_limiter: Arc::new(IpRateLimiter::new(
                settings.validate_burst,
                settings.validate_per_minute,
            )),
            internal_secret,
            internal_auth_limiter: Arc::new(IpRateLimiter::new(
                INTERNAL_AUTH_FAILURE_BURST,
                INTERNAL_AUTH_FAILURES_PER_MINUTE,
            )),
            publisher: PublisherHandle::default(),
            limits: Limits {
                writes_per_minute: settings.write_limit_per_minute,
                max_groups_per_account: settings.max_groups_per_account,
                renders: RenderGate::new(settings.render_concurrency, settings.render_wait),
            },
            public_url: settings
                .public_url
                .as_ref()
                .map(|u| u.trim_end_matches('/').to_owned()),
            mailer,
            signup_open: settings.signup == SignupMode::Open,
            webhooks: WebhookHandle::new(settings.webhooks),
            imports: crate::imports::ImportHandle::new(settings.import_limit_per_day),
            click_retention_days: settings.click_retention_days,
        };
        Ok(Self {
            listener,
            addr,
            internal,
            metrics,
            state,
            sink: settings.sink.clone(),
            retention: Retention {
                click_days: settings.click_retention_days,
                audit_days: settings.audit_retention_days,
            },
            prune_interval: settings.prune_interval,
            click_fold_interval: settings.click_fold_interval,
            import_runner: settings.import_runner,
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
        // Handlers poke `publisher.wake` after a commit; the publisher and the webhook loop both hear it.
        let publisher_wake = Arc::new(tokio::sync::Notify::new());
        let relay = tokio::spawn(relay_wakes(
            self.state.publisher.wake.clone(),
            [publisher_wake.clone(), self.state.webhooks.wake.clone()],
            stopped.clone(),
        ));
        let webhooks = tokio::spawn(crate::webhooks::run(
            db.clone(),
            self.state.webhooks.settings,
            self.state.webhooks.wake.clone(),
            stopped.clone(),
        ));
        let publisher = match self.sink {
            Some(sink) => Some(tokio::spawn(crate::publisher::run(
                db.clone(),
                sink,
                crate::publisher::PublisherHandle {
                    wake: publisher_wake,
                    stats: self.state.publisher.stats.clone(),
                },
                stopped.clone(),
            ))),
            None => {
                tracing::warn!(
                    "no KV sink configured: changes wait in the outbox until a publisher runs"
                );
                None
            }
        };
        let imports = self.import_runner.then(|| {
            tokio::spawn(crate::imports::run(
                db.clone(),
                self.state.imports.clone(),
                stopped.clone(),
            ))
        });
        let salts = tokio::spawn(crate::visitor_salts::run(
            db.clone(),
            self.state.publisher.wake.clone(),
            stopped.clone(),
        ));
        let folding = tokio::spawn(crate::click_folding::run(
            db.clone(),
            self.click_fold_interval,
            stopped.clone(),
        ));
        let retention = tokio::spawn(crate::retention::run(
            db.clone(),
            self.retention,
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
            None => {
                // Over https the listener faces the internet; the worker's routes then answer anyone who tries
                // secrets. They are throttled per address, but a listener of their own keeps them off it.
                let https = self
                    .state
                    .public_url
                    .as_deref()
                    .is_some_and(|u| u.starts_with("https://"));
                if https && self.state.internal_secret.is_some() {
                    tracing::warn!(
                        "internal routes share the public listener; serve them on a private address with --internal-listen"
                    );
                }
                Routes::All
            }
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
        let _ = salts.await;
        let _ = folding.await;
        let _ = webhooks.await;
        if let Some(i) = imports {
            let _ = i.await;
        }
        let _ = relay.await;
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
