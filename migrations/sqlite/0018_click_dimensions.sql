-- Issue 26, first part: the browser, operating system, region, city and UTM parameters of each click, and the
-- requests the edge recognised as bots and did not count.
--
-- Raw clicks get the new facts as columns (NULL: unknown or absent; rows stored before have none). The
-- User-Agent they are derived from is never stored. Retention deletes these rows by age as before.
ALTER TABLE clicks ADD COLUMN browser TEXT;
ALTER TABLE clicks ADD COLUMN os TEXT;
ALTER TABLE clicks ADD COLUMN region TEXT;
ALTER TABLE clicks ADD COLUMN city TEXT;
ALTER TABLE clicks ADD COLUMN utm_source TEXT;
ALTER TABLE clicks ADD COLUMN utm_medium TEXT;
ALTER TABLE clicks ADD COLUMN utm_campaign TEXT;

-- The day counters (0005) take the new dimensions in the same rows' shape, so the link deletion's subtraction,
-- the lock order and the reads stay one code path for every dimension:
--   `browser`, `os`                          a name, every click counted in exactly one of each;
--   `region`, `city`                         '<country>' || TAB || '<name>', each part '' when unknown (a
--                                            region is only unique within its country; a TAB is never in a
--                                            stored name: names with control characters are dropped);
--   `utm_source`, `utm_medium`, `utm_campaign`  the value, '' when the visited URL had none;
--   `bots`                                   value '': the bot requests of the day, which are in no other
--                                            dimension (so every other dimension still sums to the clicks).
-- Clicks stored before this migration are in none of the new dimensions (they were never classified): a
-- range reaching back before it sums to less in them than its total.
--
-- SQLite cannot change a CHECK constraint: each table is rebuilt with the wider one (same key, same rows).

CREATE TABLE link_click_counts_new (
    link_id TEXT NOT NULL,
    day BIGINT NOT NULL,
    dimension TEXT NOT NULL CHECK (dimension IN ('country', 'device', 'referrer', 'browser', 'os', 'region', 'city',
        'utm_source', 'utm_medium', 'utm_campaign', 'bots')),
    value TEXT NOT NULL,
    group_id TEXT NOT NULL,
    clicks BIGINT NOT NULL,
    PRIMARY KEY (link_id, day, dimension, value, group_id)
) WITHOUT ROWID;
INSERT INTO link_click_counts_new (link_id, day, dimension, value, group_id, clicks) SELECT link_id, day, dimension, value, group_id, clicks FROM link_click_counts;
DROP TABLE link_click_counts;
ALTER TABLE link_click_counts_new RENAME TO link_click_counts;

CREATE TABLE group_click_counts_new (
    group_id TEXT NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    day BIGINT NOT NULL,
    dimension TEXT NOT NULL CHECK (dimension IN ('country', 'device', 'referrer', 'browser', 'os', 'region', 'city',
        'utm_source', 'utm_medium', 'utm_campaign', 'bots')),
    value TEXT NOT NULL,
    clicks BIGINT NOT NULL,
    PRIMARY KEY (group_id, day, dimension, value)
) WITHOUT ROWID;
INSERT INTO group_click_counts_new (group_id, day, dimension, value, clicks) SELECT group_id, day, dimension, value, clicks FROM group_click_counts;
DROP TABLE group_click_counts;
ALTER TABLE group_click_counts_new RENAME TO group_click_counts;

CREATE TABLE account_click_counts_new (
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    day BIGINT NOT NULL,
    dimension TEXT NOT NULL CHECK (dimension IN ('country', 'device', 'referrer', 'browser', 'os', 'region', 'city',
        'utm_source', 'utm_medium', 'utm_campaign', 'bots')),
    value TEXT NOT NULL,
    clicks BIGINT NOT NULL,
    PRIMARY KEY (account_id, day, dimension, value)
) WITHOUT ROWID;
INSERT INTO account_click_counts_new (account_id, day, dimension, value, clicks) SELECT account_id, day, dimension, value, clicks FROM account_click_counts;
DROP TABLE account_click_counts;
ALTER TABLE account_click_counts_new RENAME TO account_click_counts;
