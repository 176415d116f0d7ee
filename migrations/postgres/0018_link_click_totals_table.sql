-- Each link's clicks of all time move from a column of `links` (migration 0014) to a narrow table of their own.
-- Why: `links.clicks` was indexed (the list's sort=clicks), so every click report's update of it could not be a
-- HOT update on PostgreSQL and wrote a new entry into every index of `links`, the trigram GIN of `q` included:
-- click ingestion fell from 25,000 to 6,690 events/s (BENCHMARKS.md, "Click ingestion"). Here an update writes
-- this table's two indexes only.

-- No link may be created, and no click added to `links.clicks`, between the copy below and the trigger's
-- creation: origins still running while the migration runs wait here until it commits (then the old binaries'
-- statements on `links.clicks` fail, and the worker retries their click reports; README, "Running the origin", upgrades).
LOCK TABLE links IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE link_click_totals (
    link_id    TEXT   PRIMARY KEY REFERENCES links (id) ON DELETE CASCADE,
    -- Copies of the link's (never changed), so that sort=clicks pages this table's index alone.
    account_id TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    clicks     BIGINT NOT NULL DEFAULT 0
);
INSERT INTO link_click_totals (link_id, account_id, created_at, clicks)
SELECT id, account_id, created_at, clicks FROM links;
-- sort=clicks: the account's links, most clicks first, ties newest first.
CREATE INDEX link_click_totals_account ON link_click_totals (account_id, clicks DESC, created_at DESC, link_id DESC);

DROP INDEX links_account_clicks;
ALTER TABLE links DROP COLUMN clicks;

-- Every link has its row from its first moment, whichever way it was made (create-link, bulk-create, import,
-- dynamic links, seeds): a trigger rather than each writer remembering it.
CREATE FUNCTION link_click_totals_new() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO link_click_totals (link_id, account_id, created_at) VALUES (NEW.id, NEW.account_id, NEW.created_at);
    RETURN NULL;
END
$$;
CREATE TRIGGER links_click_totals AFTER INSERT ON links FOR EACH ROW EXECUTE FUNCTION link_click_totals_new();
