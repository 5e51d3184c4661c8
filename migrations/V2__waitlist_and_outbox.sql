-- The waitlist (FIFO per resource, by sequence) and the transactional outbox.

CREATE TABLE waitlist_entries (
    id             uuid        NOT NULL,
    resource_id    uuid        NOT NULL,
    owner          text        NOT NULL,
    starts_at      timestamptz NOT NULL,
    ends_at        timestamptz NOT NULL,
    period         tstzrange   GENERATED ALWAYS AS (tstzrange(starts_at, ends_at, '[)')) STORED,
    quantity       integer     NOT NULL,
    status         text        NOT NULL,
    -- FIFO order: a sequence, not a timestamp, so that two joins in one microsecond
    -- (or across clocks) still have a strict order.
    seq            bigint      GENERATED ALWAYS AS IDENTITY,
    reservation_id uuid,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    CONSTRAINT waitlist_entries_pkey PRIMARY KEY (id),
    CONSTRAINT waitlist_entries_resource_fkey FOREIGN KEY (resource_id) REFERENCES resources (id),
    CONSTRAINT waitlist_entries_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES reservations (id),
    CONSTRAINT waitlist_entries_period_ordered CHECK (starts_at < ends_at),
    CONSTRAINT waitlist_entries_quantity_positive CHECK (quantity >= 1),
    CONSTRAINT waitlist_entries_status_known CHECK (status IN ('WAITING', 'OFFERED', 'ACCEPTED', 'EXPIRED', 'CANCELLED')),
    -- An offer always names its reservation; a waiting entry never has one.
    CONSTRAINT waitlist_entries_offer_has_reservation CHECK (
        (status IN ('OFFERED', 'ACCEPTED') AND reservation_id IS NOT NULL)
        OR (status = 'WAITING' AND reservation_id IS NULL)
        OR status IN ('EXPIRED', 'CANCELLED'))
);

-- Hand-over walks a resource's waiting entries in FIFO order.
CREATE INDEX waitlist_entries_waiting_idx ON waitlist_entries (resource_id, seq) WHERE status = 'WAITING';
-- One entry per offer reservation; settling an offer finds its entry by reservation.
CREATE UNIQUE INDEX waitlist_entries_reservation_key ON waitlist_entries (reservation_id)
    WHERE reservation_id IS NOT NULL;
-- The sweep expires waiting entries whose range has passed.
CREATE INDEX waitlist_entries_waiting_end_idx ON waitlist_entries (ends_at) WHERE status = 'WAITING';

CREATE TABLE outbox (
    -- The event's stable id: consumers drop duplicates by it, and it is the SQS
    -- deduplication id on FIFO queues.
    id              uuid        NOT NULL DEFAULT gen_random_uuid(),
    seq             bigint      GENERATED ALWAYS AS IDENTITY,
    kind            text        NOT NULL,
    subject_id      uuid        NOT NULL,
    payload         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL,
    published_at    timestamptz,
    attempts        integer     NOT NULL DEFAULT 0,
    -- When the relay may (re)try: a claim pushes it forward (a lease), a failure
    -- pushes it by the backoff.
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    CONSTRAINT outbox_pkey PRIMARY KEY (id),
    CONSTRAINT outbox_kind_known CHECK (kind IN (
        'reservation.held', 'reservation.confirmed', 'reservation.released', 'reservation.expired',
        'reservation.cancelled', 'reservation.failed', 'waitlist.offered', 'waitlist.offer_expired'))
);

CREATE INDEX outbox_pending_idx ON outbox (next_attempt_at, seq) WHERE published_at IS NULL;
-- Retention purge of published events.
CREATE INDEX outbox_published_idx ON outbox (published_at) WHERE published_at IS NOT NULL;
