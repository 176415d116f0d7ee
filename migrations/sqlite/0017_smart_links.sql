-- Smart links (issue 25): per-visitor rules, app links, a password, where expired links go, a click limit, the
-- redirect's status and a preview card. Every column is NULL (or 302) for existing links, which therefore change
-- nothing, at the edge either (their KV records keep their bytes).

-- The rules as JSON, in the form the edge reads (link-rules: instants in UNIX milliseconds); NULL: none.
ALTER TABLE links ADD COLUMN rules TEXT;
-- Destinations for iOS and Android visitors (compiled into leading `os` rules at the edge).
ALTER TABLE links ADD COLUMN ios_url TEXT;
ALTER TABLE links ADD COLUMN android_url TEXT;
-- `pbkdf2-sha256$<iterations>$<salt>$<hash>`; never the password. NULL: no password.
ALTER TABLE links ADD COLUMN password_hash TEXT;
-- Where visitors go once the link has expired (its expiry passed or its click limit was reached).
ALTER TABLE links ADD COLUMN expired_url TEXT;
-- After this many counted clicks (links.clicks) the link behaves as expired; NULL: no limit.
ALTER TABLE links ADD COLUMN max_clicks BIGINT CHECK (max_clicks > 0);
ALTER TABLE links ADD COLUMN redirect_status BIGINT NOT NULL DEFAULT 302 CHECK (redirect_status IN (301, 302, 307, 308));
-- The preview card link-preview crawlers get.
ALTER TABLE links ADD COLUMN og_title TEXT;
ALTER TABLE links ADD COLUMN og_description TEXT;
ALTER TABLE links ADD COLUMN og_image TEXT;
