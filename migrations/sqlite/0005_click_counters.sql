-- Analytics that hold at scale: per-day click counters, idempotent ingestion, raw-click retention.
--
-- The statistics are read from these counters only, never from the raw clicks, which are pruned
-- after the retention period while the counters are kept. A counter row holds the clicks of one
-- day (days since 1970-01-01, UTC) with one value of one dimension: `country` (ISO code, '' when
-- unknown), `device`, or `referrer` (host, '' when none). Every click adds one to exactly one row
-- of each dimension, so any dimension sums to the clicks of its day: totals and days are read
-- from the `device` rows, and no separate total row is written. Each click is counted three
-- times: for its link (persistent links), for its group and for its account, so the statistics
-- of a group or an account read a few rows per day, not a row per link. The tables are
-- WITHOUT ROWID: each row lives in its primary key's B-tree, one tree to write instead of two.
-- Keys lead with the id and the day, so the rows a report adds to one link lie together.

-- Per link. `group_id` is the link's group when the clicks happened (a link can move), so that
-- deleting the link can take its clicks out of the group's counters too. Deleting a link
-- deletes its rows (as it deletes its raw clicks) after subtracting them from its group's and
-- account's; no foreign key, so they are still there to subtract once the link row is gone (a
-- report cannot count a link deleted meanwhile: the raw clicks' foreign key refuses it).
CREATE TABLE link_click_counts (
    link_id   TEXT   NOT NULL,
    day       BIGINT NOT NULL,
    dimension TEXT   NOT NULL CHECK (dimension IN ('country', 'device', 'referrer')),
    value     TEXT   NOT NULL,
    group_id  TEXT   NOT NULL,
    clicks    BIGINT NOT NULL,
    PRIMARY KEY (link_id, day, dimension, value, group_id)
) WITHOUT ROWID;

-- Per group, as attributed when the clicks happened: its links' and its dynamic links'.
-- Deleting a group deletes its rows (its statistics are gone with it; the account keeps them).
CREATE TABLE group_click_counts (
    group_id  TEXT   NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    day       BIGINT NOT NULL,
    dimension TEXT   NOT NULL CHECK (dimension IN ('country', 'device', 'referrer')),
    value     TEXT   NOT NULL,
    clicks    BIGINT NOT NULL,
    PRIMARY KEY (group_id, day, dimension, value)
) WITHOUT ROWID;

-- Per account: every link's and dynamic link's clicks.
CREATE TABLE account_click_counts (
    account_id TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    day        BIGINT NOT NULL,
    dimension  TEXT   NOT NULL CHECK (dimension IN ('country', 'device', 'referrer')),
    value      TEXT   NOT NULL,
    clicks     BIGINT NOT NULL,
    PRIMARY KEY (account_id, day, dimension, value)
) WITHOUT ROWID;

-- The counters of the clicks recorded so far (clicks before 1970 are not counted: the edge's
-- clock never reports them). A group deleted since keeps no counters, as if deleted now.
INSERT INTO link_click_counts (link_id, day, dimension, value, group_id, clicks)
SELECT link_id, at / 86400000000, 'country', COALESCE(country, ''), group_id, COUNT(*)
FROM clicks WHERE at >= 0 AND link_id IS NOT NULL
GROUP BY link_id, at / 86400000000, COALESCE(country, ''), group_id;
INSERT INTO link_click_counts (link_id, day, dimension, value, group_id, clicks)
SELECT link_id, at / 86400000000, 'device', device, group_id, COUNT(*)
FROM clicks WHERE at >= 0 AND link_id IS NOT NULL
GROUP BY link_id, at / 86400000000, device, group_id;
INSERT INTO link_click_counts (link_id, day, dimension, value, group_id, clicks)
SELECT link_id, at / 86400000000, 'referrer', COALESCE(referer_host, ''), group_id, COUNT(*)
FROM clicks WHERE at >= 0 AND link_id IS NOT NULL
GROUP BY link_id, at / 86400000000, COALESCE(referer_host, ''), group_id;

INSERT INTO group_click_counts (group_id, day, dimension, value, clicks)
SELECT group_id, at / 86400000000, 'country', COALESCE(country, ''), COUNT(*)
FROM clicks WHERE at >= 0 AND group_id IN (SELECT id FROM groups)
GROUP BY group_id, at / 86400000000, COALESCE(country, '');
INSERT INTO group_click_counts (group_id, day, dimension, value, clicks)
SELECT group_id, at / 86400000000, 'device', device, COUNT(*)
FROM clicks WHERE at >= 0 AND group_id IN (SELECT id FROM groups)
GROUP BY group_id, at / 86400000000, device;
INSERT INTO group_click_counts (group_id, day, dimension, value, clicks)
SELECT group_id, at / 86400000000, 'referrer', COALESCE(referer_host, ''), COUNT(*)
FROM clicks WHERE at >= 0 AND group_id IN (SELECT id FROM groups)
GROUP BY group_id, at / 86400000000, COALESCE(referer_host, '');

INSERT INTO account_click_counts (account_id, day, dimension, value, clicks)
SELECT account_id, at / 86400000000, 'country', COALESCE(country, ''), COUNT(*)
FROM clicks WHERE at >= 0
GROUP BY account_id, at / 86400000000, COALESCE(country, '');
INSERT INTO account_click_counts (account_id, day, dimension, value, clicks)
SELECT account_id, at / 86400000000, 'device', device, COUNT(*)
FROM clicks WHERE at >= 0
GROUP BY account_id, at / 86400000000, device;
INSERT INTO account_click_counts (account_id, day, dimension, value, clicks)
SELECT account_id, at / 86400000000, 'referrer', COALESCE(referer_host, ''), COUNT(*)
FROM clicks WHERE at >= 0
GROUP BY account_id, at / 86400000000, COALESCE(referer_host, '');

-- The click reports already counted, by the worker's batch id: a redelivered report is
-- answered as a duplicate and not counted again. Pruned after 7 days (a redelivery comes
-- within minutes or hours).
CREATE TABLE click_batches (
    batch_id    TEXT   PRIMARY KEY,
    received_at BIGINT NOT NULL
);
CREATE INDEX click_batches_received ON click_batches (received_at);

-- Raw clicks are pruned by age, in bounded batches. Clicks arrive in about the order they
-- happen, so this index grows at its end.
CREATE INDEX clicks_at ON clicks (at);
