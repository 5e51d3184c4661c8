-- Upstream-authority resources: what users approved, the durable intents the worker
-- executes against the system of record, the shared circuit breaker and the shared
-- read cache.

-- What a user approved, kept apart from its execution: who, what, when, and the
-- fingerprint of the request that asked for it.
CREATE TABLE approvals (
    id             uuid        NOT NULL,
    reservation_id uuid        NOT NULL,
    principal      text        NOT NULL,
    action         text        NOT NULL,
    fingerprint    bytea       NOT NULL,
    created_at     timestamptz NOT NULL,
    CONSTRAINT approvals_pkey PRIMARY KEY (id),
    CONSTRAINT approvals_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES reservations (id),
    CONSTRAINT approvals_action_known CHECK (action IN ('confirm'))
);

CREATE TABLE intents (
    id             uuid        NOT NULL,
    reservation_id uuid        NOT NULL,
    upstream_ref   text        NOT NULL,
    state          text        NOT NULL,
    attempts       integer     NOT NULL DEFAULT 0,
    -- The lease of the worker (or reaper) executing it; fences late writers.
    lease_owner    uuid,
    locked_until   timestamptz,
    -- When a REQUESTED intent may be claimed (pushed back while the seat is busy or
    -- the breaker is open).
    not_before     timestamptz NOT NULL,
    charge_id      text,
    last_error     text,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    CONSTRAINT intents_pkey PRIMARY KEY (id),
    -- One intent per reservation: a second confirm finds it instead of writing twice.
    CONSTRAINT intents_reservation_key UNIQUE (reservation_id),
    CONSTRAINT intents_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES reservations (id),
    CONSTRAINT intents_state_known CHECK (state IN
        ('REQUESTED', 'RESERVING', 'SUCCEEDED', 'FAILED_RACE', 'FAILED_AUTH', 'FAILED_UPSTREAM')),
    CONSTRAINT intents_reserving_is_leased CHECK (
        state <> 'RESERVING' OR (lease_owner IS NOT NULL AND locked_until IS NOT NULL)),
    CONSTRAINT intents_succeeded_has_charge CHECK (state <> 'SUCCEEDED' OR charge_id IS NOT NULL)
);

-- At most one upstream write in flight per seat, across every worker instance: the
-- database refuses a second RESERVING intent for the same seat.
CREATE UNIQUE INDEX intents_one_write_per_seat ON intents (upstream_ref) WHERE state = 'RESERVING';
-- The reaper walks lapsed leases.
CREATE INDEX intents_reserving_lease_idx ON intents (locked_until) WHERE state = 'RESERVING';
CREATE INDEX intents_requested_idx ON intents (not_before) WHERE state = 'REQUESTED';

-- The circuit breaker, shared by every instance: one instance's failures protect all.
CREATE TABLE upstream_breakers (
    name                 text        NOT NULL,
    consecutive_failures integer     NOT NULL DEFAULT 0,
    open_until           timestamptz,
    -- While open past open_until, a single probe may go through.
    probe_owner          uuid,
    probe_until          timestamptz,
    updated_at           timestamptz NOT NULL,
    CONSTRAINT upstream_breakers_pkey PRIMARY KEY (name)
);

-- The upstream's view of a seat over a window, with a refresh lease for single flight.
CREATE TABLE upstream_views (
    upstream_ref     text        NOT NULL,
    window_start     timestamptz NOT NULL,
    window_end       timestamptz NOT NULL,
    taken            jsonb,
    fetched_at       timestamptz,
    refresh_owner    uuid,
    refreshing_until timestamptz,
    CONSTRAINT upstream_views_pkey PRIMARY KEY (upstream_ref, window_start, window_end)
);

-- The outbox feeds two queues now: events for consumers, intents for the worker.
ALTER TABLE outbox ADD COLUMN topic text NOT NULL DEFAULT 'events';
ALTER TABLE outbox ADD CONSTRAINT outbox_topic_known CHECK (topic IN ('events', 'intents'));
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_known;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_known CHECK (kind IN (
    'reservation.held', 'reservation.confirmed', 'reservation.released', 'reservation.expired',
    'reservation.cancelled', 'reservation.failed', 'waitlist.offered', 'waitlist.offer_expired',
    'intent.requested'));
DROP INDEX outbox_pending_idx;
CREATE INDEX outbox_pending_idx ON outbox (topic, next_attempt_at, seq) WHERE published_at IS NULL;
