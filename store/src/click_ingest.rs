//! The store's entry point for click reports: a report goes to the click writer, which commits the reports waiting
//! at the same moment together ([`crate::click_writer`]). What a report writes is [`crate::clicks`]'s. Apart from
//! `clicks` so that the writer (which `pool` holds) and the report code do not import each other through `pool`.

use crate::clicks::{Ingested, Report};
use crate::domain::ClickBatchId;
use crate::error::StoreError;
use crate::pool::Db;
use kv_model::ClickEvent;

impl Db {
    /// Stores a click report: the events whose link or group still exists, as raw events and in the day
    /// counters, in one transaction with the other reports waiting at the same moment
    /// ([`crate::click_writer`]). With a batch id, a report whose id was stored before (and not yet pruned, see
    /// [`Db::prune`]) stores nothing and answers [`Ingested::Duplicate`], also when two deliveries
    /// of it arrive at once.
    pub async fn record_clicks(
        &self,
        batch: Option<&ClickBatchId>,
        events: Vec<ClickEvent>,
    ) -> Result<Ingested, StoreError> {
        self.click_writer.record(Report::new(batch, events)).await
    }
}
