-- The relay claims events with a lease, in a statement of its own, and publishes them
-- with no transaction open (behind a transaction-mode pooler, a transaction held open
-- across a call to SQS would hold a server connection for as long). The lease is a
-- column of its own, in no index, so that a claim is a HOT update: the row's new
-- version stays on its page, and no index takes a new entry. The fill factor leaves
-- room on each page for those versions.
ALTER TABLE outbox ADD COLUMN claimed_until timestamptz;
ALTER TABLE outbox SET (fillfactor = 85);

-- A claim reads the oldest unpublished events in order of writing and stops after its
-- window: an index in that order, so that a claim's cost does not grow with a backlog.
-- Whether an event is due is read from its row.
DROP INDEX outbox_pending_idx;
CREATE INDEX outbox_unpublished_idx ON outbox (topic, seq) WHERE published_at IS NULL;

-- Every published event leaves dead entries at the front of that index, where every
-- claim starts; scans mark them dead only once no transaction can see them, and vacuum
-- removes them. A queue table's vacuum goes by a fixed number of dead rows, not by a
-- fraction of a table that keeps its published rows for hours.
ALTER TABLE outbox SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
                        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000);

COMMENT ON COLUMN outbox.claimed_until IS
    'The lease of the relay that claimed the event: no other relay takes it, or its subject''s later events, before then.';
COMMENT ON COLUMN outbox.next_attempt_at IS
    'When the event is due: when it was written, or after a failed attempt, when its backoff ends.';
