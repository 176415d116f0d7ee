-- Origin → edge propagation and click analytics.

-- The transactional outbox: every change to a link, group, domain or the blocklist adds the
-- KV key it affects, in the same transaction as the change. The publisher reads the current
-- record of each key when it drains, so a row never carries a stale value and replaying a row
-- is harmless.
CREATE TABLE outbox (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kv_key     TEXT   NOT NULL,
    created_at BIGINT NOT NULL
);

-- One publisher at a time across origin processes: the holder renews its lease each round.
CREATE TABLE publisher_lease (
    name       TEXT   PRIMARY KEY,
    holder     TEXT   NOT NULL,
    expires_at BIGINT NOT NULL
);
INSERT INTO publisher_lease (name, holder, expires_at) VALUES ('kv', '', 0);

-- One row per visitor request on a link or dynamic link whose group has analytics on.
CREATE TABLE clicks (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id   TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    link_id      TEXT   REFERENCES links (id) ON DELETE CASCADE,
    group_id     TEXT   NOT NULL,
    at           BIGINT NOT NULL,
    country      TEXT,
    referer_host TEXT,
    device       TEXT   NOT NULL
);
CREATE INDEX clicks_link_at ON clicks (link_id, at);
