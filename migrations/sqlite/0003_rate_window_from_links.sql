-- The create-link limit counts the key's own links in the window: a creation then needs no
-- separate event row, one statement less on the write path. Links created before this
-- migration have no key and are not counted (the window is an hour; nothing is lost).
ALTER TABLE links ADD COLUMN created_by_key TEXT;
CREATE INDEX links_key_created ON links (created_by_key, created_at);
DROP TABLE link_creations;
