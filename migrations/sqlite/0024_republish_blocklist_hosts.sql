-- The blocklist's KV record names the enabled domains' hosts since issue 28 (kv_model::BlocklistRecord::enabled_hosts),
-- which lets a new isolate's first visit to a dynamic link read two keys instead of three. A record published before
-- lacks them, and an edge reading it falls back to each host's domain record (a second round of reads on a first
-- visit) until the blocklist or a domain changes: the key is put in the outbox once, so the upgrade republishes it
-- without an operator's republish. The publisher reads the current record when it publishes.
INSERT INTO outbox (kv_key, created_at)
VALUES ('blocklist', CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));
