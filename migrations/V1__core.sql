-- Core schema: resources, reservations and idempotency records.
--
-- The database itself refuses a double-booking of a capacity-1 resource (the partial
-- exclusion constraint below), so that even a code path that forgot to take the
-- resource lock cannot overlap two active reservations. Capacity-N resources are
-- protected by the resource row lock plus the overlap-load check in reservations.rs.

CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE resources (
    id                uuid        NOT NULL,
    name              text        NOT NULL,
    capacity          integer     NOT NULL,
    authority         text        NOT NULL,
    upstream_ref      text,
    hold_ttl_seconds  integer     NOT NULL,
    offer_ttl_seconds integer     NOT NULL,
    created_by        text        NOT NULL,
    created_at        timestamptz NOT NULL,
    CONSTRAINT resources_pkey PRIMARY KEY (id),
    -- Target of the reservations' composite foreign key: it copies the capacity into
    -- each reservation, where the exclusion constraint's predicate can see it.
    CONSTRAINT resources_id_capacity_key UNIQUE (id, capacity),
    CONSTRAINT resources_name_length CHECK (char_length(name) BETWEEN 1 AND 200),
    CONSTRAINT resources_capacity_range CHECK (capacity BETWEEN 1 AND 100000),
    CONSTRAINT resources_authority_known CHECK (authority IN ('local', 'upstream')),
    CONSTRAINT resources_upstream_shape CHECK (
        authority = 'local' OR (upstream_ref IS NOT NULL AND capacity = 1)),
    CONSTRAINT resources_ttls_positive CHECK (hold_ttl_seconds >= 1 AND offer_ttl_seconds >= 1)
);

CREATE TABLE reservations (
    id                uuid        NOT NULL,
    resource_id       uuid        NOT NULL,
    resource_capacity integer     NOT NULL,
    owner             text        NOT NULL,
    starts_at         timestamptz NOT NULL,
    ends_at           timestamptz NOT NULL,
    period            tstzrange   GENERATED ALWAYS AS (tstzrange(starts_at, ends_at, '[)')) STORED,
    quantity          integer     NOT NULL,
    status            text        NOT NULL,
    expires_at        timestamptz,
    failure_reason    text,
    source            text        NOT NULL,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    CONSTRAINT reservations_pkey PRIMARY KEY (id),
    CONSTRAINT reservations_resource_fkey FOREIGN KEY (resource_id, resource_capacity)
        REFERENCES resources (id, capacity),
    CONSTRAINT reservations_period_ordered CHECK (starts_at < ends_at),
    CONSTRAINT reservations_quantity_fits CHECK (quantity >= 1 AND quantity <= resource_capacity),
    CONSTRAINT reservations_status_known CHECK (status IN
        ('HELD', 'CONFIRMING', 'CONFIRMED', 'RELEASED', 'EXPIRED', 'CANCELLED', 'FAILED')),
    CONSTRAINT reservations_held_expires CHECK (status <> 'HELD' OR expires_at IS NOT NULL),
    CONSTRAINT reservations_failure_reason CHECK (
        (status = 'FAILED') = (failure_reason IS NOT NULL)
        AND (failure_reason IS NULL OR failure_reason IN ('race', 'auth', 'upstream'))),
    CONSTRAINT reservations_source_known CHECK (source IN ('request', 'waitlist_offer')),
    -- The last line of defence for single-unit resources: two active reservations of
    -- one capacity-1 resource can never overlap, whatever the application does.
    CONSTRAINT reservations_single_unit_no_overlap EXCLUDE USING gist
        (resource_id WITH =, period WITH &&)
        WHERE (resource_capacity = 1 AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED'))
);

-- The overlap-load check and the availability read scan only active rows.
CREATE INDEX reservations_active_period_idx ON reservations USING gist (resource_id, period)
    WHERE status IN ('HELD', 'CONFIRMING', 'CONFIRMED');
-- The expiry sweep walks lapsed holds in expiry order.
CREATE INDEX reservations_held_expiry_idx ON reservations (expires_at) WHERE status = 'HELD';

CREATE TABLE idempotency_keys (
    principal        text        NOT NULL,
    method           text        NOT NULL,
    route            text        NOT NULL,
    key              text        NOT NULL,
    fingerprint      bytea       NOT NULL,
    state            text        NOT NULL,
    owner_token      uuid        NOT NULL,
    locked_until     timestamptz NOT NULL,
    response_status  smallint,
    response_headers jsonb,
    response_body    bytea,
    created_at       timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (principal, method, route, key),
    CONSTRAINT idempotency_keys_state_known CHECK (state IN ('processing', 'completed')),
    CONSTRAINT idempotency_keys_completed_has_response CHECK (
        state <> 'completed' OR (response_status IS NOT NULL AND response_body IS NOT NULL))
);

-- Retention purge walks keys by expiry.
CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at);
