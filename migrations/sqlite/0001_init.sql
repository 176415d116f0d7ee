-- Shortlink schema, SQLite flavour. Identifiers are UUID text; timestamps are
-- microseconds since the UNIX epoch (BIGINT) and flags are BIGINT 0/1, so every value
-- has one type on both engines (sqlx's Any driver maps neither SQLite booleans nor mixed widths).

CREATE TABLE accounts (
    id               TEXT    PRIMARY KEY,
    email            TEXT    NOT NULL UNIQUE,
    api_access       BIGINT  NOT NULL CHECK (api_access IN (0, 1)),
    default_group_id TEXT    NOT NULL,
    -- Maintained in the same transaction as every link insert, so that the
    -- unfiltered list total is one row read instead of a count over the account.
    link_count       BIGINT  NOT NULL DEFAULT 0,
    created_at       BIGINT  NOT NULL
);

CREATE TABLE api_keys (
    id         TEXT   PRIMARY KEY,
    account_id TEXT   NOT NULL UNIQUE REFERENCES accounts (id) ON DELETE CASCADE,
    key_hash   TEXT   NOT NULL UNIQUE,
    masked     TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    last_used_at BIGINT
);

CREATE TABLE groups (
    id         TEXT   PRIMARY KEY,
    account_id TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name       TEXT   NOT NULL,
    key        TEXT   NOT NULL UNIQUE,
    settings   TEXT   NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX groups_account ON groups (account_id);

CREATE TABLE domains (
    id           TEXT    PRIMARY KEY,
    host         TEXT    NOT NULL UNIQUE,
    -- NULL for a platform domain; the owner for a custom domain.
    account_id   TEXT    REFERENCES accounts (id) ON DELETE CASCADE,
    is_platform  BIGINT  NOT NULL CHECK (is_platform IN (0, 1)),
    enabled      BIGINT  NOT NULL CHECK (enabled IN (0, 1)),
    fallback_url TEXT,
    created_at   BIGINT  NOT NULL
);
CREATE INDEX domains_account ON domains (account_id);

CREATE TABLE links (
    id         TEXT    PRIMARY KEY,
    account_id TEXT    NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    group_id   TEXT    NOT NULL REFERENCES groups (id),
    domain_id  TEXT    NOT NULL REFERENCES domains (id),
    short_code TEXT    NOT NULL,
    long_url   TEXT    NOT NULL,
    is_active  BIGINT  NOT NULL DEFAULT 1 CHECK (is_active IN (0, 1)),
    created_at BIGINT  NOT NULL
);
-- The uniqueness rule of create-link: insert and map the violation, never check first.
CREATE UNIQUE INDEX links_domain_short_code ON links (domain_id, short_code);
CREATE INDEX links_account_created ON links (account_id, created_at DESC, id DESC);
-- Equality on long_url also yields the newest-first order, so an exact filter reads only its matches.
CREATE INDEX links_account_long_url ON links (account_id, long_url, created_at DESC, id DESC);
CREATE INDEX links_group ON links (group_id);

-- One row per successful creation, per key: the rolling-hour window of the rate limit.
CREATE TABLE link_creations (
    key_id     TEXT   NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL
);
CREATE INDEX link_creations_key_time ON link_creations (key_id, created_at);

CREATE TABLE blocked_domains (
    domain     TEXT   PRIMARY KEY,
    created_at BIGINT NOT NULL
);
