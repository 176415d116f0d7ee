//! Click events reported by the edge, and per-link statistics.

use crate::domain::Micros;
use crate::error::StoreError;
use crate::pool::Db;
use kv_model::ClickEvent;
use sqlx::Row;

/// Clicks on one day (UTC).
#[derive(Debug, Clone)]
pub struct DayCount {
    /// `YYYY-MM-DD`.
    pub date: String,
    /// Clicks.
    pub clicks: i64,
}

/// Clicks from one country.
#[derive(Debug, Clone)]
pub struct CountryCount {
    /// ISO 3166-1 alpha-2, or null when unknown.
    pub country: Option<String>,
    /// Clicks.
    pub clicks: i64,
}

/// A link's statistics.
#[derive(Debug, Clone)]
pub struct LinkStats {
    /// The link.
    pub link_id: String,
    /// All clicks.
    pub total: i64,
    /// By day, oldest first.
    pub by_day: Vec<DayCount>,
    /// By country, most clicks first.
    pub by_country: Vec<CountryCount>,
}

const DAY_MICROS: i64 = 86_400_000_000;

/// Keeps short free-text fields short: they come from visitors.
fn bounded(v: Option<String>, max: usize) -> Option<String> {
    v.map(|s| s.chars().take(max).collect::<String>())
        .filter(|s| !s.is_empty())
}

impl Db {
    /// Stores events whose link or group still exists; returns how many were stored.
    pub async fn record_clicks(&self, events: Vec<ClickEvent>) -> Result<usize, StoreError> {
        let mut tx = self.write.begin().await?;
        let mut stored = 0;
        for e in events {
            let owner = match &e.short_code {
                Some(code) => sqlx::query(
                    "SELECT l.id AS link_id, l.account_id, l.group_id FROM links l JOIN domains d ON d.id = l.domain_id \
                     WHERE d.host = $1 AND l.short_code = $2",
                )
                .bind(e.host.to_ascii_lowercase())
                .bind(code.to_ascii_lowercase())
                .fetch_optional(&mut *tx)
                .await?
                .map(|r| Ok::<_, sqlx::Error>((Some(r.try_get::<String, _>("link_id")?), r.try_get("account_id")?, r.try_get("group_id")?)))
                .transpose()?,
                None => sqlx::query("SELECT account_id, id FROM groups WHERE id = $1")
                    .bind(e.group_id.to_ascii_lowercase())
                    .fetch_optional(&mut *tx)
                    .await?
                    .map(|r| Ok::<_, sqlx::Error>((None, r.try_get("account_id")?, r.try_get("id")?)))
                    .transpose()?,
            };
            let Some((link_id, account_id, group_id)) = owner else {
                continue;
            };
            let (account_id, group_id): (String, String) = (account_id, group_id);
            sqlx::query(
                "INSERT INTO clicks (account_id, link_id, group_id, at, country, referer_host, device) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(account_id)
            .bind(link_id)
            .bind(group_id)
            .bind(e.at.saturating_mul(1_000))
            .bind(bounded(e.country, 2).map(|c| c.to_ascii_uppercase()))
            .bind(bounded(e.referer_host, 253))
            .bind(e.device.as_str())
            .execute(&mut *tx)
            .await?;
            stored += 1;
        }
        tx.commit().await?;
        Ok(stored)
    }

    /// Statistics of a link of this account; None when it is not theirs (or does not exist).
    pub async fn link_stats(
        &self,
        account_id: &str,
        link_id: &str,
    ) -> Result<Option<LinkStats>, StoreError> {
        let mut tx = self.read.begin().await?;
        let owned = sqlx::query("SELECT id FROM links WHERE id = $1 AND account_id = $2")
            .bind(link_id)
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?;
        if owned.is_none() {
            return Ok(None);
        }
        let days = sqlx::query(
            // 86400000000 = DAY_MICROS, inline so both engines group by the very same expression.
            "SELECT at / 86400000000 AS day, COUNT(*) AS n FROM clicks WHERE link_id = $1 \
             GROUP BY at / 86400000000 ORDER BY day",
        )
        .bind(link_id)
        .fetch_all(&mut *tx)
        .await?;
        let countries = sqlx::query(
            "SELECT country, COUNT(*) AS n FROM clicks WHERE link_id = $1 GROUP BY country ORDER BY COUNT(*) DESC, country",
        )
        .bind(link_id)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let by_day = days
            .iter()
            .map(|r| {
                let day: i64 = r.try_get("day")?;
                let date = Micros(day * DAY_MICROS).to_iso8601()[..10].to_owned();
                Ok(DayCount {
                    date,
                    clicks: r.try_get("n")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let by_country = countries
            .iter()
            .map(|r| {
                Ok(CountryCount {
                    country: r.try_get("country")?,
                    clicks: r.try_get("n")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let total = by_day.iter().map(|d| d.clicks).sum();
        Ok(Some(LinkStats {
            link_id: link_id.to_owned(),
            total,
            by_day,
            by_country,
        }))
    }
}
