-- The schema: tables, types, domains, indexes and constraints.
--
-- Functions and triggers are not here: each has one file under sql/functions, which
-- the migration step (shared::db::migrate) applies after the migrations, every time
-- it runs. Two functions are named at creation by what this file makes (a column
-- default and a table check), so they are declared here as stubs that refuse to run;
-- the migration step replaces them with their definitions in the same run. See
-- sql/README.md.
--
-- The database itself refuses a double-booking of a capacity-1 resource (the
-- exclusion constraint on reservations), so that even a code path that forgot the
-- resource lock cannot overlap two active reservations. Capacity-N resources are
-- protected by the resource row lock and the load check under it.

CREATE EXTENSION IF NOT EXISTS btree_gist;

-- Lists of known values as domains rather than table checks: PostgreSQL reads a
-- domain's checks once per backend, into its type cache, where a table's checks are
-- read back from their stored node trees and planned again for every statement that
-- writes a row. A list is one array constant (`'{a,b}'::text[]`), not an `ARRAY[...]`
-- of one node per element. The constraint names are the ones a violation reports.
CREATE DOMAIN reservation_status AS text
    CONSTRAINT reservations_status_known
    CHECK (VALUE = ANY ('{HELD,CONFIRMING,CONFIRMED,RELEASED,EXPIRED,CANCELLED,FAILED}'::text[]));
CREATE DOMAIN reservation_source AS text
    CONSTRAINT reservations_source_known CHECK (VALUE = ANY ('{request,waitlist_offer}'::text[]));
CREATE DOMAIN reservation_failure_reason AS text
    CONSTRAINT reservations_failure_reason_known CHECK (VALUE = ANY ('{race,auth,upstream}'::text[]));
CREATE DOMAIN reservation_metadata AS jsonb
    CONSTRAINT reservations_metadata_object CHECK (jsonb_typeof(VALUE) = 'object');
CREATE DOMAIN outbox_kind AS text CONSTRAINT outbox_kind_known CHECK (VALUE = ANY ('{reservation.held,reservation.confirmed,reservation.released,reservation.expired,reservation.cancelled,reservation.failed,reservation.rescheduled,reservation.updated,waitlist.offered,waitlist.offer_expired,waitlist.cancelled,intent.requested}'::text[]));
CREATE DOMAIN outbox_topic AS text CONSTRAINT outbox_topic_known CHECK (VALUE = ANY ('{events,intents}'::text[]));
CREATE DOMAIN idempotency_state AS text
    CONSTRAINT idempotency_keys_state_known CHECK (VALUE = ANY ('{processing,completed}'::text[]));

-- The hold's one row (`reservation_hold`), as a type of its own: a function that
-- returns a named row type gets its descriptor from the type cache, where one that
-- `RETURNS TABLE` builds it from its declaration on every call.
CREATE TYPE reservation_hold_result AS (
    outcome text, capacity integer, id uuid, resource_id uuid, owner text,
    starts_at timestamptz, ends_at timestamptz, quantity integer, status text, expires_at timestamptz,
    failure_reason text, source text, created_at timestamptz, updated_at timestamptz, metadata jsonb,
    acted_by text, rules_version bigint
);

-- Declared for the outbox's default; defined in sql/functions/uuidv7.sql.
CREATE FUNCTION uuidv7() RETURNS uuid LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'uuidv7() is defined by sql/functions/uuidv7.sql, which the migration step applies';
END
$$;

CREATE TABLE resources (
    id                    uuid        NOT NULL,
    name                  text        NOT NULL,
    capacity              integer     NOT NULL,
    authority             text        NOT NULL,
    upstream_ref          text,
    hold_ttl_seconds      integer     NOT NULL,
    offer_ttl_seconds     integer     NOT NULL,
    created_by            text        NOT NULL,
    created_at            timestamptz NOT NULL,
    -- An archived resource takes no new holds, joins or reschedules; what it has
    -- stays, and can still be cancelled.
    archived_at           timestamptz,
    -- An object of string values, checked in the application (sizes) and here (shape).
    metadata              jsonb       NOT NULL DEFAULT '{}',
    updated_at            timestamptz NOT NULL,
    -- The calendar rules, judged by the application (shared/src/domain/calendar/)
    -- under the resource lock, or before a hold's statement and proved unchanged
    -- under the lock by rules_version; here only their shapes and ranges. time_zone
    -- is an IANA name, checked against the tz database the service compiles in
    -- (PostgreSQL's own copy may differ in version, so it is not asked). schedule:
    -- NULL is always open, else {"weekly": {...}, "exceptions": [...]}.
    time_zone             text        NOT NULL DEFAULT 'UTC',
    schedule              jsonb,
    buffer_before_minutes integer     NOT NULL DEFAULT 0,
    buffer_after_minutes  integer     NOT NULL DEFAULT 0,
    min_notice_minutes    integer     NOT NULL DEFAULT 0,
    max_advance_days      integer,
    slot_minutes          integer,
    -- Bumped by every change of the rules above (the trigger resources_rules_version):
    -- a hold judged by rules read earlier proves them unchanged by this number under
    -- the resource's lock.
    rules_version         bigint      NOT NULL DEFAULT 0,
    -- Whether any rule constrains a booking (the time zone alone does not).
    has_calendar_rules    boolean     GENERATED ALWAYS AS (
        schedule IS NOT NULL OR buffer_before_minutes > 0 OR buffer_after_minutes > 0 OR min_notice_minutes > 0
        OR max_advance_days IS NOT NULL OR slot_minutes IS NOT NULL) STORED,
    CONSTRAINT resources_pkey PRIMARY KEY (id),
    -- Target of the reservations' composite foreign key: it copies the capacity into
    -- each reservation, where the exclusion constraint's predicate can see it.
    CONSTRAINT resources_id_capacity_key UNIQUE (id, capacity),
    CONSTRAINT resources_name_length CHECK (char_length(name) BETWEEN 1 AND 200),
    CONSTRAINT resources_capacity_range CHECK (capacity BETWEEN 1 AND 100000),
    CONSTRAINT resources_authority_known CHECK (authority IN ('local', 'upstream')),
    CONSTRAINT resources_upstream_shape CHECK (
        authority = 'local' OR (upstream_ref IS NOT NULL AND capacity = 1)),
    CONSTRAINT resources_ttls_positive CHECK (hold_ttl_seconds >= 1 AND offer_ttl_seconds >= 1),
    CONSTRAINT resources_metadata_object CHECK (jsonb_typeof(metadata) = 'object'),
    CONSTRAINT resources_time_zone_length CHECK (char_length(time_zone) BETWEEN 1 AND 64),
    CONSTRAINT resources_schedule_shape CHECK (
        schedule IS NULL OR (jsonb_typeof(schedule) = 'object'
                             AND jsonb_typeof(schedule -> 'weekly') = 'object'
                             AND jsonb_typeof(schedule -> 'exceptions') = 'array')),
    CONSTRAINT resources_buffers_range CHECK (
        buffer_before_minutes BETWEEN 0 AND 1440 AND buffer_after_minutes BETWEEN 0 AND 1440),
    CONSTRAINT resources_min_notice_range CHECK (min_notice_minutes BETWEEN 0 AND 525600),
    CONSTRAINT resources_max_advance_range CHECK (max_advance_days IS NULL OR max_advance_days BETWEEN 1 AND 3660),
    CONSTRAINT resources_slot_minutes_range CHECK (slot_minutes IS NULL OR slot_minutes BETWEEN 1 AND 1440)
);

-- The lists, newest first, paged by a keyset on (created_at, id): `(created_at, id) <
-- (cursor)` is an index condition, so a page deep in a list costs what the first page
-- costs. The indexes are ascending; PostgreSQL walks them backwards for newest first.
CREATE INDEX resources_created_idx ON resources (created_at, id);

CREATE TABLE reservations (
    id                uuid                       NOT NULL,
    resource_id       uuid                       NOT NULL,
    -- The resource's capacity, copied in by the composite foreign key, which cascades
    -- a new capacity into every row still attached: the exclusion constraint keys on
    -- the capacity the resource has now, so crossing between 1 and N keeps the
    -- guarantee exact. A row detaches (NULL, which a MATCH SIMPLE foreign key and the
    -- checks ignore) when it no longer claims anything ahead: a capacity change
    -- detaches ended and inactive rows before it cascades, because the past may hold
    -- loads the new capacity could not have allowed.
    resource_capacity integer,
    owner             text                       NOT NULL,
    starts_at         timestamptz                NOT NULL,
    ends_at           timestamptz                NOT NULL,
    period            tstzrange                  GENERATED ALWAYS AS (tstzrange(starts_at, ends_at, '[)')) STORED,
    quantity          integer                    NOT NULL,
    status            reservation_status         NOT NULL,
    expires_at        timestamptz,
    failure_reason    reservation_failure_reason,
    source            reservation_source         NOT NULL,
    created_at        timestamptz                NOT NULL,
    updated_at        timestamptz                NOT NULL,
    metadata          reservation_metadata       NOT NULL DEFAULT '{}',
    -- The principal whose request made the row's latest change; NULL when the service
    -- itself made it (an expiry, a waitlist offer, the worker).
    acted_by          text,
    -- The kept range: the period widened by the resource's buffers as they were when
    -- the row was written or last moved (a writer that knows them passes it, the
    -- trigger reservations_set_buffered computes it otherwise). Later changes of the
    -- buffers leave it as it is.
    buffered          tstzrange                  NOT NULL,
    CONSTRAINT reservations_pkey PRIMARY KEY (id),
    CONSTRAINT reservations_resource_fkey FOREIGN KEY (resource_id, resource_capacity)
        REFERENCES resources (id, capacity) ON UPDATE CASCADE,
    -- The last line of defence for single-unit resources: the kept ranges of two
    -- active reservations of one capacity-1 resource never meet, whatever the
    -- application does. A kept range holds its period (reservation_row_valid), so
    -- the periods never overlap either.
    CONSTRAINT reservations_single_unit_buffers_apart EXCLUDE USING gist
        (resource_id WITH =, buffered WITH &&)
        WHERE (resource_capacity = 1 AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED'))
);

-- Declared for the row check below; defined in sql/functions/reservation_row_valid.sql.
CREATE FUNCTION reservation_row_valid(r reservations) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'reservation_row_valid() is defined by sql/functions/reservation_row_valid.sql, '
        'which the migration step applies';
END
$$;

-- The row's rules that compare its columns, as one check over the whole row: a
-- PL/pgSQL function is compiled once per backend, where separate table checks are read
-- back and planned again for every statement that writes a row. The function raises
-- check_violation under each rule's own name, so this check itself never fails.
ALTER TABLE reservations ADD CONSTRAINT reservations_row_valid CHECK (reservation_row_valid(reservations));

-- The load check and the availability read scan only active rows.
CREATE INDEX reservations_active_period_idx ON reservations USING gist (resource_id, period)
    WHERE status IN ('HELD', 'CONFIRMING', 'CONFIRMED');
-- The expiry sweep walks lapsed holds in expiry order.
CREATE INDEX reservations_held_expiry_idx ON reservations (expires_at) WHERE status = 'HELD';
-- The caller's own list, and an admin's list of one owner.
CREATE INDEX reservations_owner_created_idx ON reservations (owner, created_at, id);
-- An admin's list of one resource (without an owner). The foreign key's check and
-- cascade look reservations up by resource with it too.
CREATE INDEX reservations_resource_created_idx ON reservations (resource_id, created_at, id);
-- An admin's list of everyone's.
CREATE INDEX reservations_created_idx ON reservations (created_at, id);

CREATE TABLE idempotency_keys (
    principal            text              NOT NULL,
    method               text              NOT NULL,
    route                text              NOT NULL,
    key                  text              NOT NULL,
    fingerprint          bytea             NOT NULL,
    -- `processing` only inside the transaction that claimed the key, which stores the
    -- answer before it commits: every committed row is `completed`.
    state                idempotency_state NOT NULL,
    response_status      smallint,
    response_headers     jsonb,
    response_body        bytea,
    created_at           timestamptz       NOT NULL,
    expires_at           timestamptz       NOT NULL,
    -- A keyed hold's answer: the reservation as the hold returned it, from which a
    -- replay renders the same bytes with the same code as the first answer.
    response_reservation jsonb,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (principal, method, route, key),
    CONSTRAINT idempotency_keys_completed_has_response CHECK (
        state <> 'completed'
        OR (response_status IS NOT NULL AND (response_body IS NOT NULL OR response_reservation IS NOT NULL)))
);

-- Retention purge walks keys by expiry.
CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at);

-- The waitlist: FIFO per resource, by sequence.
CREATE TABLE waitlist_entries (
    id                 uuid        NOT NULL,
    resource_id        uuid        NOT NULL,
    owner              text        NOT NULL,
    starts_at          timestamptz NOT NULL,
    ends_at            timestamptz NOT NULL,
    period             tstzrange   GENERATED ALWAYS AS (tstzrange(starts_at, ends_at, '[)')) STORED,
    quantity           integer     NOT NULL,
    status             text        NOT NULL,
    -- FIFO order: a sequence, not a timestamp, so that two joins in one microsecond
    -- (or across clocks) still have a strict order.
    seq                bigint      GENERATED ALWAYS AS IDENTITY,
    reservation_id     uuid,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    -- Wait for an upstream seat and book it when it frees (a wait intent).
    auto_book          boolean     NOT NULL DEFAULT false,
    -- The waiter left while a write of theirs was in flight: the write settles first,
    -- then the wait ends (and a booking it won is cancelled through a cancel intent).
    leave_requested_at timestamptz,
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
-- A resource's whole queue (every status) in FIFO order, paged by sequence.
CREATE INDEX waitlist_entries_resource_seq_idx ON waitlist_entries (resource_id, seq);
-- One place in the queue per principal and range: joining again for the same
-- resource, start and end while an entry still waits or is offered answers that entry
-- (see booking::join_waitlist), and two concurrent joins cannot both insert.
CREATE UNIQUE INDEX waitlist_entries_one_per_range_key
    ON waitlist_entries (resource_id, owner, starts_at, ends_at)
    WHERE status IN ('WAITING', 'OFFERED');
-- `GET /v1/waitlist`: a principal's own entries, newest first, by keyset on
-- (created_at, id) within the owner's rows.
CREATE INDEX waitlist_entries_owner_created_idx ON waitlist_entries (owner, created_at DESC, id DESC);

-- The transactional outbox. It feeds two queues: events for consumers, intents for
-- the worker.
CREATE TABLE outbox (
    -- The event's stable id: consumers drop duplicates by it, and it is the SQS
    -- deduplication id on FIFO queues. Time-ordered (UUIDv7), so each insert lands on
    -- the right edge of the primary key index.
    id              uuid        NOT NULL DEFAULT uuidv7(),
    seq             bigint      GENERATED ALWAYS AS IDENTITY,
    kind            outbox_kind NOT NULL,
    subject_id      uuid        NOT NULL,
    payload         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL,
    published_at    timestamptz,
    attempts        integer     NOT NULL DEFAULT 0,
    -- When the relay may (re)try: a claim pushes it forward (a lease), a failure
    -- pushes it by the backoff.
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    topic           outbox_topic NOT NULL DEFAULT 'events',
    CONSTRAINT outbox_pkey PRIMARY KEY (id)
);

CREATE INDEX outbox_pending_idx ON outbox (topic, next_attempt_at, seq) WHERE published_at IS NULL;
-- Retention purge of published events.
CREATE INDEX outbox_published_idx ON outbox (published_at) WHERE published_at IS NOT NULL;

-- A subject's events leave the outbox in the order they were written, even when the
-- queue refuses one of them (the events queue is FIFO, grouped by subject). A refused
-- event stalls its subject: a row here names the event (`head_seq`), and the claim
-- takes none of the subject's later events while it stands; it goes when that event
-- is published. The hot path pays nothing: the table holds only the subjects with a
-- refused event, and the claim probes it by primary key.
CREATE TABLE outbox_stalled_subjects (
    topic      text   NOT NULL,
    subject_id uuid   NOT NULL,
    head_seq   bigint NOT NULL,
    CONSTRAINT outbox_stalled_subjects_pkey PRIMARY KEY (topic, subject_id)
);

-- What a user approved, kept apart from its execution: who, what, when, and the
-- fingerprint of the request that asked for it. A confirm's approval names its
-- reservation, a wait's its waitlist entry.
CREATE TABLE approvals (
    id                uuid        NOT NULL,
    reservation_id    uuid,
    principal         text        NOT NULL,
    action            text        NOT NULL,
    fingerprint       bytea       NOT NULL,
    created_at        timestamptz NOT NULL,
    waitlist_entry_id uuid,
    CONSTRAINT approvals_pkey PRIMARY KEY (id),
    CONSTRAINT approvals_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES reservations (id),
    CONSTRAINT approvals_waitlist_entry_fkey FOREIGN KEY (waitlist_entry_id) REFERENCES waitlist_entries (id),
    CONSTRAINT approvals_action_known CHECK (action IN ('confirm', 'wait_for_seat')),
    CONSTRAINT approvals_names_its_subject CHECK (
        (action = 'confirm' AND reservation_id IS NOT NULL)
        OR (action = 'wait_for_seat' AND waitlist_entry_id IS NOT NULL))
);

-- The durable intents the worker executes against the system of record of an
-- upstream resource: a reserve (POST), a cancel (DELETE of the charge, idempotent, so
-- an unknown outcome is retried) and a wait for a seat.
CREATE TABLE intents (
    id                uuid        NOT NULL,
    -- A wait's reservation is each attempt to book the seat (CONFIRMING while the
    -- write is in flight), named from the moment the intent goes to RESERVING.
    reservation_id    uuid,
    upstream_ref      text        NOT NULL,
    state             text        NOT NULL,
    attempts          integer     NOT NULL DEFAULT 0,
    -- The lease of the worker (or reaper) executing it; fences late writers.
    lease_owner       uuid,
    locked_until      timestamptz,
    -- When a REQUESTED intent may be claimed (pushed back while the seat is busy or
    -- the breaker is open).
    not_before        timestamptz NOT NULL,
    charge_id         text,
    last_error        text,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    kind              text        NOT NULL DEFAULT 'reserve',
    waitlist_entry_id uuid,
    CONSTRAINT intents_pkey PRIMARY KEY (id),
    -- One intent of each kind per reservation: a second confirm or cancel finds it.
    CONSTRAINT intents_reservation_kind_key UNIQUE (reservation_id, kind),
    -- The claim of a wait names the reservation it is about to insert, in the same
    -- transaction: the intent row is locked before any reservation row (the lock
    -- order), so the reference is checked at commit.
    CONSTRAINT intents_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES reservations (id)
        DEFERRABLE INITIALLY IMMEDIATE,
    CONSTRAINT intents_waitlist_entry_fkey FOREIGN KEY (waitlist_entry_id) REFERENCES waitlist_entries (id),
    CONSTRAINT intents_state_known CHECK (state IN
        ('REQUESTED', 'WAITING_FOR_SEAT', 'RESERVING', 'SUCCEEDED', 'FAILED_RACE', 'FAILED_AUTH', 'FAILED_UPSTREAM',
         'CANCELLED')),
    CONSTRAINT intents_reserving_is_leased CHECK (
        state <> 'RESERVING' OR (lease_owner IS NOT NULL AND locked_until IS NOT NULL)),
    CONSTRAINT intents_succeeded_has_charge CHECK (state <> 'SUCCEEDED' OR charge_id IS NOT NULL),
    CONSTRAINT intents_kind_known CHECK (kind IN ('reserve', 'cancel', 'wait')),
    CONSTRAINT intents_cancel_names_charge CHECK (kind <> 'cancel' OR charge_id IS NOT NULL),
    CONSTRAINT intents_wait_names_entry CHECK ((kind = 'wait') = (waitlist_entry_id IS NOT NULL)),
    -- Only a wait that never reached the write has no reservation.
    CONSTRAINT intents_write_names_reservation CHECK (
        reservation_id IS NOT NULL OR (kind = 'wait' AND state IN ('WAITING_FOR_SEAT', 'CANCELLED'))),
    CONSTRAINT intents_only_waits_wait CHECK (
        kind = 'wait' OR state NOT IN ('WAITING_FOR_SEAT', 'CANCELLED'))
);

-- At most one upstream write in flight per seat, across every worker instance: the
-- database refuses a second RESERVING intent for the same seat. A cancel and a
-- reserve of one seat never fly together.
CREATE UNIQUE INDEX intents_one_write_per_seat ON intents (upstream_ref) WHERE state = 'RESERVING';
-- The reaper walks lapsed leases.
CREATE INDEX intents_reserving_lease_idx ON intents (locked_until) WHERE state = 'RESERVING';
CREATE INDEX intents_requested_idx ON intents (not_before) WHERE state = 'REQUESTED';
-- A reserve waits for an earlier cancel of the same seat (its charge may still block).
CREATE INDEX intents_pending_cancel_idx ON intents (upstream_ref, created_at)
    WHERE kind = 'cancel' AND state IN ('REQUESTED', 'RESERVING');
CREATE UNIQUE INDEX intents_one_wait_per_entry ON intents (waitlist_entry_id) WHERE waitlist_entry_id IS NOT NULL;
CREATE INDEX intents_waiting_for_seat_idx ON intents (waitlist_entry_id) WHERE state = 'WAITING_FOR_SEAT';

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

-- When each upstream seat with waiters is read next. One row per seat, however many
-- wait, so that the backoff and the reads are the seat's, not each waiter's. Last in
-- the lock order: only ever locked after the resource and what follows it, or alone.
CREATE TABLE seat_polls (
    resource_id  uuid        NOT NULL,
    next_poll_at timestamptz NOT NULL,
    -- Polls in a row that found the seat taken: the backoff doubles with each.
    idle_polls   integer     NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL,
    CONSTRAINT seat_polls_pkey PRIMARY KEY (resource_id),
    CONSTRAINT seat_polls_resource_fkey FOREIGN KEY (resource_id) REFERENCES resources (id),
    CONSTRAINT seat_polls_idle_polls_non_negative CHECK (idle_polls >= 0)
);
CREATE INDEX seat_polls_due_idx ON seat_polls (next_poll_at);

-- Webhooks: endpoints that admins register, and what the notifier has delivered to them.
CREATE TABLE webhook_endpoints (
    id                         uuid        NOT NULL,
    url                        text        NOT NULL,
    -- The HMAC key of the endpoint's signatures. Kept in the clear because the
    -- notifier signs with it; the API shows it once, in the answer to the POST that
    -- made it.
    secret                     text        NOT NULL,
    -- Null: the events of every resource.
    resource_id                uuid,
    event_types                text[]      NOT NULL,
    created_by                 text        NOT NULL,
    created_at                 timestamptz NOT NULL,
    -- Deleted endpoints stay for their deliveries' sake; nothing is sent to them.
    deleted_at                 timestamptz,
    -- A rotated secret keeps signing beside the new one (two `v1=` in
    -- `Webhook-Signature`) until it expires, so a receiver can switch whenever it is
    -- ready within that window.
    previous_secret            text,
    previous_secret_expires_at timestamptz,
    CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_endpoints_resource_fkey FOREIGN KEY (resource_id) REFERENCES resources (id),
    CONSTRAINT webhook_endpoints_url_http CHECK (url ~ '^https?://' AND length(url) <= 2000),
    CONSTRAINT webhook_endpoints_event_types_not_empty CHECK (cardinality(event_types) >= 1),
    CONSTRAINT webhook_endpoints_secret_long CHECK (length(secret) >= 32),
    CONSTRAINT webhook_endpoints_previous_secret_with_expiry
        CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL))
);

-- The list, newest first, by keyset; and the notifier's look-up of live endpoints.
CREATE INDEX webhook_endpoints_created_idx ON webhook_endpoints (created_at DESC, id DESC) WHERE deleted_at IS NULL;

-- One row per event and endpoint that accepted it (a 2xx). A message delivered again
-- (a retry after another endpoint failed, a duplicate) goes only to the endpoints
-- without a row here.
CREATE TABLE webhook_deliveries (
    event_id     uuid        NOT NULL,
    endpoint_id  uuid        NOT NULL,
    status       integer     NOT NULL,
    delivered_at timestamptz NOT NULL,
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (event_id, endpoint_id),
    CONSTRAINT webhook_deliveries_endpoint_fkey FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id),
    CONSTRAINT webhook_deliveries_status_success CHECK (status BETWEEN 200 AND 299)
);

-- The retention purge of old deliveries, oldest first.
CREATE INDEX webhook_deliveries_delivered_idx ON webhook_deliveries (delivered_at);
-- The endpoint's foreign key, checked when an endpoint row changes.
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id);

-- The key of the list cursors' MAC (HMAC-SHA256): made once here, from the server's
-- random source, so a deploy needs no secret of its own; every process reads it once
-- and keeps it. Replacing the row invalidates every cursor given out (each process
-- picks the new key up when it starts).
CREATE TABLE list_cursor_key (
    id         smallint    NOT NULL DEFAULT 1,
    secret     bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT list_cursor_key_pkey PRIMARY KEY (id),
    CONSTRAINT list_cursor_key_one_row CHECK (id = 1),
    CONSTRAINT list_cursor_key_secret_length CHECK (octet_length(secret) = 32)
);
-- Two version-4 UUIDs: 244 random bits.
INSERT INTO list_cursor_key (secret) VALUES (uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));
