-- The life of a link: expiry, query forwarding, and accounts an operator can disable.

-- When the link stops redirecting (microseconds since the UNIX epoch); NULL: never.
ALTER TABLE links ADD COLUMN expires_at BIGINT;
-- 1: the visitor's query string is appended to the destination at the edge.
ALTER TABLE links ADD COLUMN forward_query BIGINT NOT NULL DEFAULT 1 CHECK (forward_query IN (0, 1));

-- Deleting a link removes its row (and its clicks), which frees its short code. Its creation
-- still counts against the key's hourly limit: a deleted link created inside the window leaves
-- its creation time here, and the limit counts these rows beside the key's live links. Rows
-- older than the window are pruned when the key deletes again.
CREATE TABLE deleted_creations (
    key_id     TEXT   NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX deleted_creations_key_time ON deleted_creations (key_id, created_at);

-- A disabled account's key is refused on every route and its links stop at the edge.
ALTER TABLE accounts ADD COLUMN disabled BIGINT NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1));
