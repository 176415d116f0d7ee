//! The outbox, publishing side: what the publisher reads and removes, its lease, its lag, and the current KV
//! record of each key of the edge read model.

use crate::domain::{Micros, RedirectStatus};
use crate::error::StoreError;
use crate::link_options::stored_rules;
use crate::outbox::enqueue;
use crate::pool::Db;
use crate::vouch::vouched;
use kv_model::{
    BLOCKLIST_KEY, BlocklistRecord, DomainRecord, GroupRecord, LinkRecord, Preview, SaltRecord,
};
use link_rules::{Conditions, Os, Rule};
use sqlx::{AnyConnection, Row};

/// The KV keys of every link of group `id` (in the caller's transaction): their records carry a copy of the
/// group's settings, so a change of the settings republishes them.
pub(crate) async fn group_link_keys(
    conn: &mut AnyConnection,
    id: &str,
) -> Result<Vec<String>, StoreError> {
    let rows = sqlx::query(
        "SELECT d.host, l.short_code FROM links l JOIN domains d ON d.id = l.domain_id WHERE l.group_id = $1",
    )
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(kv_model::link_key(
                &r.try_get::<String, _>("host")?,
                &r.try_get::<String, _>("short_code")?,
            ))
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(Into::into)
}

/// The hosts a record names as enabled (`kv_model::MAX_ENABLED_HOSTS` at most; past it, none), from `query`, which
/// selects `host` with its limit as its last parameter (bound here), in byte order (whatever the database's
/// collation, as the blocklist's domains). A record with a list past the bound would be read on every dynamic visit
/// whatever its size; a host it does not name is served all the same, after a read of its domain's record.
async fn enabled_hosts<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    read: &sqlx::AnyPool,
) -> Result<Vec<String>, StoreError> {
    // One more than the bound, to know it is past (in no order: all of them are named, or none).
    let limit = i64::try_from(kv_model::MAX_ENABLED_HOSTS + 1).unwrap_or(i64::MAX);
    let rows = query.bind(limit).fetch_all(read).await?;
    if rows.len() > kv_model::MAX_ENABLED_HOSTS {
        return Ok(Vec::new());
    }
    let mut hosts = rows
        .iter()
        .map(|r| r.try_get("host"))
        .collect::<Result<Vec<String>, _>>()?;
    hosts.sort_unstable();
    Ok(hosts)
}

/// Pending outbox rows and the age of the oldest: the publisher's lag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxLag {
    /// Rows not yet published.
    pub pending: i64,
    /// Milliseconds since the oldest pending row was written (0 when none).
    pub oldest_age_ms: i64,
}

impl Db {
    /// Enqueues every key of the edge read model (all links, groups and domains, the
    /// blocklist and the visitor salts), for a fresh KV namespace or a local edge that starts empty. Returns the count.
    pub async fn republish_all(&self) -> Result<usize, StoreError> {
        let mut tx = self.begin_write().await?;
        let mut keys = vec![BLOCKLIST_KEY.to_owned()];
        for r in sqlx::query("SELECT host FROM domains")
            .fetch_all(&mut *tx)
            .await?
        {
            keys.push(kv_model::domain_key(&r.try_get::<String, _>("host")?));
        }
        for r in sqlx::query("SELECT id FROM groups")
            .fetch_all(&mut *tx)
            .await?
        {
            keys.push(kv_model::group_key(&r.try_get::<String, _>("id")?));
        }
        for r in sqlx::query("SELECT day FROM visitor_salts")
            .fetch_all(&mut *tx)
            .await?
        {
            keys.push(kv_model::salt_key(r.try_get("day")?));
        }
        let links = sqlx::query(
            "SELECT d.host, l.short_code FROM links l JOIN domains d ON d.id = l.domain_id",
        )
        .fetch_all(&mut *tx)
        .await?;
        for r in links {
            keys.push(kv_model::link_key(
                &r.try_get::<String, _>("host")?,
                &r.try_get::<String, _>("short_code")?,
            ));
        }
        enqueue(&mut tx, &keys).await?;
        tx.commit().await?;
        Ok(keys.len())
    }

    /// Takes or renews the publisher lease for `holder` until `now + ttl_micros`; false when
    /// another live process holds it.
    pub async fn acquire_publisher_lease(
        &self,
        holder: &str,
        ttl_micros: i64,
    ) -> Result<bool, StoreError> {
        let now = Micros::now().0;
        let updated = sqlx::query(
            "UPDATE publisher_lease SET holder = $1, expires_at = $2 \
             WHERE name = 'kv' AND (holder = $1 OR expires_at < $3)",
        )
        .bind(holder)
        .bind(now + ttl_micros)
        .bind(now)
        .execute(&self.write)
        .await?;
        Ok(updated.rows_affected() == 1)
    }

    /// Gives the lease up (graceful shutdown), so another process can take over at once.
    pub async fn release_publisher_lease(&self, holder: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE publisher_lease SET expires_at = 0 WHERE name = 'kv' AND holder = $1")
            .bind(holder)
            .execute(&self.write)
            .await?;
        Ok(())
    }

    /// The oldest `limit` outbox rows: (id, key).
    pub async fn outbox_batch(&self, limit: i64) -> Result<Vec<(i64, String)>, StoreError> {
        let rows = sqlx::query("SELECT id, kv_key FROM outbox ORDER BY id LIMIT $1")
            .bind(limit)
            .fetch_all(&self.read)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("id")?, r.try_get("kv_key")?)))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    /// Removes published rows.
    pub async fn outbox_remove(&self, ids: &[i64]) -> Result<(), StoreError> {
        for chunk in ids.chunks(500) {
            let list: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!("DELETE FROM outbox WHERE id IN ({})", list.join(", "));
            let mut q = sqlx::query(&sql);
            for id in chunk {
                q = q.bind(*id);
            }
            q.execute(&self.write).await?;
        }
        Ok(())
    }

    /// How far behind the edge is.
    pub async fn outbox_lag(&self) -> Result<OutboxLag, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM outbox")
            .fetch_one(&self.read)
            .await?;
        let pending: i64 = row.try_get("n")?;
        let oldest: Option<i64> = row.try_get("oldest")?;
        let oldest_age_ms = oldest
            .map(|t| (Micros::now().0 - t).max(0) / 1_000)
            .unwrap_or(0);
        Ok(OutboxLag {
            pending,
            oldest_age_ms,
        })
    }

    /// The current KV record (compact JSON) for a key of the edge read model, or None when
    /// the entity no longer exists (the key is to be deleted).
    pub async fn kv_record(&self, key: &str) -> Result<Option<String>, StoreError> {
        let json = |v: Result<String, serde_json::Error>| {
            v.map_err(|e| StoreError::Internal(format!("cannot serialize KV record: {e}")))
        };
        if key == BLOCKLIST_KEY {
            let rows = sqlx::query("SELECT domain FROM blocked_domains")
                .fetch_all(&self.read)
                .await?;
            let mut domains = rows
                .iter()
                .map(|r| r.try_get("domain"))
                .collect::<Result<Vec<String>, _>>()?;
            // In byte order, whatever the database's collation (PostgreSQL's locale may sort `-` and `.` apart from
            // their bytes): the edge builds its blocklist with a check of that order, and sorts only a list out of
            // it (shared_crypto::DomainBlocklist).
            domains.sort_unstable();
            let record = BlocklistRecord {
                enabled_hosts: enabled_hosts(
                    sqlx::query(
                        "SELECT host FROM domains WHERE is_platform = 1 AND enabled = 1 LIMIT $1",
                    ),
                    &self.read,
                )
                .await?,
                ..BlocklistRecord::new(domains)
            };
            return json(serde_json::to_string(&record)).map(Some);
        }
        if let Some(id) = key.strip_prefix("group:") {
            let Some(record) = self.group_record(id).await? else {
                return Ok(None);
            };
            let record = GroupRecord {
                enabled_hosts: enabled_hosts(
                    sqlx::query(
                        "SELECT d.host FROM domains d JOIN groups g ON g.account_id = d.account_id \
                         WHERE g.id = $1 AND d.enabled = 1 LIMIT $2",
                    )
                    .bind(id),
                    &self.read,
                )
                .await?,
                ..record
            };
            return json(serde_json::to_string(&record)).map(Some);
        }
        if let Some(host) = key.strip_prefix("domain:") {
            let Some(row) =
                sqlx::query("SELECT enabled, fallback_url FROM domains WHERE host = $1")
                    .bind(host)
                    .fetch_optional(&self.read)
                    .await?
            else {
                return Ok(None);
            };
            let record = DomainRecord::new(
                row.try_get::<i64, _>("enabled")? != 0,
                row.try_get("fallback_url")?,
            );
            return json(serde_json::to_string(&record)).map(Some);
        }
        if let Some(day) = key.strip_prefix("salt:") {
            let Ok(day) = day.parse::<i64>() else {
                return Ok(None);
            };
            return match self.salt_record(day).await? {
                Some(salt) => json(serde_json::to_string(&SaltRecord::new(salt))).map(Some),
                None => Ok(None),
            };
        }
        if let Some(rest) = key.strip_prefix("link:") {
            let Some((host, code)) = rest.rsplit_once(':') else {
                return Ok(None);
            };
            return match self.link_record(host, code).await? {
                Some(record) => json(serde_json::to_string(&record)).map(Some),
                None => Ok(None),
            };
        }
        Err(StoreError::Internal(format!(
            "not a key of the edge read model: {key}"
        )))
    }

    /// A group's key and settings as the edge sees them, by id, without the hosts its published record names
    /// ([`GroupRecord::enabled_hosts`], added by [`Db::kv_record`]): the origin's answer to a worker that missed a link
    /// in KV carries this, which the worker keeps for that link's rules alone, never to decide a host.
    pub async fn group_record(&self, id: &str) -> Result<Option<GroupRecord>, StoreError> {
        let Some(row) = sqlx::query("SELECT key, settings FROM groups WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.read)
            .await?
        else {
            return Ok(None);
        };
        let settings: String = row.try_get("settings")?;
        let settings = serde_json::from_str(&settings).map_err(|e| {
            StoreError::Internal(format!("stored group settings do not parse: {e}"))
        })?;
        Ok(Some(GroupRecord::new(
            row.try_get::<String, _>("key")?,
            settings,
        )))
    }

    /// A persistent link as the edge sees it, by hostname and (lowercase) short code, with a copy of its group's
    /// settings (`LinkRecord::group_settings`: a new isolate decides the link's first visit from it; a change of
    /// the settings republishes the group's links, `update_group`), and vouched for when none of its destinations
    /// is blocked (`LinkRecord::vouched`, [`crate::vouch`]; a block republishes the links it takes the word from,
    /// `block_domain`).
    pub async fn link_record(
        &self,
        host: &str,
        short_code: &str,
    ) -> Result<Option<LinkRecord>, StoreError> {
        // The blocklist is read on the same connection, after the link: a block committed after that read
        // republishes the link (`block_domain`), so the word given here is taken back by a later record.
        let mut conn = self.read.acquire().await?;
        // A disabled account's links stop at the edge as if paused.
        let row = sqlx::query(
            "SELECT l.long_url, l.group_id, l.is_active, l.expires_at, l.forward_query, a.disabled, \
             g.settings AS group_settings, COALESCE(ct.clicks, 0) AS clicks, l.rules, l.ios_url, l.android_url, l.password_hash, \
             l.expired_url, l.max_clicks, l.redirect_status, l.og_title, l.og_description, l.og_image \
             FROM links l JOIN domains d ON d.id = l.domain_id JOIN accounts a ON a.id = l.account_id \
             JOIN groups g ON g.id = l.group_id LEFT JOIN link_click_totals ct ON ct.link_id = l.id \
             WHERE d.host = $1 AND l.short_code = $2",
        )
        .bind(host.to_ascii_lowercase())
        .bind(short_code.to_ascii_lowercase())
        .fetch_optional(&mut *conn)
        .await?;
        let Some(r) = row else {
            return Ok(None);
        };
        let active =
            r.try_get::<i64, _>("is_active")? != 0 && r.try_get::<i64, _>("disabled")? == 0;
        let settings: String = r.try_get("group_settings")?;
        let group_settings = serde_json::from_str(&settings).map_err(|e| {
            StoreError::Internal(format!("stored group settings do not parse: {e}"))
        })?;
        let expires_at = r
            .try_get::<Option<i64>, _>("expires_at")?
            .map(|t| Micros(t).unix_millis_ceil());
        // A link whose counted clicks reached its limit is published as expired since the epoch: the worker needs
        // no counter of its own, and one that predates the limit sends its visitors where expired links go too.
        // The click ingestion republishes the link when its count crosses the limit (crate::clicks).
        let clicks: i64 = r.try_get("clicks")?;
        let limit_reached = r
            .try_get::<Option<i64>, _>("max_clicks")?
            .is_some_and(|max| clicks >= max);
        let redirect_status = u16::try_from(r.try_get::<i64, _>("redirect_status")?)
            .map_err(|e| StoreError::Internal(format!("stored redirect_status: {e}")))?;
        let preview = Preview {
            title: r.try_get("og_title")?,
            description: r.try_get("og_description")?,
            image: r.try_get("og_image")?,
        };
        // The worker asks for the password (its form, the throttle through the origin, the cookie): the hash goes
        // into the record as it is. Workers older than the form ignored it, hence the README's upgrade order.
        let password_hash: Option<String> = r.try_get("password_hash")?;
        let mut record = LinkRecord {
            expires_at: if limit_reached { Some(0) } else { expires_at },
            forward_query: r.try_get::<i64, _>("forward_query")? != 0,
            rules: edge_rules(
                r.try_get("ios_url")?,
                r.try_get("android_url")?,
                stored_rules(r.try_get("rules")?)?,
            ),
            password_hash,
            expired_url: r.try_get("expired_url")?,
            // 302 is what a record without the field means: plain links keep their bytes.
            redirect_status: (redirect_status != RedirectStatus::FOUND.code())
                .then_some(redirect_status),
            preview: (preview != Preview::default()).then_some(preview),
            group_settings: Some(group_settings),
            ..LinkRecord::new(
                r.try_get::<String, _>("long_url")?,
                r.try_get::<String, _>("group_id")?,
                active,
            )
        };
        record.vouched = vouched(&mut conn, &record).await?;
        Ok(Some(record))
    }
}

/// The rules the worker evaluates: the app links first, compiled into `os` rules (iOS, then Android), then the
/// link's own rules in order.
fn edge_rules(ios_url: Option<String>, android_url: Option<String>, rules: Vec<Rule>) -> Vec<Rule> {
    let app = |os: Os, to: String| Rule {
        when: Conditions {
            os: vec![os],
            ..Conditions::default()
        },
        to,
    };
    ios_url
        .map(|to| app(Os::Ios, to))
        .into_iter()
        .chain(android_url.map(|to| app(Os::Android, to)))
        .chain(rules)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Instant;

    use crate::domain::{GroupSettings, Hostname};
    use crate::{Actor, Db, DomainOwner};

    /// An SQLite store in a file of its own with `n` links (codes `l0`, `l1`, …) of one account and group on
    /// `sho.rt`, link `i` to `url(i)`: the store, its directory and the group's id.
    async fn store_with_links(
        name: &str,
        n: usize,
        url: impl Fn(usize) -> String,
    ) -> (Db, PathBuf, String) {
        let dir = std::env::temp_dir().join(format!(
            "shortlink-{name}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let db_url = format!("sqlite://{}", dir.join("db.sqlite").display());
        let db = Db::connect(&db_url, 4).await.unwrap();
        db.migrate().await.unwrap();
        let account = db.create_account("big@example.com", true).await.unwrap();
        let domain = db
            .add_domain(
                &Hostname::parse("sho.rt").unwrap(),
                &DomainOwner::Platform,
                None,
                &Actor::Operator,
            )
            .await
            .unwrap();
        let group = db
            .create_group(
                &account.id,
                "big",
                &GroupSettings::default(),
                &Actor::Operator,
            )
            .await
            .unwrap();
        let mut tx = db.begin_write().await.unwrap();
        for start in (0..n).step_by(200) {
            let end = (start + 200).min(n);
            let values: Vec<String> = (0..end - start)
                .map(|k| {
                    let p = 4 + k * 3;
                    format!("(${p}, $1, $2, $3, ${}, ${}, 1, 0)", p + 1, p + 2)
                })
                .collect();
            let sql = format!(
                "INSERT INTO links (id, account_id, group_id, domain_id, short_code, long_url, is_active, \
                 created_at) VALUES {}",
                values.join(", ")
            );
            let mut q = sqlx::query(&sql)
                .bind(&account.id)
                .bind(&group.id)
                .bind(&domain.id);
            for i in start..end {
                q = q
                    .bind(uuid::Uuid::new_v4().to_string())
                    .bind(format!("l{i}"))
                    .bind(url(i));
            }
            q.execute(&mut *tx).await.unwrap();
        }
        tx.commit().await.unwrap();
        (db, dir, group.id)
    }

    /// Publishes every outbox row as `origin-api`'s publisher does, without the network (every row read, every
    /// key's record built, the rows removed, in batches of 500): the rows and the records' bytes.
    async fn drain(db: &Db) -> (usize, usize) {
        let (mut rows, mut bytes) = (0usize, 0usize);
        loop {
            let batch = db.outbox_batch(500).await.unwrap();
            if batch.is_empty() {
                return (rows, bytes);
            }
            for (_, key) in &batch {
                bytes += db.kv_record(key).await.unwrap().map_or(0, |r| r.len());
            }
            let ids: Vec<i64> = batch.iter().map(|(id, _)| *id).collect();
            db.outbox_remove(&ids).await.unwrap();
            rows += batch.len();
        }
    }

    fn links_wanted() -> usize {
        std::env::var("REPUBLISH_LINKS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100_000)
    }

    /// What a change of a big group's settings costs now that each of its links' records carries a copy of them
    /// (BENCHMARKS.md, "Edge worker", the one KV round of a new isolate): the change's own transaction (the link
    /// keys found and put in the outbox), and the publisher's side without the network ([`drain`]). SQLite in
    /// a file. `REPUBLISH_LINKS=100000 cargo test -p shortlink-store --release -- --ignored --nocapture
    /// group_settings_republish`.
    #[tokio::test(flavor = "multi_thread")]
    #[ignore = "a measurement, not a test: about a minute"]
    async fn group_settings_republish() {
        let n = links_wanted();
        let (db, dir, group) = store_with_links("republish", n, |i| {
            format!("https://example.com/landing/{i}")
        })
        .await;
        drain(&db).await;

        let settings = GroupSettings::parse(r#"{"analytics":{"enabled":true}}"#).unwrap();
        let t = Instant::now();
        db.update_group(None, &group, None, Some(&settings), &Actor::Operator)
            .await
            .unwrap();
        let update = t.elapsed();
        let t = Instant::now();
        let (rows, bytes) = drain(&db).await;
        let publish = t.elapsed();
        assert_eq!(rows, n + 1, "the group's key and every link's");
        eprintln!(
            "group_settings_republish: {n} links; update_group {:.0} ms; publisher side {rows} keys in {:.1} s \
             ({:.0} keys/s), {bytes} bytes of records ({:.0} bytes a link)",
            update.as_secs_f64() * 1e3,
            publish.as_secs_f64(),
            rows as f64 / publish.as_secs_f64(),
            bytes as f64 / rows as f64,
        );
        db.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What a block costs when links are many (`block_domain`: its scan of every link's destinations in its
    /// transaction, the keys it finds put in the outbox, and the second scan after its commit): a domain no link's
    /// filter matches, one that 1% of the links point to (a subdomain of it), and one that the other 99% point to.
    /// SQLite in a file. `REPUBLISH_LINKS=100000 cargo test -p shortlink-store --release -- --ignored --nocapture
    /// block_domain_scan`.
    #[tokio::test(flavor = "multi_thread")]
    #[ignore = "a measurement, not a test: about a minute"]
    async fn block_domain_scan() {
        let n = links_wanted();
        let (db, dir, _) = store_with_links("block-scan", n, |i| {
            if i % 100 == 0 {
                format!("https://cdn.evil.example/landing/{i}?ref=example.com")
            } else {
                format!("https://example.com/landing/{i}")
            }
        })
        .await;
        drain(&db).await;
        for (domain, want) in [
            ("unrelated.example", 0),
            ("evil.example", n.div_ceil(100)),
            ("example.com", n - n.div_ceil(100)),
        ] {
            let t = Instant::now();
            db.block_domain(&Hostname::parse(domain).unwrap())
                .await
                .unwrap();
            let took = t.elapsed();
            let rows = db.outbox_lag().await.unwrap().pending;
            assert_eq!(
                rows,
                want as i64 + 1,
                "{domain}: the blocklist and its links"
            );
            eprintln!(
                "block_domain_scan: {n} links; blocking {domain} ({want} links to it) took {:.0} ms",
                took.as_secs_f64() * 1e3
            );
            drain(&db).await;
        }
        db.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}
