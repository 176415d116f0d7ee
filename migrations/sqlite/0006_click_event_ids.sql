-- Click events counted once by their own id: the worker's queue consumer gives each event its Queues message id,
-- and Queues may deliver a message again in another grouping (so another report, with another batch id). An event
-- whose id is here is not counted again. Pruned after 7 days, with the batch ids.
CREATE TABLE click_event_ids (
    id          TEXT   NOT NULL PRIMARY KEY,
    received_at BIGINT NOT NULL
);
CREATE INDEX click_event_ids_received ON click_event_ids (received_at);
