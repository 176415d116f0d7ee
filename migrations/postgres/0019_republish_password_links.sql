-- Links with a password were published paused until the worker could ask for passwords (issue 25): the worker now
-- shows their form, and the origin publishes them active with their hash. Every such link is put in the outbox
-- once, so the upgrade reopens them (behind their form) without an operator's republish. The publisher reads each
-- key's current record, so a link deleted since becomes a KV delete, as any outbox row would.
INSERT INTO outbox (kv_key, created_at)
SELECT 'link:' || lower(d.host) || ':' || lower(l.short_code), CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)
FROM links l
JOIN domains d ON d.id = l.domain_id
WHERE l.password_hash IS NOT NULL;
