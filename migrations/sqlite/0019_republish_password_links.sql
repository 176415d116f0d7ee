-- Links with a password were published paused until the worker could ask for passwords (issue 25): the worker now
-- shows their form, and the origin publishes them active with their hash. Every such link is put in the outbox
-- once, so the upgrade reopens them (behind their form) without an operator's republish. The publisher reads each
-- key's current record, so a link deleted since becomes a KV delete, as any outbox row would.
INSERT INTO outbox (kv_key, created_at)
SELECT 'link:' || lower(d.host) || ':' || lower(l.short_code), CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
FROM links l
JOIN domains d ON d.id = l.domain_id
WHERE l.password_hash IS NOT NULL;
