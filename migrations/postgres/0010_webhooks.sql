-- Webhooks (issue 27): an account's endpoints, the events its changes emit (written in the change's own
-- transaction: the outbox of the webhooks), one delivery per (endpoint, event) with its retry state and lease, and
-- the log of every attempt (kept 30 days, pruned by the hourly maintenance). Store code: store/src/webhooks/.

-- An account's receivers, at most 20 per account (counted under a lock, store/src/webhooks/endpoints.rs).
CREATE TABLE webhook_endpoints (
    id              TEXT   PRIMARY KEY,
    account_id      TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    url             TEXT   NOT NULL,
    description     TEXT,
    -- The event types it is subscribed to: a JSON array of names, e.g. ["link.created","link.clicked"].
    events          TEXT   NOT NULL,
    enabled         BIGINT NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    -- The signing secret (`whsec_<base64>`), stored as it is given to the account: every delivery is signed with
    -- it, so it must be readable, as a group's key is. Never logged, never in a list, never in the activity log.
    secret          TEXT   NOT NULL,
    created_at      BIGINT NOT NULL,
    -- When the current unbroken run of failed deliveries began; NULL after a success. Five days of it disables
    -- the endpoint.
    failing_since   BIGINT,
    -- Why it is disabled (NULL while enabled).
    disabled_reason TEXT
);
CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id, created_at);

-- One change, as sent: `payload` is the exact body, {"type","timestamp","data"}. `id` is the Standard Webhooks
-- message id (`webhook-id`), the same for every endpoint and every attempt. `ordering_key` is the link's or the
-- group's id: deliveries of one key reach an endpoint in the order of their rows.
CREATE TABLE webhook_events (
    id           TEXT   PRIMARY KEY,
    account_id   TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    type         TEXT   NOT NULL,
    ordering_key TEXT   NOT NULL,
    payload      TEXT   NOT NULL,
    created_at   BIGINT NOT NULL
);
CREATE INDEX webhook_events_created ON webhook_events (created_at);

-- One event for one endpoint. state: 'pending' (to send, or waiting for its next retry), 'succeeded' or 'failed'
-- (dropped after the last retry, or when the endpoint was disabled; last_error says why). A worker claims a due
-- row by setting claimed_by and claimed_until (a lease: a crashed worker's rows are taken again once it ends).
-- The id increases with every row: the order of one ordering key's deliveries to one endpoint.
CREATE TABLE webhook_deliveries (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id     TEXT   NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id        TEXT   NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    ordering_key    TEXT   NOT NULL,
    state           TEXT   NOT NULL CHECK (state IN ('pending', 'succeeded', 'failed')),
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    claimed_by      TEXT,
    claimed_until   BIGINT,
    last_error      TEXT,
    created_at      BIGINT NOT NULL,
    UNIQUE (endpoint_id, event_id)
);
-- The due rows, oldest first.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id) WHERE state = 'pending';
-- "Is an earlier delivery of this key to this endpoint still pending?"
CREATE INDEX webhook_deliveries_order ON webhook_deliveries (endpoint_id, ordering_key, id) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (created_at) WHERE state <> 'pending';

-- Every attempt, newest first per endpoint (GET webhooks/{id}/deliveries). Kept 30 days.
CREATE TABLE webhook_attempts (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id TEXT   NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id    TEXT   NOT NULL,
    event_type  TEXT   NOT NULL,
    attempt     BIGINT NOT NULL,
    at          BIGINT NOT NULL,
    status_code BIGINT,
    duration_ms BIGINT NOT NULL,
    error       TEXT
);
CREATE INDEX webhook_attempts_endpoint_at ON webhook_attempts (endpoint_id, at DESC, id DESC);
CREATE INDEX webhook_attempts_at ON webhook_attempts (at);
