-- Click digests (issue 26): the statistics' storage from now on. A row holds one period of one link, group or
-- account: `span` 'day' (`period` = days since 1970-01-01, UTC) or 'block' (`period` = day / 32, a cache the
-- statistics build and check, see store/src/digests/read.rs); its clicks; a revision that every write to a day
-- row bumps; the requests the edge recognised as bots and did not count (`bots`, in no other figure); and `data`,
-- the counts of every dimension's values in one binary digest (store/src/digests/format.rs).
-- A report writes one row per link, group and account and day it touches, whatever the number of dimensions and
-- values; the statistics read one row per period. The counter tables of migration 0005 are moved here and dropped
-- by the origin at start (store/src/digests/convert.rs): their rows become digests that SQL cannot write.
--
-- Link rows carry the group their clicks were attributed to (a link can move), so that deleting the link can take
-- them out of that group's rows (block rows: ''); no foreign key, as before, so they are still there to take out
-- once the link row is gone. Group and account rows go with their group or account.
CREATE TABLE link_click_digests (
    link_id  TEXT   NOT NULL,
    span     TEXT   NOT NULL CHECK (span IN ('day', 'block')),
    period   BIGINT NOT NULL,
    group_id TEXT   NOT NULL,
    revision BIGINT NOT NULL,
    clicks   BIGINT NOT NULL,
    bots     BIGINT NOT NULL,
    data     BYTEA   NOT NULL,
    PRIMARY KEY (link_id, span, period, group_id)
);

CREATE TABLE group_click_digests (
    group_id TEXT   NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    span     TEXT   NOT NULL CHECK (span IN ('day', 'block')),
    period   BIGINT NOT NULL,
    revision BIGINT NOT NULL,
    clicks   BIGINT NOT NULL,
    bots     BIGINT NOT NULL,
    data     BYTEA   NOT NULL,
    PRIMARY KEY (group_id, span, period)
);

CREATE TABLE account_click_digests (
    account_id TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    span       TEXT   NOT NULL CHECK (span IN ('day', 'block')),
    period     BIGINT NOT NULL,
    revision   BIGINT NOT NULL,
    clicks     BIGINT NOT NULL,
    bots       BIGINT NOT NULL,
    data       BYTEA   NOT NULL,
    PRIMARY KEY (account_id, span, period)
);

-- Raw clicks get the new facts as columns (NULL: unknown or absent; rows stored before have none). The User-Agent
-- the browser and OS are derived from is never stored. Retention deletes these rows by age as before.
ALTER TABLE clicks ADD COLUMN browser TEXT;
ALTER TABLE clicks ADD COLUMN os TEXT;
ALTER TABLE clicks ADD COLUMN region TEXT;
ALTER TABLE clicks ADD COLUMN city TEXT;
ALTER TABLE clicks ADD COLUMN utm_source TEXT;
ALTER TABLE clicks ADD COLUMN utm_medium TEXT;
ALTER TABLE clicks ADD COLUMN utm_campaign TEXT;
-- Whether the click was its visitor's first on the link that UTC day (unique visitors); NULL where not known.
ALTER TABLE clicks ADD COLUMN first_visit BIGINT CHECK (first_visit IN (0, 1));
-- The raw click export of an account and of its groups reads by account and time (a link's has clicks_link_at).
CREATE INDEX clicks_account_at ON clicks (account_id, at);
