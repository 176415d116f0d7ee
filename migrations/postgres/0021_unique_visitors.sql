-- Unique visitors (issue 26). `visitor_salts` holds the random salt of each UTC day (`day` = days since 1970-01-01)
-- that the worker hashes visitors with; the origin makes today's and tomorrow's, publishes them to KV
-- (`salt:<day>`), and deletes a day's salt at 02:00 UTC the next day, from here and from KV.
CREATE TABLE visitor_salts (
    day  BIGINT PRIMARY KEY,
    salt TEXT   NOT NULL
);

-- The visitor hashes seen per day and owner (a link's id, or for a dynamic link its group's id: its hash covers
-- the link's path): a click whose hash is new here is its visitor's first that day. Deleted with the day's salt,
-- so no hash outlives the day it could be told apart in. No foreign key: a deleted link's rows go with its day.
CREATE TABLE day_visitors (
    day     BIGINT NOT NULL,
    owner   TEXT   NOT NULL,
    visitor TEXT   NOT NULL,
    PRIMARY KEY (day, owner, visitor)
);

-- First visits per day row: the day's unique visitors of a link; of a group or an account, the sum of its links'
-- (a visitor of two links counts for each). Block rows leave it 0: ranges add up their day rows' figures.
ALTER TABLE link_click_digests ADD COLUMN uniques BIGINT NOT NULL DEFAULT 0;
ALTER TABLE group_click_digests ADD COLUMN uniques BIGINT NOT NULL DEFAULT 0;
ALTER TABLE account_click_digests ADD COLUMN uniques BIGINT NOT NULL DEFAULT 0;
