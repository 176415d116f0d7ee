//! The `origin-api` command line (DESIGN.md "Operator CLI"): `serve`, `migrate` and `admin …`.
//! Admin commands print one JSON object on stdout and exit 0, or a message on stderr and 1.

use crate::db::{Db, DomainOwner, StoreError};
use crate::domain::{GroupSettings, Hostname, LongUrl};
use crate::publisher::Sink;
use crate::startup::{Application, Settings, shutdown_signal};
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
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
    /// Serve the HTTP API.
    Serve {
        /// Address to listen on.
        #[arg(long, env = "LISTEN_ADDR", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Apply pending migrations first (for development; production runs `migrate`).
        #[arg(long)]
        migrate: bool,
        /// Database pool size.
        #[arg(long, env = "DATABASE_MAX_CONNECTIONS", default_value_t = 16)]
        max_connections: u32,
        /// Take the client IP from this header (set it only behind a proxy that overwrites it,
        /// e.g. CF-Connecting-IP); default: the TCP peer address.
        #[arg(long, env = "CLIENT_IP_HEADER")]
        client_ip_header: Option<String>,
        /// validate-dynamic: burst of requests allowed per client IP.
        #[arg(long, env = "VALIDATE_BURST", default_value_t = 120)]
        validate_burst: u32,
        /// validate-dynamic: sustained requests per minute per client IP.
        #[arg(long, env = "VALIDATE_PER_MINUTE", default_value_t = 600)]
        validate_per_minute: u32,
        /// Where changes are published.
        #[command(flatten)]
        sink: SinkArgs,
        /// Secret the edge worker presents on /internal/… (KV-miss lookups, click events).
        #[arg(long, env = "INTERNAL_API_SECRET", hide_env_values = true)]
        internal_api_secret: Option<String>,
    },
    /// Apply pending migrations and exit.
    Migrate,
    /// Operator commands.
    #[command(subcommand)]
    Admin(Admin),
}

/// The publisher's sink: the worker's sync route, or the Cloudflare KV REST API.
#[derive(Debug, Args)]
pub struct SinkArgs {
    /// The worker's sync route, e.g. http://127.0.0.1:8787/__shortlink/sync.
    #[arg(long, env = "EDGE_SYNC_URL")]
    edge_sync_url: Option<String>,
    /// The worker's SYNC_SECRET.
    #[arg(long, env = "EDGE_SYNC_SECRET", hide_env_values = true)]
    edge_sync_secret: Option<String>,
    /// Cloudflare account id (KV REST API sink).
    #[arg(long, env = "CF_ACCOUNT_ID")]
    cf_account_id: Option<String>,
    /// Workers KV namespace id.
    #[arg(long, env = "CF_KV_NAMESPACE_ID")]
    cf_kv_namespace_id: Option<String>,
    /// API token with Workers KV Storage:Edit.
    #[arg(long, env = "CF_API_TOKEN", hide_env_values = true)]
    cf_api_token: Option<String>,
    /// API base URL.
    #[arg(
        long,
        env = "CF_API_BASE",
        default_value = "https://api.cloudflare.com/client/v4"
    )]
    cf_api_base: String,
}

impl SinkArgs {
    fn sink(self) -> Result<Option<Sink>, String> {
        match (self.edge_sync_url, self.edge_sync_secret, self.cf_account_id, self.cf_kv_namespace_id, self.cf_api_token) {
            (None, None, None, None, None) => Ok(None),
            (Some(url), Some(secret), None, None, None) => Ok(Some(Sink::WorkerSync { url, secret })),
            (None, None, Some(account_id), Some(namespace_id), Some(api_token)) => Ok(Some(Sink::CloudflareKv {
                api_base: self.cf_api_base,
                account_id,
                namespace_id,
                api_token,
            })),
            _ => Err("set either EDGE_SYNC_URL and EDGE_SYNC_SECRET, or CF_ACCOUNT_ID, CF_KV_NAMESPACE_ID and CF_API_TOKEN".to_owned()),
        }
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
    /// Blocked destination domains.
    #[command(subcommand)]
    Blocklist(BlocklistCmd),
    /// Queue every link, group, domain and the blocklist for publishing again (a fresh KV
    /// namespace, or a local edge whose KV starts empty).
    Republish,
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
    /// Look an account up by email (extension: for scripts that seed idempotently).
    Get {
        /// Account email.
        #[arg(long)]
        email: String,
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
        Command::Serve {
            listen,
            migrate,
            max_connections,
            client_ip_header,
            validate_burst,
            validate_per_minute,
            sink,
            internal_api_secret,
        } => {
            let sink = match sink.sink() {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let settings = Settings {
                listen,
                migrate,
                max_connections,
                client_ip_header,
                validate_burst,
                validate_per_minute,
                sink,
                internal_secret: internal_api_secret,
                ..Settings::new(cli.database_url)
            };
            serve(&settings).await
        }
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

fn invalid(e: impl std::fmt::Display) -> CliError {
    CliError::Invalid(e.to_string())
}

fn settings(json: Option<&str>) -> Result<GroupSettings, CliError> {
    json.map(GroupSettings::parse)
        .transpose()
        .map_err(invalid)
        .map(Option::unwrap_or_default)
}

async fn admin(url: &str, cmd: Admin) -> Result<Value, CliError> {
    let db = connect(url).await?;
    let out = match cmd {
        Admin::Account(AccountCmd::Create {
            email,
            no_api_access,
        }) => {
            json!(db.create_account(&email, !no_api_access).await?)
        }
        Admin::Account(AccountCmd::Get { email }) => json!(db.find_account(&email).await?),
        Admin::ApiKey(ApiKeyCmd::Generate { account }) => {
            json!({ "api_key": db.generate_api_key(&account).await?.expose() })
        }
        Admin::ApiKey(ApiKeyCmd::Revoke { account }) => {
            db.revoke_api_key(&account).await?;
            json!({})
        }
        Admin::Group(GroupCmd::Create {
            account,
            name,
            settings: s,
        }) => {
            json!(
                db.create_group(&account, &name, &settings(s.as_deref())?)
                    .await?
            )
        }
        Admin::Group(GroupCmd::Update { id, settings: s }) => {
            json!(db.update_group_settings(&id, &settings(Some(&s))?).await?)
        }
        Admin::Group(GroupCmd::Delete { id }) => {
            db.delete_group(&id).await?;
            json!({})
        }
        Admin::Group(GroupCmd::List { account }) => {
            json!({ "results": db.group_rows(&account).await? })
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
            json!(db.add_domain(&host, &owner, fallback.as_ref()).await?)
        }
        Admin::Domain(DomainCmd::Disable { id }) => {
            db.disable_domain(&id).await?;
            json!({})
        }
        Admin::Republish => json!({ "enqueued": db.republish_all().await? }),
        Admin::Blocklist(BlocklistCmd::Add { domain }) => {
            db.block_domain(&Hostname::parse(&domain).map_err(invalid)?)
                .await?;
            json!({})
        }
    };
    db.close().await;
    Ok(out)
}
