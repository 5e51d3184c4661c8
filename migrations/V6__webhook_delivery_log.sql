-- Webhooks as Standard Webhooks 1.0 signs them, and the log of every delivery attempt.

-- The signing key is the bytes a `whsec_<base64>` secret decodes to (24 to 64 of them),
-- stored as bytes. The secrets given out before are `whsec_` and 64 hex digits, which
-- are also valid base64: they keep their text, so a receiver verifies with the secret it
-- already has (its key is now those 64 digits decoded as base64, 48 bytes). A secret of
-- any other form gets a new random key, which nobody knows: its endpoint must be
-- rotated.
ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_secret_long;
ALTER TABLE webhook_endpoints
    ALTER COLUMN secret TYPE bytea USING (
        CASE WHEN secret ~ '^whsec_[0-9a-f]{64}$' THEN decode(substr(secret, 7), 'base64')
             ELSE uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) END),
    ALTER COLUMN previous_secret TYPE bytea USING (
        CASE WHEN previous_secret ~ '^whsec_[0-9a-f]{64}$' THEN decode(substr(previous_secret, 7), 'base64')
             WHEN previous_secret IS NOT NULL THEN uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) END);
ALTER TABLE webhook_endpoints
    ADD CONSTRAINT webhook_endpoints_secret_length CHECK (octet_length(secret) BETWEEN 24 AND 64),
    ADD CONSTRAINT webhook_endpoints_previous_secret_length
        CHECK (previous_secret IS NULL OR octet_length(previous_secret) BETWEEN 24 AND 64);

-- An endpoint that answers 410 Gone, or has failed every attempt for five days
-- (`failing_since`: its first failure since its last success), is disabled: nothing is
-- sent to it until an admin recovers it.
ALTER TABLE webhook_endpoints
    ADD COLUMN failing_since timestamptz,
    ADD COLUMN disabled_at timestamptz,
    ADD COLUMN disabled_reason text,
    ADD CONSTRAINT webhook_endpoints_disabled_with_reason
        CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL) AND disabled_reason IN ('gone', 'failing'));

-- The events as the notifier got them, so that a retry or a recovery sends the very
-- same bytes (and the same `webhook-id`) long after the queue has dropped the message.
CREATE TABLE webhook_events (
    id          uuid        NOT NULL,
    type        text        NOT NULL,
    body        text        NOT NULL,
    received_at timestamptz NOT NULL,
    CONSTRAINT webhook_events_pkey PRIMARY KEY (id)
);

-- The retention purge, oldest first.
CREATE INDEX webhook_events_received_idx ON webhook_events (received_at);

-- Every attempt to deliver an event to an endpoint: the answer's status, or why there
-- was none (a timeout, a transport error, the endpoint disabled), and when the queue
-- will try again, if it will.
CREATE TABLE webhook_delivery_attempts (
    id              uuid        NOT NULL,
    endpoint_id     uuid        NOT NULL,
    event_id        uuid        NOT NULL,
    -- 1 for the first attempt of this event at this endpoint, and on.
    attempt         integer     NOT NULL,
    -- `queue`: the notifier's own tries; `retry` and `recover`: an admin's resend.
    trigger         text        NOT NULL,
    attempted_at    timestamptz NOT NULL,
    status_code     integer,
    error           text,
    duration_ms     integer     NOT NULL,
    next_attempt_at timestamptz,
    CONSTRAINT webhook_delivery_attempts_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_delivery_attempts_endpoint_fkey FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id),
    CONSTRAINT webhook_delivery_attempts_event_fkey FOREIGN KEY (event_id) REFERENCES webhook_events (id),
    CONSTRAINT webhook_delivery_attempts_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT webhook_delivery_attempts_trigger_known CHECK (trigger IN ('queue', 'retry', 'recover')),
    CONSTRAINT webhook_delivery_attempts_status_http CHECK (status_code BETWEEN 100 AND 599),
    CONSTRAINT webhook_delivery_attempts_outcome CHECK (status_code IS NOT NULL OR error IS NOT NULL),
    CONSTRAINT webhook_delivery_attempts_duration CHECK (duration_ms >= 0)
);

-- An endpoint's log, newest first (the keyset of its list).
CREATE INDEX webhook_delivery_attempts_endpoint_idx ON webhook_delivery_attempts (endpoint_id, attempted_at, id);
-- An event's attempts (the next attempt's number, the recovery's "never accepted"),
-- and the events' foreign key when the purge deletes them.
CREATE INDEX webhook_delivery_attempts_event_idx ON webhook_delivery_attempts (event_id, endpoint_id);
-- The retention purge, oldest first.
CREATE INDEX webhook_delivery_attempts_attempted_idx ON webhook_delivery_attempts (attempted_at);

-- Resends an admin asked for, which the sweeper sends (the HTTP API's functions make
-- no outbound calls). One per event and endpoint: asking again while one waits adds
-- nothing.
CREATE TABLE webhook_resends (
    endpoint_id  uuid        NOT NULL,
    event_id     uuid        NOT NULL,
    trigger      text        NOT NULL,
    requested_by text        NOT NULL,
    requested_at timestamptz NOT NULL,
    CONSTRAINT webhook_resends_pkey PRIMARY KEY (endpoint_id, event_id),
    CONSTRAINT webhook_resends_endpoint_fkey FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id),
    CONSTRAINT webhook_resends_event_fkey FOREIGN KEY (event_id) REFERENCES webhook_events (id) ON DELETE CASCADE,
    CONSTRAINT webhook_resends_trigger_known CHECK (trigger IN ('retry', 'recover'))
);

-- The sweeper's claim, oldest request first.
CREATE INDEX webhook_resends_requested_idx ON webhook_resends (requested_at);
-- The events' foreign key, checked when the purge deletes an event.
CREATE INDEX webhook_resends_event_idx ON webhook_resends (event_id);

ALTER DOMAIN outbox_kind DROP CONSTRAINT outbox_kind_known;
ALTER DOMAIN outbox_kind ADD CONSTRAINT outbox_kind_known CHECK (VALUE = ANY ('{reservation.held,reservation.confirmed,reservation.released,reservation.expired,reservation.cancelled,reservation.failed,reservation.rescheduled,reservation.updated,reservation.extended,waitlist.offered,waitlist.offer_expired,waitlist.cancelled,webhook.endpoint_disabled,intent.requested}'::text[]));
