-- Visitors as 64-bit keys (issue 26, ingestion of a day's traffic). A click report records up to 1,000 visitor hashes
-- (one per event), and each lands at a random place of the day's B-tree: nearly every one dirtied a page of its own,
-- and with the owner's id and 32 hex characters in every entry (about 70 bytes) the tree had many pages to dirty
-- (SQLite: 16.6k events/s with hashes against 21.9k without, BENCHMARKS.md). A visitor of an owner on a day is now
-- one number: the first 64 bits of SHA-256 over the owner and the hash (store/src/unique_visitors.rs,
-- `stored_key`). Like `day_visitors` before, the rows go with their day's salt at 02:00 UTC the next day.
--
-- The hashes already in `day_visitors` are moved here by the origin when it migrates (SQL has no SHA-256 on
-- SQLite: `hashes_to_keys`), which then drops that table.
CREATE TABLE day_visitor_keys (
    day     BIGINT NOT NULL,
    visitor BIGINT NOT NULL,
    PRIMARY KEY (day, visitor)
) WITHOUT ROWID;
