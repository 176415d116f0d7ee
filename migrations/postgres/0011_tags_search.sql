-- Titles, tags and search (issue 24). A link gains an optional title and up to 10 tags; the list filters by a
-- substring of its short code, destination or title (`q`), by tags, group, domain and state. Store code:
-- store/src/tags.rs, store/src/links.rs.

ALTER TABLE links ADD COLUMN title TEXT;
-- What `q` searches: the lowercase (Rust's Unicode lowercase, written by the store) short code, destination and
-- title joined by line breaks, which `q` cannot contain, so no match spans two fields.
ALTER TABLE links ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
-- Existing links: no title yet; short codes are lowercase and destinations ASCII, so lower() is exact here.
UPDATE links SET search_text = lower(short_code || chr(10) || long_url || chr(10));

-- An account's tags. `name` is the first spelling the account used (or the last rename's); `name_key` its
-- lowercase, what tags are compared by. A tag no link carries any more stays (keeping its spelling) but is not
-- listed.
CREATE TABLE tags (
    id         TEXT   PRIMARY KEY,
    account_id TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name       TEXT   NOT NULL,
    name_key   TEXT   NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX tags_account_key ON tags (account_id, name_key);

-- Which link carries which tag. The primary key reads a link's tags; the second index a tag's links (the `tag`
-- filter, the tag list's counts, rename and delete).
CREATE TABLE link_tags (
    link_id TEXT NOT NULL REFERENCES links (id) ON DELETE CASCADE,
    tag_id  TEXT NOT NULL REFERENCES tags (id) ON DELETE CASCADE,
    PRIMARY KEY (link_id, tag_id)
);
CREATE INDEX link_tags_tag ON link_tags (tag_id, link_id);

-- The filters on group, domain and state, newest first within the account.
CREATE INDEX links_account_group ON links (account_id, group_id, created_at DESC, id DESC);
CREATE INDEX links_account_domain ON links (account_id, domain_id, created_at DESC, id DESC);
CREATE INDEX links_account_short_code ON links (account_id, short_code COLLATE "C", created_at DESC, id DESC);

-- `q`: a trigram index on search_text, which LIKE '%…%' uses for three characters or more. pg_trgm is a trusted
-- extension (PostgreSQL 13+): the database's owner may create it. It may already be installed in another schema
-- than ours (the extension is per database), so its operator class is named with the schema it is in.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
DO $$
DECLARE
    trgm_schema TEXT;
BEGIN
    SELECT n.nspname INTO trgm_schema
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'pg_trgm';
    EXECUTE format('CREATE INDEX links_search_trgm ON links USING gin (search_text %I.gin_trgm_ops)', trgm_schema);
END
$$;
