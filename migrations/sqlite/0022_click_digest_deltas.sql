-- Click digest deltas (issue 26, ingestion of a day's traffic): what each click report adds to a link's, a group's
-- and an account's day, as a row of its own, instead of merged into the day row by the report. A busy day's row
-- holds hundreds of values, and rewriting it whole for every report that touches it made ingestion slow down as
-- the day filled up (6–8k events/s on SQLite, 3.5–4k on PostgreSQL, BENCHMARKS.md); a delta holds only the
-- report's own values. The origin folds the deltas into the day rows in the background, oldest first, a second's
-- worth of reports at a time (store/src/digests/fold.rs); the statistics add the deltas not folded yet to the day
-- rows they read, in one snapshot, so nothing is counted twice or missed.
--
-- `scope` is 'link', 'group' or 'account' and `owner` that link's, group's or account's id; `group_id` is a link
-- row's group (as in link_click_digests), '' otherwise. No foreign keys, as for the link digests: folding leaves out
-- the deltas of a group or an account deleted meanwhile, and a link's deletion folds its own first.
CREATE TABLE click_digest_deltas (
    id       INTEGER PRIMARY KEY,
    scope    TEXT   NOT NULL CHECK (scope IN ('link', 'group', 'account')),
    owner    TEXT   NOT NULL,
    period   BIGINT NOT NULL,
    group_id TEXT   NOT NULL,
    clicks   BIGINT NOT NULL,
    bots     BIGINT NOT NULL,
    uniques  BIGINT NOT NULL,
    data     BLOB  NOT NULL
);

CREATE INDEX click_digest_deltas_owner ON click_digest_deltas (owner, period);
