-- Webhooks: a change writes its event and one row here naming the endpoints subscribed at that moment; the
-- delivery loop fans it out into deliveries (one per endpoint still enabled) and deletes the row, off the request
-- path. Writing twenty deliveries and locking their queue heads inside create-link cost it 1.6x with 20 endpoints
-- (BENCHMARKS.md, "Webhooks"); one row per event costs what an account without endpoints pays, plus one insert.
-- `seq` is the order the loop takes them in (the order of one key's deliveries). No index on event_id: the rows
-- live for moments, and an event is pruned 30 days after it was written.
CREATE TABLE webhook_fanout (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id  TEXT   NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    -- The endpoints subscribed when the change committed: a JSON array of ids.
    endpoints TEXT   NOT NULL
);
