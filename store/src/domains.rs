//! Link domains: platform domains shared by every account, and accounts' custom domains.

use crate::audit::{self, Action, Actor};
use crate::blocklist::check_fallback_in;
use crate::domain::{Hostname, LongUrl, Micros};
use crate::error::{Entity, StoreError, is_unique_violation};
use crate::ids::new_id;
use crate::outbox;
use crate::pool::Db;
use sqlx::Row;

/// Who a domain belongs to.
#[derive(Debug, Clone)]
pub enum DomainOwner {
    /// Shared by every account.
    Platform,
    /// A custom domain of this account.
    Account(String),
}

/// A domain as the dashboard lists it: platform domains and the account's own, with their state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainState {
    /// Hostname.
    pub domain: String,
    /// Shared by every account (false: one of the account's custom domains).
    pub is_platform: bool,
    /// New links may go on it and it redirects.
    pub enabled: bool,
}

/// A domain as listed (spec 2 "Domain").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainRow {
    /// Domain id.
    pub id: String,
    /// Hostname.
    pub domain: String,
}

impl Db {
    /// Adds an enabled domain. A fallback URL on the blocklist (its host or a parent domain) is refused. An
    /// account's domain and its `domain.added` row (by `actor`) commit together; a platform domain is no
    /// account's, and is in no account's log.
    pub async fn add_domain(
        &self,
        host: &Hostname,
        owner: &DomainOwner,
        fallback_url: Option<&LongUrl>,
        actor: &Actor,
    ) -> Result<DomainRow, StoreError> {
        let (is_platform, account_id) = match owner {
            DomainOwner::Platform => (true, None),
            DomainOwner::Account(id) => {
                self.require_account(id).await?;
                (false, Some(id.as_str()))
            }
        };
        let id = new_id();
        let mut tx = self.begin_write().await?;
        if let Some(url) = fallback_url {
            check_fallback_in(&mut tx, "fallback_url", url).await?;
        }
        let inserted = sqlx::query(
            "INSERT INTO domains (id, host, account_id, is_platform, enabled, fallback_url, created_at) \
             VALUES ($1, $2, $3, $4, 1, $5, $6)",
        )
        .bind(&id)
        .bind(host.as_str())
        .bind(account_id)
        .bind(i64::from(is_platform))
        .bind(fallback_url.map(LongUrl::as_str))
        .bind(Micros::now().0)
        .execute(&mut *tx)
        .await;
        match inserted {
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::Conflict(format!(
                    "domain {} exists",
                    host.as_str()
                )));
            }
            r => r?,
        };
        let mut keys = self.naming_keys(&mut tx, account_id).await?;
        keys.push(kv_model::domain_key(host.as_str()));
        outbox::enqueue(&mut tx, &keys).await?;
        if let Some(account) = account_id {
            let details = serde_json::json!({
                "domain": host.as_str(),
                "fallback_url": fallback_url.map(LongUrl::as_str),
            });
            audit::record(&mut tx, account, actor, Action::DomainAdded, &id, &details).await?;
        }
        tx.commit().await?;
        Ok(DomainRow {
            id,
            domain: host.as_str().to_owned(),
        })
    }

    /// Disables a domain (a custom domain becomes inactive): no new links go on it. An account's domain gets a
    /// `domain.disabled` row (by `actor`) in the same transaction.
    pub async fn disable_domain(&self, id: &str, actor: &Actor) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        let updated = sqlx::query("UPDATE domains SET enabled = 0 WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound(Entity::Domain));
        }
        let row = sqlx::query("SELECT host, account_id FROM domains WHERE id = $1")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        let host: String = row.try_get("host")?;
        let account_id: Option<String> = row.try_get("account_id")?;
        // The records that name the enabled hosts go too: a host they still named would be served.
        let mut keys = self.naming_keys(&mut tx, account_id.as_deref()).await?;
        keys.push(kv_model::domain_key(&host));
        outbox::enqueue(&mut tx, &keys).await?;
        if let Some(account) = account_id {
            let details = serde_json::json!({ "domain": host });
            audit::record(
                &mut tx,
                &account,
                actor,
                Action::DomainDisabled,
                id,
                &details,
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The KV keys whose records name the enabled hosts, for a change of a domain of `account_id` (`None`: a
    /// platform domain) in `tx`: the blocklist's for a platform domain, every group's of the account for a custom
    /// one (an account has at most its groups' limit of them, `DEFAULT_MAX_GROUPS_PER_ACCOUNT` by default). An
    /// account's are listed under its groups' lock, which a group's creation takes too (`create_group_capped`): on
    /// PostgreSQL a group created while the change is under way could otherwise be published naming the domain as
    /// it was, and be left out of the list, its record naming a disabled domain until it changed again. SQLite runs
    /// one write transaction at a time.
    async fn naming_keys(
        &self,
        tx: &mut sqlx::AnyConnection,
        account_id: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        let Some(account) = account_id else {
            return Ok(vec![kv_model::BLOCKLIST_KEY.to_owned()]);
        };
        self.serialise_on(tx, &format!("groups:{account}")).await?;
        let rows = sqlx::query("SELECT id FROM groups WHERE account_id = $1")
            .bind(account)
            .fetch_all(&mut *tx)
            .await?;
        rows.iter()
            .map(|r| Ok(kv_model::group_key(&r.try_get::<String, _>("id")?)))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    /// Enabled platform domains plus the account's active custom domains, by hostname.
    pub async fn enabled_domains(&self, account_id: &str) -> Result<Vec<DomainRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, host FROM domains WHERE enabled = 1 AND (is_platform = 1 OR account_id = $1)",
        )
        .bind(account_id)
        .fetch_all(&self.read)
        .await?;
        let mut domains = rows
            .iter()
            .map(|r| {
                Ok(DomainRow {
                    id: r.try_get("id")?,
                    domain: r.try_get("host")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        domains.sort_by(|a, b| (&a.domain, &a.id).cmp(&(&b.domain, &b.id)));
        Ok(domains)
    }

    /// The enabled platform domains and every custom domain of the account (enabled or not): platform ones
    /// first, then by hostname.
    pub async fn account_domains(&self, account_id: &str) -> Result<Vec<DomainState>, StoreError> {
        let rows = sqlx::query(
            "SELECT host, is_platform, enabled FROM domains \
             WHERE (is_platform = 1 AND enabled = 1) OR account_id = $1 ORDER BY is_platform DESC, host",
        )
        .bind(account_id)
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(DomainState {
                    domain: r.try_get("host")?,
                    is_platform: r.try_get::<i64, _>("is_platform")? != 0,
                    enabled: r.try_get::<i64, _>("enabled")? != 0,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }
}
