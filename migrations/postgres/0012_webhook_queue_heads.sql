-- Webhooks: each (endpoint, ordering key) queue has at most one "head", the first of its pending deliveries; the
-- others wait (waiting = 1) until the head ends (succeeded or failed), which promotes the next in the same
-- transaction (store/src/webhooks/delivery.rs). The claim then reads only due heads, in time order, through
-- webhook_deliveries_due, instead of asking of every pending row whether an earlier one of its key is pending: that
-- read the whole backlog on every claim (BENCHMARKS.md, "Webhooks").
ALTER TABLE webhook_deliveries ADD COLUMN waiting BIGINT NOT NULL DEFAULT 0 CHECK (waiting IN (0, 1));

-- Pending rows behind an earlier pending row of their key wait.
UPDATE webhook_deliveries SET waiting = 1
WHERE state = 'pending' AND EXISTS (
    SELECT 1 FROM webhook_deliveries p
    WHERE p.endpoint_id = webhook_deliveries.endpoint_id AND p.ordering_key = webhook_deliveries.ordering_key
      AND p.state = 'pending' AND p.id < webhook_deliveries.id);

-- The due heads, oldest first.
DROP INDEX webhook_deliveries_due;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id) WHERE state = 'pending' AND waiting = 0;
-- "Has this key a head for this endpoint?" (new deliveries wait behind it).
CREATE INDEX webhook_deliveries_head ON webhook_deliveries (endpoint_id, ordering_key) WHERE state = 'pending' AND waiting = 0;
