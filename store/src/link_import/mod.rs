//! Link imports (issue 24): a CSV queued as a job in the database, run in the background by whichever origin
//! process holds its lease, a chunk of rows per transaction.
//!
//! - **Survives a restart, never creates a row twice:** each chunk's links, their outbox rows, activity rows and
//!   webhook events, the job's progress (`processed`, `created`, `failed`) and the day's count commit together.
//!   A process that dies mid-chunk leaves nothing of it; whoever takes the job next starts at `processed`.
//! - **One runner per job:** a runner takes a job with a lease (`lease_owner`, `lease_until`) and renews it in
//!   every chunk's transaction, which writes nothing unless the lease is still its own; another process takes the
//!   job only once the lease has run out.
//! - **Its own limit:** imported links count against a per-account budget per UTC day (`import_day_counts`, read and
//!   written in the chunk's transaction, so it is exact under concurrent imports), not create-link's hourly one.
//!   Rows beyond it fail with `import_limit`.
//! - Each row follows create-link's rules ([`rows`]); a taken or invalid short code is replaced by a made-up one and
//!   reported, the row still created.

mod insert;
pub(crate) mod rows;

use crate::audit::Actor;
use crate::creation::{CreateLink, CreatedLink, Creator, Target, record_created};
use crate::domain::{Day, GroupSettings, Micros, ShortCode};
use crate::error::{Entity, StoreError};
use crate::ids::new_id;
use crate::link_tags;
use crate::pool::Db;
use crate::rate_limit::RateLimitState;
use crate::sql_chunks::MultiRow;
use insert::NewLink;
use rows::{Columns, Row, RowError};
use sqlx::Row as _;
use std::collections::HashMap;

pub use rows::{FileError, MAX_IMPORT_BYTES, check_file};

/// Imported links an account may create per UTC day, unless the operator says otherwise.
pub const DEFAULT_IMPORT_LIMIT_PER_DAY: u32 = 50_000;
/// Imports an account may have queued or running at once.
pub const MAX_OPEN_IMPORTS: i64 = 3;
/// Errors kept per import (the count of failed rows goes on).
pub const MAX_REPORTED_ERRORS: i64 = 1_000;
/// Rows per transaction: small enough that create-link waits at most one chunk for SQLite's writer.
const CHUNK: usize = 200;
/// How long a runner's claim holds without being renewed (every chunk renews it). Only how soon another process
/// takes over a dead runner's job depends on it: every chunk's transaction starts by writing the job's row under
/// the runner's own lease, so two runners' chunks are serialised and the second finds the lease gone.
const LEASE_MICROS: i64 = 15_000_000;
/// Tries of a chunk whose transaction a concurrent change spoiled (a group or domain deleted meanwhile).
const CHUNK_TRIES: usize = 5;

/// An import as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImportStatus {
    /// The job's id.
    pub id: String,
    /// `queued`, `running`, `done` or `failed`.
    pub status: String,
    /// Rows below the header.
    pub total: i64,
    /// Rows dealt with so far.
    pub processed: i64,
    /// Links created.
    pub created: i64,
    /// Rows refused.
    pub failed: i64,
    /// The first 1,000 problems, by row.
    pub errors: Vec<ImportProblem>,
}

/// A row's problem: refused (`failed` counts it) or created with a made-up code (`short_code_exists`,
/// `invalid_short_code`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImportProblem {
    /// The row's number as a spreadsheet shows it (the header is row 1).
    pub row: i64,
    /// Create-link's error code where it has one.
    pub error_code: String,
    /// Why.
    pub detail: String,
}

/// A job a runner holds.
struct Job {
    id: String,
    account_id: String,
    actor: Actor,
    body: String,
    processed: i64,
    reported: i64,
}

/// A row as read: its fields and a refused short code's reason, or why it cannot be created.
type ReadRow = Result<(Row, Option<String>), RowError>;
/// A row as create-link's request, whether it starts active, and a refused short code's reason.
type Planned = Result<(CreateLink, bool, Option<String>), RowError>;

/// A row's requested group and domain and its destination's host: what its target depends on.
type TargetKey = (Option<String>, Option<String>, String);

/// The groups a job's rows named, as found (or made): by the id of our export's `group_id` column, and by name.
/// Most files name a few groups for many rows.
#[derive(Default)]
struct Groups {
    by_id: HashMap<String, Option<String>>,
    by_name: HashMap<String, Option<String>>,
}

/// What a row became in a chunk.
enum Outcome {
    Created(Option<ImportProblem>),
    Failed(ImportProblem),
}

/// A row's problem.
fn problem(row: i64, code: &str, detail: String) -> ImportProblem {
    ImportProblem {
        row,
        error_code: code.to_owned(),
        detail,
    }
}

/// The problem of a row whose requested code was taken: the row is created with a made-up one.
fn code_taken(row: i64, code: &ShortCode, host: &str) -> ImportProblem {
    problem(
        row,
        "short_code_exists",
        format!(
            "short code {:?} is taken on {host}; made up instead",
            code.as_str()
        ),
    )
}

/// Keeps a chunk's reported problems: one statement per chunk of rows.
async fn record_problems(
    conn: &mut sqlx::AnyConnection,
    multi_row: MultiRow,
    import_id: &str,
    problems: &[&ImportProblem],
) -> Result<(), StoreError> {
    for (chunk, values) in multi_row.split(problems, 4) {
        let sql = format!(
            "INSERT INTO link_import_errors (import_id, row_number, error_code, detail) VALUES {values}"
        );
        let mut q = sqlx::query(&sql);
        for p in chunk {
            q = q
                .bind(import_id)
                .bind(p.row)
                .bind(p.error_code.as_str())
                .bind(p.detail.chars().take(500).collect::<String>());
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

fn actor_columns(actor: &Actor) -> (&'static str, Option<&str>, Option<&str>) {
    match actor {
        Actor::User { id, email } => ("user", Some(id), Some(email)),
        Actor::ApiKey => ("api_key", None, None),
        Actor::Operator => ("operator", None, None),
    }
}

fn actor_of(kind: &str, id: Option<String>, email: Option<String>) -> Actor {
    match (kind, id, email) {
        ("user", Some(id), Some(email)) => Actor::User { id, email },
        ("operator", ..) => Actor::Operator,
        _ => Actor::ApiKey,
    }
}

/// The budget of a day as create-link's limit states look (so the API answers it the same way).
fn day_state(limit: u32, used: i64, now: Micros) -> RateLimitState {
    let next_day = (Day::today().0 + 1) * 86_400;
    let now_s = now.0 / 1_000_000;
    RateLimitState {
        limit,
        remaining: u32::try_from((i64::from(limit) - used).max(0)).unwrap_or(0),
        reset_at: next_day,
        retry_after: (next_day - now_s).max(1),
    }
}

impl Db {
    /// Queues `body` (a CSV, checked whole first) as an import into the account, by `actor`.
    /// [`StoreError::Invalid`] when the file is refused; [`StoreError::RateLimited`] when the account has imported
    /// its `limit_per_day` links today already.
    pub async fn queue_import(
        &self,
        account_id: &str,
        actor: &Actor,
        body: String,
        limit_per_day: u32,
    ) -> Result<ImportStatus, StoreError> {
        let total = check_file(&body).map_err(|e| StoreError::Invalid(e.0))?;
        let now = Micros::now();
        let used: i64 = sqlx::query(
            "SELECT COALESCE(MAX(links), 0) AS n FROM import_day_counts WHERE account_id = $1 AND day = $2",
        )
        .bind(account_id)
        .bind(Day::today().0)
        .fetch_one(&self.read)
        .await?
        .try_get("n")?;
        if used >= i64::from(limit_per_day) {
            return Err(StoreError::RateLimited(day_state(limit_per_day, used, now)));
        }
        // Each open job holds its file (up to 20 MB) in the database: a few at a time per account.
        let open: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM link_imports WHERE account_id = $1 AND status IN ('queued', 'running')",
        )
        .bind(account_id)
        .fetch_one(&self.read)
        .await?
        .try_get("n")?;
        if open >= MAX_OPEN_IMPORTS {
            return Err(StoreError::RateLimited(RateLimitState {
                limit: u32::try_from(MAX_OPEN_IMPORTS).unwrap_or(u32::MAX),
                remaining: 0,
                reset_at: now.0 / 1_000_000 + 60,
                retry_after: 60,
            }));
        }
        let id = new_id();
        let (kind, actor_id, email) = actor_columns(actor);
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO link_imports (id, account_id, actor_type, actor_id, actor_email, status, body, total, \
             created_at) VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $8)",
        )
        .bind(&id)
        .bind(account_id)
        .bind(kind)
        .bind(actor_id)
        .bind(email)
        .bind(&body)
        .bind(i64::try_from(total).unwrap_or(i64::MAX))
        .bind(now.0)
        .execute(&mut *tx)
        .await
        .map_err(|e| match &e {
            sqlx::Error::Database(d) if d.is_foreign_key_violation() => {
                StoreError::NotFound(Entity::Account)
            }
            _ => e.into(),
        })?;
        tx.commit().await?;
        self.import_status(account_id, &id).await
    }

    /// One of the account's imports; another account's or an unknown one is not found.
    pub async fn import_status(
        &self,
        account_id: &str,
        id: &str,
    ) -> Result<ImportStatus, StoreError> {
        let mut conn = self.read.acquire().await?;
        let row = sqlx::query(
            "SELECT status, total, processed, created, failed FROM link_imports WHERE id = $1 AND account_id = $2",
        )
        .bind(id)
        .bind(account_id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(StoreError::NotFound(Entity::Import))?;
        let errors = sqlx::query(
            "SELECT row_number, error_code, detail FROM link_import_errors WHERE import_id = $1 \
             ORDER BY row_number LIMIT $2",
        )
        .bind(id)
        .bind(MAX_REPORTED_ERRORS)
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| {
            Ok(ImportProblem {
                row: r.try_get("row_number")?,
                error_code: r.try_get("error_code")?,
                detail: r.try_get("detail")?,
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
        Ok(ImportStatus {
            id: id.to_owned(),
            status: row.try_get("status")?,
            total: row.try_get("total")?,
            processed: row.try_get("processed")?,
            created: row.try_get("created")?,
            failed: row.try_get("failed")?,
            errors,
        })
    }

    /// Takes the oldest import that is queued, or running under a lease that ran out (its runner died), for
    /// `owner`, and runs it to the end, a chunk per transaction. `Ok(false)`: no import was waiting. An error
    /// leaves the job to be taken again when the lease runs out.
    pub async fn run_next_import(
        &self,
        owner: &str,
        limit_per_day: u32,
    ) -> Result<bool, StoreError> {
        let Some(mut job) = self.claim_import(owner).await? else {
            return Ok(false);
        };
        let mut reader = rows::reader(&job.body);
        let columns = match reader
            .headers()
            .map_err(|e| FileError(e.to_string()))
            .and_then(Columns::of)
        {
            Ok(c) => c,
            // Checked when queued: only a file changed since could get here.
            Err(_) => {
                self.finish_import(&job.id, owner, "failed").await?;
                return Ok(true);
            }
        };
        let mut records = reader.into_records();
        // Rows done by an earlier runner are skipped: they are committed.
        for _ in 0..job.processed {
            if records.next().is_none() {
                break;
            }
        }
        let mut groups = Groups::default();
        // Rows are numbered as a spreadsheet shows them: the header is row 1 (a quoted field with line breaks is
        // still one row).
        let mut next_row = job.processed + 2;
        loop {
            let mut chunk = Vec::with_capacity(CHUNK);
            for record in records.by_ref().take(CHUNK) {
                let read = match record {
                    Ok(r) => Row::read(&columns, &r),
                    Err(e) => Err(RowError {
                        code: "validation_error",
                        detail: format!("unreadable row: {e}"),
                    }),
                };
                chunk.push((next_row, read));
                next_row += 1;
            }
            if chunk.is_empty() {
                self.finish_import(&job.id, owner, "done").await?;
                return Ok(true);
            }
            let mut tries = 0;
            let (n, reported) = loop {
                tries += 1;
                match self
                    .import_chunk(&job, owner, limit_per_day, &chunk, &mut groups)
                    .await?
                {
                    Some(done) => break done,
                    // The lease went to another runner: it carries on from what was committed.
                    None if tries >= CHUNK_TRIES => return Ok(true),
                    // A group may be what went: look them up again.
                    None => groups = Groups::default(),
                }
            };
            job.processed += n;
            job.reported += reported;
        }
    }

    /// Marks the job taken by `owner` with a fresh lease and returns it.
    async fn claim_import(&self, owner: &str) -> Result<Option<Job>, StoreError> {
        let now = Micros::now().0;
        let mut tx = self.begin_write().await?;
        let candidate = sqlx::query(
            "SELECT id FROM link_imports WHERE status IN ('queued', 'running') \
             AND (lease_until IS NULL OR lease_until < $1 OR lease_owner = $2) ORDER BY created_at, id LIMIT 1",
        )
        .bind(now)
        .bind(owner)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(candidate) = candidate else {
            return Ok(None);
        };
        let id: String = candidate.try_get("id")?;
        // Re-checked in the update: of two processes that picked the same job, one takes it.
        let taken = sqlx::query(
            "UPDATE link_imports SET status = 'running', lease_owner = $1, lease_until = $2 \
             WHERE id = $3 AND status IN ('queued', 'running') \
             AND (lease_until IS NULL OR lease_until < $4 OR lease_owner = $1)",
        )
        .bind(owner)
        .bind(now + LEASE_MICROS)
        .bind(&id)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if taken != 1 {
            return Ok(None);
        }
        let row = sqlx::query(
            "SELECT account_id, actor_type, actor_id, actor_email, body, processed, \
             (SELECT COUNT(*) FROM link_import_errors WHERE import_id = $1) AS reported \
             FROM link_imports WHERE id = $1",
        )
        .bind(&id)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(Job {
            id,
            account_id: row.try_get("account_id")?,
            actor: actor_of(
                row.try_get::<String, _>("actor_type")?.as_str(),
                row.try_get("actor_id")?,
                row.try_get("actor_email")?,
            ),
            body: row.try_get("body")?,
            processed: row.try_get("processed")?,
            reported: row.try_get("reported")?,
        }))
    }

    /// The job's end: its state, its lease and its file (kept no longer than it is needed).
    async fn finish_import(&self, id: &str, owner: &str, status: &str) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE link_imports SET status = $1, body = '', lease_owner = NULL, lease_until = NULL, \
             finished_at = $2 WHERE id = $3 AND lease_owner = $4",
        )
        .bind(status)
        .bind(Micros::now().0)
        .bind(id)
        .bind(owner)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// `id` when it is one of the account's groups. Remembered for the job.
    async fn import_group_id(
        &self,
        job: &Job,
        id: &str,
        cache: &mut Groups,
    ) -> Result<Option<String>, StoreError> {
        if let Some(found) = cache.by_id.get(id) {
            return Ok(found.clone());
        }
        let found: Option<String> =
            sqlx::query("SELECT id FROM groups WHERE account_id = $1 AND id = $2")
                .bind(&job.account_id)
                .bind(id)
                .fetch_optional(&self.read)
                .await?
                .map(|r| r.try_get("id"))
                .transpose()?;
        cache.by_id.insert(id.to_owned(), found.clone());
        Ok(found)
    }

    /// The group a row names (an id or a name of the account's), created when no group has that name; `None` when
    /// it cannot be (the account's most groups). Remembered for the job.
    async fn import_group(
        &self,
        job: &Job,
        named: &str,
        cache: &mut Groups,
    ) -> Result<Option<String>, StoreError> {
        if let Some(found) = cache.by_name.get(named) {
            return Ok(found.clone());
        }
        let existing = sqlx::query(
            "SELECT id FROM groups WHERE account_id = $1 AND (id = $2 OR name = $2) ORDER BY CASE WHEN id = $2 THEN 0 ELSE 1 END LIMIT 1",
        )
        .bind(&job.account_id)
        .bind(named)
        .fetch_optional(&self.read)
        .await?;
        let id = match existing {
            Some(row) => Some(row.try_get::<String, _>("id")?),
            None => match self
                .create_group(
                    &job.account_id,
                    named,
                    &GroupSettings::default(),
                    &job.actor,
                )
                .await
            {
                Ok(g) => Some(g.id),
                Err(StoreError::Invalid(_)) => None,
                Err(e) => return Err(e),
            },
        };
        cache.by_name.insert(named.to_owned(), id.clone());
        Ok(id)
    }

    /// One chunk in one transaction, a few statements whatever its rows ([`insert`]). `Ok(None)`: not done (the
    /// lease is lost, or a group or domain was deleted since it was resolved, which spoils the transaction on
    /// PostgreSQL); nothing of it committed.
    /// `Ok(Some((rows, problems reported)))`: committed.
    async fn import_chunk(
        &self,
        job: &Job,
        owner: &str,
        limit_per_day: u32,
        chunk: &[(i64, ReadRow)],
        groups: &mut Groups,
    ) -> Result<Option<(i64, i64)>, StoreError> {
        // Reads first, outside the writer's transaction: each row's group and domain, as create-link resolves them.
        let domains: HashMap<String, String> = self
            .enabled_domains(&job.account_id)
            .await?
            .into_iter()
            .map(|d| (d.domain, d.id))
            .collect();
        let mut planned: Vec<(i64, Planned)> = Vec::new();
        for (line, read) in chunk {
            let plan = match read {
                Err(e) => Err(e.clone()),
                Ok((row, refused_code)) => self
                    .plan_row(job, row, &domains, groups)
                    .await?
                    .map(|req| (req, row.is_active, refused_code.clone())),
            };
            planned.push((*line, plan));
        }
        // Rows of a file mostly share their group, domain and destination host: each combination is resolved
        // (blocklist included) once per chunk.
        let mut resolved: HashMap<TargetKey, Result<Target, StoreError>> = HashMap::new();
        let mut targets = Vec::with_capacity(planned.len());
        for (_, plan) in &planned {
            let Ok((req, ..)) = plan else {
                targets.push(Err(StoreError::Invalid(String::new())));
                continue;
            };
            let key = (
                req.group_id.clone(),
                req.domain_id.clone(),
                req.long_url.host().to_owned(),
            );
            if !resolved.contains_key(&key) {
                let target = match self.resolve_target(req).await {
                    Ok(t) => Ok(t),
                    Err(
                        e
                        @ (StoreError::BlockedDestination | StoreError::PlatformDomainUnavailable),
                    ) => Err(e),
                    Err(e) => return Err(e),
                };
                resolved.insert(key.clone(), target);
            }
            targets.push(match &resolved[&key] {
                Ok(t) => Ok(t.clone()),
                Err(StoreError::BlockedDestination) => Err(StoreError::BlockedDestination),
                Err(_) => Err(StoreError::PlatformDomainUnavailable),
            });
        }

        let now = Micros::now();
        let mut tx = self.begin_write().await?;
        let renewed = sqlx::query(
            "UPDATE link_imports SET lease_until = $1 WHERE id = $2 AND lease_owner = $3 AND status = 'running'",
        )
        .bind(now.0 + LEASE_MICROS)
        .bind(&job.id)
        .bind(owner)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if renewed != 1 {
            return Ok(None);
        }
        // The day's count, its row locked until commit (PostgreSQL), so concurrent imports add up exactly.
        let day = Day::today().0;
        let used: i64 = sqlx::query(
            "INSERT INTO import_day_counts (account_id, day, links) VALUES ($1, $2, 0) \
             ON CONFLICT (account_id, day) DO UPDATE SET links = import_day_counts.links RETURNING links",
        )
        .bind(&job.account_id)
        .bind(day)
        .fetch_one(&mut *tx)
        .await?
        .try_get("links")?;
        let mut allowed = (i64::from(limit_per_day) - used).max(0);
        let mut outcomes: Vec<(i64, Outcome)> = Vec::with_capacity(planned.len());
        // The rows to create: each with its place in `outcomes` and its note so far.
        let mut creating: Vec<(usize, Option<ImportProblem>)> = Vec::new();
        let mut new_links: Vec<NewLink> = Vec::new();
        for ((line, plan), target) in planned.into_iter().zip(targets) {
            let ((req, active, refused_code), target) = match (plan, target) {
                (Err(e), _) => {
                    outcomes.push((line, Outcome::Failed(problem(line, e.code, e.detail))));
                    continue;
                }
                (Ok(_), Err(e)) => {
                    let code = match e {
                        StoreError::BlockedDestination => "blocked_destination",
                        _ => "platform_domain_unavailable",
                    };
                    outcomes.push((line, Outcome::Failed(problem(line, code, e.to_string()))));
                    continue;
                }
                (Ok(plan), Ok(target)) => (plan, target),
            };
            if allowed == 0 {
                let detail =
                    format!("the account imported its {limit_per_day} links of the day (UTC)");
                outcomes.push((line, Outcome::Failed(problem(line, "import_limit", detail))));
                continue;
            }
            allowed -= 1;
            let note = refused_code
                .map(|d| problem(line, "invalid_short_code", format!("{d}; made up instead")));
            creating.push((outcomes.len(), note));
            outcomes.push((line, Outcome::Created(None)));
            new_links.push(NewLink {
                req,
                target,
                active,
            });
        }
        // A requested code that is taken, or asked for twice in the chunk, is replaced and reported; looked up
        // here so that the insert's unique index is only the last word.
        let requested: Vec<(&str, &str)> = new_links
            .iter()
            .filter_map(|l| {
                let code = l.req.short_code.as_ref()?;
                Some((l.target.domain_id.as_str(), code.as_str()))
            })
            .collect();
        let mut taken = insert::taken_codes(&mut tx, &requested).await?;
        for (link, (at, note)) in new_links.iter_mut().zip(&mut creating) {
            let Some(code) = &link.req.short_code else {
                continue;
            };
            if !taken.insert((link.target.domain_id.clone(), code.as_str().to_owned())) {
                *note = Some(code_taken(outcomes[*at].0, code, &link.target.host));
                link.req.short_code = None;
            }
        }
        let created =
            match insert::insert_links(&mut tx, self.multi_row, &mut new_links, now.0).await? {
                Ok(created) => created,
                // A group or domain went since it was resolved: on PostgreSQL the transaction is spoiled; the chunk is
                // tried again from the start.
                Err(insert::TargetGone) => return Ok(None),
            };
        let tagged: Vec<(&str, &[crate::domain::Tag])> = new_links
            .iter()
            .zip(&created)
            .map(|(l, (c, _))| (c.id.as_str(), l.req.tags.as_slice()))
            .collect();
        link_tags::tag_new_links(&mut tx, self.multi_row, &job.account_id, &tagged).await?;
        let pairs: Vec<(&CreateLink, &CreatedLink)> = new_links
            .iter()
            .zip(&created)
            .map(|(l, (c, _))| (&l.req, c))
            .collect();
        record_created(&mut tx, &pairs).await?;
        for ((at, note), (link, (_, replaced))) in
            creating.into_iter().zip(new_links.iter().zip(&created))
        {
            let note = match replaced {
                Some(asked) => Some(code_taken(outcomes[at].0, asked, &link.target.host)),
                None => note,
            };
            outcomes[at].1 = Outcome::Created(note);
        }
        let (mut n_created, mut n_failed) = (0i64, 0i64);
        let mut problems: Vec<&ImportProblem> = Vec::new();
        for (_, outcome) in &outcomes {
            let problem = match outcome {
                Outcome::Created(p) => {
                    n_created += 1;
                    p.as_ref()
                }
                Outcome::Failed(p) => {
                    n_failed += 1;
                    Some(p)
                }
            };
            problems.extend(problem);
        }
        let room = usize::try_from((MAX_REPORTED_ERRORS - job.reported).max(0)).unwrap_or(0);
        problems.truncate(room);
        record_problems(&mut tx, self.multi_row, &job.id, &problems).await?;
        let reported = i64::try_from(problems.len()).unwrap_or(i64::MAX);
        sqlx::query(
            "UPDATE import_day_counts SET links = links + $1 WHERE account_id = $2 AND day = $3",
        )
        .bind(n_created)
        .bind(&job.account_id)
        .bind(day)
        .execute(&mut *tx)
        .await?;
        let n = i64::try_from(outcomes.len()).unwrap_or(i64::MAX);
        sqlx::query(
            "UPDATE link_imports SET processed = processed + $1, created = created + $2, failed = failed + $3 \
             WHERE id = $4",
        )
        .bind(n)
        .bind(n_created)
        .bind(n_failed)
        .bind(&job.id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some((n, reported)))
    }

    /// A row as create-link's request, its group and domain found by name; `Err` when the row names a domain the
    /// account cannot use or a group that cannot be made.
    async fn plan_row(
        &self,
        job: &Job,
        row: &Row,
        domains: &HashMap<String, String>,
        groups: &mut Groups,
    ) -> Result<Result<CreateLink, RowError>, StoreError> {
        let long_url = match crate::domain::LongUrl::parse(&row.long_url) {
            Ok(u) => u,
            Err(e) => {
                return Ok(Err(RowError {
                    code: "validation_error",
                    detail: e.0,
                }));
            }
        };
        let domain_id = match &row.domain {
            None => None,
            Some(host) => match domains.get(&host.trim_end_matches('.').to_ascii_lowercase()) {
                Some(id) => Some(id.clone()),
                None => {
                    return Ok(Err(RowError {
                        code: "validation_error",
                        detail: format!(
                            "domain {host:?} is not one of the account's enabled domains"
                        ),
                    }));
                }
            },
        };
        // Our export's group: the same group when the account has it (an export imported back), else one of its
        // name (another account's export).
        let own_id = match &row.group_id {
            Some(id) if row.group.is_none() => self.import_group_id(job, id, groups).await?,
            _ => None,
        };
        let named = row.group.as_ref().or(row.group_name.as_ref());
        let group_id = match (own_id, named) {
            (Some(id), _) => Some(id),
            (None, None) => None,
            (None, Some(named)) => match self.import_group(job, named, groups).await? {
                Some(id) => Some(id),
                None => {
                    return Ok(Err(RowError {
                        code: "validation_error",
                        detail: format!("group {named:?} does not exist and cannot be created"),
                    }));
                }
            },
        };
        Ok(Ok(CreateLink {
            creator: Creator::Import(job.id.clone()),
            account_id: job.account_id.clone(),
            long_url,
            short_code: row.short_code.clone(),
            group_id,
            domain_id,
            expires_at: row.expires_at,
            forward_query: row.forward_query,
            actor: job.actor.clone(),
            title: row.title.clone(),
            tags: row.tags.clone(),
            // The import's columns hold no smart-link fields: imported links are plain.
            options: Default::default(),
        }))
    }
}
