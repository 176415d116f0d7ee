//! The `origin-api` command line (DESIGN.md "Operator CLI"): `serve`, `migrate` and `admin …`.
//! Admin commands print one JSON object on stdout and exit 0, or a message on stderr and 1.

use crate::publisher::Sink;
use crate::retention::PRUNE_INTERVAL;
use crate::startup::{
    Application, DEFAULT_CLICK_RETENTION_DAYS, DEFAULT_MAX_CONNECTIONS, DEFAULT_VALIDATE_BURST,
    DEFAULT_VALIDATE_PER_MINUTE, MAX_CLICK_RETENTION_DAYS, REQUEST_TIMEOUT, Settings,
    shutdown_signal,
};
use crate::startup::{DEFAULT_AUDIT_RETENTION_DAYS, MAX_AUDIT_RETENTION_DAYS, SignupMode};
use crate::startup::{
    DEFAULT_MAX_GROUPS_PER_ACCOUNT, DEFAULT_WRITE_LIMIT_PER_MINUTE, RENDER_WAIT,
    default_render_concurrency,
};
use clap::{Args, Parser, Subcommand};
use secrecy::SecretString;
use serde_json::{Value, json};
use shortlink_store::domain::{GroupSettings, Hostname, LongUrl, Password, Role};
use shortlink_store::{Acting, Actor, Db, DomainOwner, DomainRow, GroupRow, LinkPatch, StoreError};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;

/// Default database: an SQLite file in the working directory.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://shortlink.db";

/// Shortlink origin server and operator tool.
#[derive(Debug, Parser)]
#[command(name = "origin-api", version, about)]
pub struct Cli {
    /// Database: sqlite://FILE or postgres://USER@HOST/DB.
    #[arg(long, env = "DATABASE_URL", default_value = DEFAULT_DATABASE_URL, global = true, hide_env_values = true)]
    pub database_url: String,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the HTTP API (boxed: its many settings would make every other command as large).
    Serve(Box<ServeArgs>),
    /// Apply pending migrations and exit.
    Migrate,
    /// Operator commands.
    #[command(subcommand)]
    Admin(Admin),
}

/// Reads a secret straight into a [`SecretString`], so it never sits in a plain `String` that `Debug` prints.
fn secret(value: &str) -> Result<SecretString, Infallible> {
    Ok(SecretString::from(value))
}

/// `serve`: every setting of the server, each with its environment variable; the defaults are
/// [`crate::startup`]'s constants, shared with [`Settings::new`].
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The global `--database-url` / `DATABASE_URL`.
    #[arg(from_global)]
    database_url: String,
    /// Address to listen on.
    #[arg(long, env = "LISTEN_ADDR", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Apply pending migrations first (for development; production runs `migrate`).
    #[arg(long)]
    migrate: bool,
    /// Database pool size.
    #[arg(long, env = "DATABASE_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    max_connections: u32,
    /// Take the client IP from this header, set by the proxy in front of the origin: CF-Connecting-IP behind
    /// Cloudflare, X-Forwarded-For (see --trusted-proxy-hops) or X-Real-IP behind nginx. A value that is not an IP
    /// address is ignored. Default: the TCP peer address (the origin is reached directly).
    #[arg(long, env = "CLIENT_IP_HEADER")]
    client_ip_header: Option<String>,
    /// With --client-ip-header X-Forwarded-For: how many proxies of yours are in front of the origin; the client
    /// is that many entries from the right of the list (the entries left of it are the client's own words).
    #[arg(long, env = "TRUSTED_PROXY_HOPS", default_value_t = client_addr::DEFAULT_TRUSTED_PROXY_HOPS as u64,
          value_parser = clap::value_parser!(u64).range(1..=client_addr::MAX_TRUSTED_PROXY_HOPS as u64))]
    trusted_proxy_hops: u64,
    /// Password hashes (argon2id, 19 MiB each) computed at once, for sign-in, invitations and password checks;
    /// beyond it a request waits up to 2 s, then gets 429. Default: the number of cores.
    #[arg(long, env = "PASSWORD_HASH_CONCURRENCY",
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    password_hash_concurrency: Option<u64>,
    /// validate-dynamic: burst of requests allowed per client IP.
    #[arg(long, env = "VALIDATE_BURST", default_value_t = DEFAULT_VALIDATE_BURST)]
    validate_burst: u32,
    /// validate-dynamic: sustained requests per minute per client IP.
    #[arg(long, env = "VALIDATE_PER_MINUTE", default_value_t = DEFAULT_VALIDATE_PER_MINUTE)]
    validate_per_minute: u32,
    /// Management writes (link PATCH/DELETE, group create/update/delete/rotate) per API key, and per account's
    /// dashboard, in any rolling minute; beyond it 429. create-link keeps its own 100 an hour.
    #[arg(long, env = "WRITE_LIMIT_PER_MINUTE", default_value_t = DEFAULT_WRITE_LIMIT_PER_MINUTE,
          value_parser = clap::value_parser!(u32).range(1..))]
    write_limit_per_minute: u32,
    /// Most groups an account may have, its default group included; beyond it 400.
    #[arg(long, env = "MAX_GROUPS_PER_ACCOUNT", default_value_t = DEFAULT_MAX_GROUPS_PER_ACCOUNT,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_groups_per_account: u32,
    /// Links an account may import (`POST links/import`) per UTC day; rows beyond it fail with `import_limit`.
    #[arg(long, env = "IMPORT_LIMIT_PER_DAY", default_value_t = shortlink_store::DEFAULT_IMPORT_LIMIT_PER_DAY,
          value_parser = clap::value_parser!(u32).range(1..))]
    import_limit_per_day: u32,
    /// PNG QR codes and CSV exports made at once; beyond it a request waits up to 2 s, then gets 503.
    /// Default: the number of cores.
    #[arg(long, env = "RENDER_CONCURRENCY",
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    render_concurrency: Option<u64>,
    /// Where changes are published.
    #[command(flatten)]
    sink: SinkArgs,
    /// Secret the edge worker presents on /internal/… (KV-miss lookups, click events); at least 32 bytes, e.g.
    /// `openssl rand -hex 32`.
    #[arg(long, env = "INTERNAL_API_SECRET", hide_env_values = true, value_parser = secret)]
    internal_api_secret: Option<SecretString>,
    /// Serve /internal/v1/… on this address only, e.g. a private interface the worker reaches through a
    /// tunnel; they then answer 404 on --listen. Default: on --listen.
    #[arg(long, env = "INTERNAL_LISTEN_ADDR")]
    internal_listen: Option<SocketAddr>,
    /// Serve Prometheus metrics (GET /metrics) on this address. Default: off.
    #[arg(long, env = "METRICS_LISTEN_ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Days raw click events are kept (1 to 36500); older ones are pruned hourly. Statistics are kept
    /// regardless: they come from day counters.
    #[arg(long, env = "CLICK_RETENTION_DAYS", default_value_t = DEFAULT_CLICK_RETENTION_DAYS,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_CLICK_RETENTION_DAYS)))]
    click_retention_days: u32,
    /// Days activity-log rows (the audit trail) are kept (1 to 36500); older ones are pruned hourly.
    #[arg(long, env = "AUDIT_RETENTION_DAYS", default_value_t = DEFAULT_AUDIT_RETENTION_DAYS,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_AUDIT_RETENTION_DAYS)))]
    audit_retention_days: u32,
    /// The origin's public base URL, e.g. https://links-admin.example.com: dashboard invitations point there, and
    /// over https the dashboard's session cookie is Secure (set it when a TLS proxy is in front). Default: the
    /// listen address over http.
    #[arg(long, env = "PUBLIC_BASE_URL", value_parser = public_url)]
    public_url: Option<String>,
    /// Mail invitations and password-reset links through this SMTP server: smtp://user:password@host:port (no
    /// TLS; add ?tls=required for STARTTLS) or smtps://user:password@host:port (TLS). Needs --mail-from and
    /// --public-url. Default: no mail ("Forgot password" says to ask the operator).
    #[arg(long, env = "SMTP_URL", hide_env_values = true, value_parser = secret)]
    smtp_url: Option<SecretString>,
    /// The sender of that mail, e.g. "Shortlink <no-reply@example.com>".
    #[arg(long, env = "MAIL_FROM")]
    mail_from: Option<String>,
    /// Who may create an account on the dashboard: invite (invited people only) or open (anyone, on "Create
    /// account", throttled per client address).
    #[arg(long, env = "SIGNUP_MODE", value_enum, default_value_t = SignupMode::Invite)]
    signup: SignupMode,
    /// Allow webhook endpoints on loopback, private and link-local addresses, and plain http:// URLs (receivers on
    /// a private network, tests). Default: https only, and hosts must resolve to public addresses only (checked
    /// when an endpoint is saved and at each delivery).
    #[arg(long, env = "WEBHOOKS_ALLOW_PRIVATE", action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::BoolishValueParser::new())]
    webhooks_allow_private: bool,
}

/// An http(s) base URL without path, query or credentials.
fn public_url(raw: &str) -> Result<String, String> {
    let rest = raw
        .strip_prefix("https://")
        .or_else(|| raw.strip_prefix("http://"))
        .ok_or("must start with https:// or http://")?;
    let host = rest.trim_end_matches('/');
    if host.is_empty()
        || host.contains(['/', '?', '#', '@'])
        || host.chars().any(char::is_whitespace)
    {
        return Err(
            "must be a scheme and a host (and port), e.g. https://links-admin.example.com"
                .to_owned(),
        );
    }
    Ok(raw.trim_end_matches('/').to_owned())
}

impl From<ServeArgs> for Settings {
    fn from(a: ServeArgs) -> Self {
        Settings {
            database_url: SecretString::from(a.database_url),
            listen: a.listen,
            max_connections: a.max_connections,
            request_timeout: REQUEST_TIMEOUT,
            migrate: a.migrate,
            client_ip_header: a.client_ip_header,
            // Both bounded by their parsers (16 and 1024).
            trusted_proxy_hops: usize::try_from(a.trusted_proxy_hops).unwrap_or(usize::MAX),
            password_hash_concurrency: a
                .password_hash_concurrency
                .and_then(|n| usize::try_from(n).ok()),
            password_hash_wait: shortlink_store::DEFAULT_HASH_WAIT,
            write_limit_per_minute: a.write_limit_per_minute,
            max_groups_per_account: a.max_groups_per_account,
            import_limit_per_day: a.import_limit_per_day,
            import_runner: true,
            // Bounded by its parser (1024).
            render_concurrency: a
                .render_concurrency
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or_else(default_render_concurrency),
            render_wait: RENDER_WAIT,
            validate_burst: a.validate_burst,
            validate_per_minute: a.validate_per_minute,
            sink: a.sink.into(),
            internal_secret: a.internal_api_secret,
            internal_listen: a.internal_listen,
            metrics_listen: a.metrics_listen,
            click_retention_days: a.click_retention_days,
            audit_retention_days: a.audit_retention_days,
            prune_interval: PRUNE_INTERVAL,
            click_fold_interval: crate::click_folding::INTERVAL,
            click_writers: None,
            public_url: a.public_url,
            smtp_url: a.smtp_url,
            mail_from: a.mail_from,
            signup: a.signup,
            webhooks: crate::webhooks::WebhookSettings {
                allow_private: a.webhooks_allow_private,
                ..Default::default()
            },
        }
    }
}

/// The publisher's sink: the worker's sync route, or the Cloudflare KV REST API. The argument parser enforces
/// that one of them is given whole, or neither (then the outbox keeps every change until a publisher runs).
#[derive(Debug, Args)]
pub struct SinkArgs {
    /// The worker's sync route, e.g. http://127.0.0.1:8787/__shortlink/sync.
    #[arg(long, env = "EDGE_SYNC_URL", requires = "edge_sync_secret")]
    edge_sync_url: Option<String>,
    /// The worker's SYNC_SECRET.
    #[arg(long, env = "EDGE_SYNC_SECRET", hide_env_values = true, value_parser = secret,
          requires = "edge_sync_url", conflicts_with_all = ["cf_account_id", "cf_kv_namespace_id", "cf_api_token"])]
    edge_sync_secret: Option<SecretString>,
    /// Cloudflare account id (KV REST API sink).
    #[arg(long, env = "CF_ACCOUNT_ID", requires_all = ["cf_kv_namespace_id", "cf_api_token"],
          conflicts_with = "edge_sync_url")]
    cf_account_id: Option<String>,
    /// Workers KV namespace id.
    #[arg(long, env = "CF_KV_NAMESPACE_ID", requires = "cf_account_id")]
    cf_kv_namespace_id: Option<String>,
    /// API token with Workers KV Storage:Edit.
    #[arg(long, env = "CF_API_TOKEN", hide_env_values = true, value_parser = secret, requires = "cf_account_id")]
    cf_api_token: Option<SecretString>,
    /// API base URL.
    #[arg(
        long,
        env = "CF_API_BASE",
        default_value = "https://api.cloudflare.com/client/v4"
    )]
    cf_api_base: String,
}

impl From<SinkArgs> for Option<Sink> {
    fn from(a: SinkArgs) -> Self {
        // The parser admits only whole combinations (see the `requires` and `conflicts_with` above).
        if let (Some(url), Some(secret)) = (a.edge_sync_url, a.edge_sync_secret) {
            return Some(Sink::WorkerSync { url, secret });
        }
        let (Some(account_id), Some(namespace_id), Some(api_token)) =
            (a.cf_account_id, a.cf_kv_namespace_id, a.cf_api_token)
        else {
            return None;
        };
        Some(Sink::CloudflareKv {
            api_base: a.cf_api_base,
            account_id,
            namespace_id,
            api_token,
        })
    }
}

/// `admin` subcommands.
#[derive(Debug, Subcommand)]
pub enum Admin {
    /// Accounts.
    #[command(subcommand)]
    Account(AccountCmd),
    /// API keys.
    #[command(subcommand, name = "api-key")]
    ApiKey(ApiKeyCmd),
    /// Link groups.
    #[command(subcommand)]
    Group(GroupCmd),
    /// Link domains.
    #[command(subcommand)]
    Domain(DomainCmd),
    /// An account's members (teams).
    #[command(subcommand)]
    Member(MemberCmd),
    /// Users: the people who sign in to the dashboard.
    #[command(subcommand)]
    User(UserCmd),
    /// Blocked destination domains.
    #[command(subcommand)]
    Blocklist(BlocklistCmd),
    /// Any account's links (abuse response).
    #[command(subcommand)]
    Link(LinkCmd),
    /// Queue every link, group, domain and the blocklist for publishing again (a fresh KV
    /// namespace, or a local edge whose KV starts empty).
    Republish,
    /// SQLite: write a consistent copy of the database to a new file while the server runs (PostgreSQL: pg_dump).
    Backup {
        /// The copy; must not exist yet.
        #[arg(long)]
        to: std::path::PathBuf,
    },
}

/// `admin account`.
#[derive(Debug, Subcommand)]
pub enum AccountCmd {
    /// Create an account and its default group.
    Create {
        /// Account email.
        #[arg(long)]
        email: String,
        /// Create the account without permission to use the management API (its key gets 403).
        #[arg(long)]
        no_api_access: bool,
    },
    /// Invite the holder of EMAIL to the dashboard (creating the account if there is none): prints a one-use URL
    /// where they set their password, valid 72 hours. A new invitation replaces the previous one.
    Invite {
        /// Account email.
        #[arg(long)]
        email: String,
        /// The origin's public base URL the invitation points at (as `serve --public-url`).
        #[arg(long, env = "PUBLIC_BASE_URL", value_parser = public_url)]
        public_url: Option<String>,
        /// Used when no public URL is set: the invitation points at this listen address over http.
        #[arg(long, env = "LISTEN_ADDR", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
    },
    /// Set the dashboard password of EMAIL's account, read from the first line of standard input (never an
    /// argument: those show in the process list). For seeding; people set theirs through an invitation.
    SetPassword {
        /// Account email.
        #[arg(long)]
        email: String,
    },
    /// Look an account up by email (extension: for scripts that seed idempotently).
    Get {
        /// Account email.
        #[arg(long)]
        email: String,
    },
    /// Every account, oldest first.
    List,
    /// Disable an account: its key gets 403 on every route and its links stop at the edge.
    Disable {
        /// Account id.
        #[arg(long)]
        id: String,
    },
    /// Enable a disabled account again.
    Enable {
        /// Account id.
        #[arg(long)]
        id: String,
    },
}

/// `admin member`: who belongs to an account, with which role.
#[derive(Debug, Subcommand)]
pub enum MemberCmd {
    /// The account's members, owners first: {"results": [{"email", "role", "joined"}]}.
    List {
        /// Account id.
        #[arg(long)]
        account: String,
    },
    /// Invite EMAIL to the account with ROLE: prints {"invite_url", "expires_at"} (one use, 72 hours). A new
    /// invitation of the same email replaces the previous one.
    Invite {
        /// Account id.
        #[arg(long)]
        account: String,
        /// Who is invited.
        #[arg(long)]
        email: String,
        /// viewer, member, admin or owner.
        #[arg(long)]
        role: String,
        /// The origin's public base URL the invitation points at (as `serve --public-url`).
        #[arg(long, env = "PUBLIC_BASE_URL", value_parser = public_url)]
        public_url: Option<String>,
        /// Used when no public URL is set: the invitation points at this listen address over http.
        #[arg(long, env = "LISTEN_ADDR", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
    },
    /// Make EMAIL a member with ROLE at once, with the password read from the first line of standard input
    /// (creating the user when there is none). For seeding demo accounts; people join through invitations.
    Add {
        /// Account id.
        #[arg(long)]
        account: String,
        /// The user's email.
        #[arg(long)]
        email: String,
        /// viewer, member, admin or owner.
        #[arg(long)]
        role: String,
    },
    /// Remove EMAIL from the account (not its last owner); their sessions lose the account at once.
    Remove {
        /// Account id.
        #[arg(long)]
        account: String,
        /// The member's email.
        #[arg(long)]
        email: String,
    },
}

/// `admin user`: people, across accounts.
#[derive(Debug, Subcommand)]
pub enum UserCmd {
    /// Disable the user with EMAIL: they cannot sign in, and every session of theirs ends now.
    Disable {
        /// The user's email.
        #[arg(long)]
        email: String,
    },
    /// Enable a disabled user again.
    Enable {
        /// The user's email.
        #[arg(long)]
        email: String,
    },
}

/// `admin link`: any account's link, by id.
#[derive(Debug, Subcommand)]
pub enum LinkCmd {
    /// Pause a link: visitors go to the domain's fallback.
    Pause {
        /// Link id.
        #[arg(long)]
        id: String,
    },
    /// Resume a paused link.
    Resume {
        /// Link id.
        #[arg(long)]
        id: String,
    },
    /// Delete a link.
    Delete {
        /// Link id.
        #[arg(long)]
        id: String,
    },
}

/// `admin api-key`.
#[derive(Debug, Subcommand)]
pub enum ApiKeyCmd {
    /// Generate the account's key, replacing any previous one. Printed once.
    Generate {
        /// Account id.
        #[arg(long)]
        account: String,
    },
    /// Delete the account's key.
    Revoke {
        /// Account id.
        #[arg(long)]
        account: String,
    },
}

/// `admin group`.
#[derive(Debug, Subcommand)]
pub enum GroupCmd {
    /// Create a group.
    Create {
        /// Owner account id.
        #[arg(long)]
        account: String,
        /// Group name.
        #[arg(long)]
        name: String,
        /// Settings JSON (see README "Group settings").
        #[arg(long)]
        settings: Option<String>,
        /// Refuse the group when the account already has this many (as `serve --max-groups-per-account`).
        #[arg(long, env = "MAX_GROUPS_PER_ACCOUNT", default_value_t = DEFAULT_MAX_GROUPS_PER_ACCOUNT,
              value_parser = clap::value_parser!(u32).range(1..))]
        max_groups_per_account: u32,
    },
    /// Replace a group's settings.
    Update {
        /// Group id.
        #[arg(long)]
        id: String,
        /// Settings JSON.
        #[arg(long)]
        settings: String,
    },
    /// Delete a group (its links move to the account's default group).
    Delete {
        /// Group id.
        #[arg(long)]
        id: String,
    },
    /// List an account's groups with their keys (extension: what the dashboard shows).
    List {
        /// Account id.
        #[arg(long)]
        account: String,
    },
}

/// `admin domain`.
#[derive(Debug, Subcommand)]
pub enum DomainCmd {
    /// Add an enabled domain.
    Add(DomainAdd),
    /// Disable a domain.
    Disable {
        /// Domain id.
        #[arg(long)]
        id: String,
    },
}

/// `admin domain add` arguments.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("owner").required(true).args(["platform", "account"])))]
pub struct DomainAdd {
    /// Hostname.
    #[arg(long)]
    host: String,
    /// A platform domain, shared by all accounts.
    #[arg(long)]
    platform: bool,
    /// A custom domain of this account.
    #[arg(long)]
    account: Option<String>,
    /// Where visitors go when a link on this domain cannot be served.
    #[arg(long)]
    fallback_url: Option<String>,
}

/// `admin blocklist`.
#[derive(Debug, Subcommand)]
pub enum BlocklistCmd {
    /// Block a destination domain and its subdomains.
    Add {
        /// Domain.
        #[arg(long)]
        domain: String,
    },
}

/// A failed admin command: what went wrong, for stderr.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// Runs a parsed command line and returns the process exit code.
pub async fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Serve(args) => serve(&Settings::from(*args)).await,
        Command::Migrate => report(
            async {
                connect(&cli.database_url).await?.migrate().await?;
                Ok(json!({}))
            }
            .await,
        ),
        Command::Admin(cmd) => report(admin(&cli.database_url, cmd).await),
    }
}

async fn serve(settings: &Settings) -> ExitCode {
    let app = match Application::build(settings).await {
        Ok(app) => app,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(addr = %app.addr(), "listening");
    match app.run_until(shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn connect(url: &str) -> Result<Db, CliError> {
    Ok(Db::connect(url, 2).await?)
}

fn report(result: Result<Value, CliError>) -> ExitCode {
    match result {
        Ok(v) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let msg = e.to_string();
            eprintln!("error: {msg}");
            if msg.contains("no such table") || msg.contains("does not exist") {
                eprintln!("hint: run `origin-api migrate` first");
            }
            ExitCode::FAILURE
        }
    }
}

/// A password from the first line of standard input (never an argument: those show in the process list).
fn password_from_stdin() -> Result<Password, CliError> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| invalid(format!("cannot read the password from standard input: {e}")))?;
    let line = line.trim_end_matches(['\r', '\n']);
    Password::new(line, line).map_err(invalid)
}

fn invalid(e: impl std::fmt::Display) -> CliError {
    CliError::Invalid(e.to_string())
}

fn settings(json: Option<&str>) -> Result<GroupSettings, CliError> {
    json.map(GroupSettings::parse)
        .transpose()
        .map_err(invalid)
        .map(Option::unwrap_or_default)
}

/// A group as admin commands print it: with its key (the operator hands it to the account holder).
fn group_json(g: GroupRow) -> Value {
    json!({ "id": g.id, "name": g.name, "key": g.key, "settings": g.settings, "is_default": g.is_default })
}

/// A link id from the command line, normalised like the API's.
fn link_id(raw: &str) -> Result<String, CliError> {
    uuid::Uuid::try_parse(raw)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| invalid(format!("--id {raw:?} is not a UUID")))
}

/// Pauses or resumes any account's link.
async fn set_link_active(db: &Db, id: &str, active: bool) -> Result<Value, CliError> {
    let id = link_id(id)?;
    let account = db.link_account(&id).await?;
    let patch = LinkPatch {
        is_active: Some(active),
        ..LinkPatch::default()
    };
    let link = db
        .update_link(&account, &id, &patch, &Actor::Operator)
        .await?;
    Ok(json!({ "id": link.id, "is_active": link.is_active }))
}

/// `admin member …`: the operator acts as an owner would, and the activity log says "operator".
async fn member(db: &Db, cmd: MemberCmd) -> Result<Value, CliError> {
    Ok(match cmd {
        MemberCmd::List { account } => {
            if !db.list_accounts().await?.iter().any(|a| a.id == account) {
                return Err(StoreError::NotFound(shortlink_store::Entity::Account).into());
            }
            let members: Vec<Value> = db
                .members(&account)
                .await?
                .into_iter()
                .map(|m| {
                    json!({ "email": m.email, "role": m.role.as_str(),
                            "joined": m.joined.to_iso8601() })
                })
                .collect();
            json!({ "results": members })
        }
        MemberCmd::Invite {
            account,
            email,
            role,
            public_url,
            listen,
        } => {
            let role: Role = role.parse().map_err(invalid)?;
            let invite = db
                .invite_member(&account, &Acting::operator(), &email, role)
                .await?;
            let base = public_url.unwrap_or_else(|| format!("http://{listen}"));
            json!({
                "invite_url": format!("{base}/dashboard/invite/{}", invite.token.expose()),
                "expires_at": invite.expires_at.to_iso8601(),
            })
        }
        MemberCmd::Add {
            account,
            email,
            role,
        } => {
            let role: Role = role.parse().map_err(invalid)?;
            let password = password_from_stdin()?;
            let user_id = db
                .add_member_with_password(&account, &email, role, &password)
                .await?;
            json!({ "user_id": user_id })
        }
        MemberCmd::Remove { account, email } => {
            let m = db.member_by_email(&account, &email).await?;
            db.remove_member(&account, &Acting::operator(), &m.user_id)
                .await?;
            json!({})
        }
    })
}

async fn admin(url: &str, cmd: Admin) -> Result<Value, CliError> {
    let db = connect(url).await?;
    let out = match cmd {
        Admin::Account(AccountCmd::Create {
            email,
            no_api_access,
        }) => {
            let a = db.create_account(&email, !no_api_access).await?;
            json!({ "id": a.id, "default_group_id": a.default_group_id })
        }
        Admin::Account(AccountCmd::Invite {
            email,
            public_url,
            listen,
        }) => {
            let invite = db.invite(&email).await?;
            let base = public_url.unwrap_or_else(|| format!("http://{listen}"));
            json!({
                "invite_url": format!("{base}/dashboard/invite/{}", invite.token.expose()),
                "expires_at": invite.expires_at.to_iso8601(),
            })
        }
        Admin::Account(AccountCmd::SetPassword { email }) => {
            let password = password_from_stdin()?;
            let user_id = db.set_password(&email, &password).await?;
            json!({ "id": user_id })
        }
        Admin::Account(AccountCmd::Get { email }) => {
            let a = db.find_account(&email).await?;
            json!({ "id": a.id, "default_group_id": a.default_group_id })
        }
        Admin::Account(AccountCmd::List) => {
            let accounts: Vec<Value> = db
                .list_accounts()
                .await?
                .into_iter()
                .map(|a| {
                    json!({ "id": a.id, "email": a.email, "api_access": a.api_access,
                            "disabled": a.disabled, "created_at": a.created_at })
                })
                .collect();
            json!({ "results": accounts })
        }
        Admin::Account(AccountCmd::Disable { id }) => {
            db.set_account_disabled(&id, true).await?;
            json!({})
        }
        Admin::Account(AccountCmd::Enable { id }) => {
            db.set_account_disabled(&id, false).await?;
            json!({})
        }
        Admin::Link(LinkCmd::Pause { id }) => set_link_active(&db, &id, false).await?,
        Admin::Link(LinkCmd::Resume { id }) => set_link_active(&db, &id, true).await?,
        Admin::Link(LinkCmd::Delete { id }) => {
            let id = link_id(&id)?;
            let account = db.link_account(&id).await?;
            db.delete_link(&account, &id, &Actor::Operator).await?;
            json!({})
        }
        Admin::ApiKey(ApiKeyCmd::Generate { account }) => {
            json!({ "api_key": db.generate_api_key(&account, &Actor::Operator).await?.expose() })
        }
        Admin::ApiKey(ApiKeyCmd::Revoke { account }) => {
            db.revoke_api_key(&account, &Actor::Operator).await?;
            json!({})
        }
        Admin::Group(GroupCmd::Create {
            account,
            name,
            settings: s,
            max_groups_per_account,
        }) => group_json(
            db.create_group_capped(
                &account,
                &name,
                &settings(s.as_deref())?,
                max_groups_per_account,
                &Actor::Operator,
            )
            .await?,
        ),
        Admin::Group(GroupCmd::Update { id, settings: s }) => group_json(
            db.update_group(
                None,
                &id,
                None,
                Some(&settings(Some(&s))?),
                &Actor::Operator,
            )
            .await?,
        ),
        Admin::Group(GroupCmd::Delete { id }) => {
            db.delete_group(None, &id, &Actor::Operator).await?;
            json!({})
        }
        Admin::Group(GroupCmd::List { account }) => {
            let groups: Vec<Value> = db
                .group_rows(&account)
                .await?
                .into_iter()
                .map(group_json)
                .collect();
            json!({ "results": groups })
        }
        Admin::Domain(DomainCmd::Add(a)) => {
            let host = Hostname::parse(&a.host).map_err(invalid)?;
            let fallback = a
                .fallback_url
                .as_deref()
                .map(LongUrl::parse)
                .transpose()
                .map_err(|e| invalid(format!("--fallback-url: {e}")))?;
            let owner = match a.account {
                Some(id) => DomainOwner::Account(id),
                None => DomainOwner::Platform,
            };
            let DomainRow { id, domain } = db
                .add_domain(&host, &owner, fallback.as_ref(), &Actor::Operator)
                .await?;
            json!({ "id": id, "domain": domain })
        }
        Admin::Domain(DomainCmd::Disable { id }) => {
            db.disable_domain(&id, &Actor::Operator).await?;
            json!({})
        }
        Admin::Member(cmd) => member(&db, cmd).await?,
        Admin::User(UserCmd::Disable { email }) => {
            db.set_user_disabled(&email, true).await?;
            json!({})
        }
        Admin::User(UserCmd::Enable { email }) => {
            db.set_user_disabled(&email, false).await?;
            json!({})
        }
        Admin::Republish => json!({ "enqueued": db.republish_all().await? }),
        Admin::Backup { to } => {
            let bytes = db.backup_to(&to).await?;
            json!({ "backup": to.display().to_string(), "bytes": bytes })
        }
        Admin::Blocklist(BlocklistCmd::Add { domain }) => {
            db.block_domain(&Hostname::parse(&domain).map_err(invalid)?)
                .await?;
            json!({})
        }
    };
    db.close().await;
    Ok(out)
}
