-- Each link's clicks of all time, kept by the click ingestion with its day counters (store/src/clicks.rs), so that
-- the list's sort=clicks and the export's clicks column read one column instead of summing every day of every
-- candidate link (BENCHMARKS.md, "Search, tags and export"). Every click is counted once in each dimension of the
-- day counters, so the sum over one dimension is the total.
ALTER TABLE links ADD COLUMN clicks BIGINT NOT NULL DEFAULT 0;
UPDATE links SET clicks = COALESCE(
    (SELECT SUM(c.clicks) FROM link_click_counts c WHERE c.link_id = links.id AND c.dimension = 'device'), 0);
-- sort=clicks: the account's links, most clicks first, ties newest first.
CREATE INDEX links_account_clicks ON links (account_id, clicks DESC, created_at DESC, id DESC);
