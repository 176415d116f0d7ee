-- Link imports (issue 24; store/src/link_import): a CSV queued as a job, run by whichever origin process holds its
-- lease, a chunk of rows per transaction with its progress, so a restart resumes where the last commit left it.
CREATE TABLE link_imports (
    id          TEXT   PRIMARY KEY,
    account_id  TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    -- Who queued it: the activity log's actor of every link it creates.
    actor_type  TEXT   NOT NULL,
    actor_id    TEXT,
    actor_email TEXT,
    status      TEXT   NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed')),
    -- The file, until the job ends (then emptied).
    body        TEXT   NOT NULL,
    total       BIGINT NOT NULL,
    processed   BIGINT NOT NULL DEFAULT 0,
    created     BIGINT NOT NULL DEFAULT 0,
    failed      BIGINT NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_until BIGINT,
    created_at  BIGINT NOT NULL,
    finished_at BIGINT
);
-- The runners' question: the oldest job not yet ended.
CREATE INDEX link_imports_open ON link_imports (created_at, id) WHERE status IN ('queued', 'running');
CREATE INDEX link_imports_account ON link_imports (account_id);

-- A job's first 1,000 problems, by the row's line in the file.
CREATE TABLE link_import_errors (
    import_id  TEXT   NOT NULL REFERENCES link_imports (id) ON DELETE CASCADE,
    row_number BIGINT NOT NULL,
    error_code TEXT   NOT NULL,
    detail     TEXT   NOT NULL,
    PRIMARY KEY (import_id, row_number)
);

-- Links imported per account and UTC day (day = days since 1970-01-01): the imports' own limit.
CREATE TABLE import_day_counts (
    account_id TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    day        BIGINT NOT NULL,
    links      BIGINT NOT NULL,
    PRIMARY KEY (account_id, day)
);
