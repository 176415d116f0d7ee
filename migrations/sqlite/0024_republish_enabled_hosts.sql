-- The blocklist's record names the enabled platform domains' hosts, and a group's record its account's enabled custom
-- domains' hosts (issue 28): a dynamic link's first visit on a new edge isolate is then served without reading the
-- domain's record. The blocklist and the groups of every account with an enabled custom domain are put in the outbox
-- once, so the upgrade publishes those names without an operator's republish (a group of an account without one,
-- whose record is the same as before, is left alone). The publisher reads each key's current record.
INSERT INTO outbox (kv_key, created_at)
SELECT 'blocklist', CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
WHERE EXISTS (SELECT 1 FROM domains WHERE is_platform = 1 AND enabled = 1);
INSERT INTO outbox (kv_key, created_at)
SELECT 'group:' || g.id, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
FROM groups g
WHERE EXISTS (SELECT 1 FROM domains d WHERE d.account_id = g.account_id AND d.enabled = 1);
