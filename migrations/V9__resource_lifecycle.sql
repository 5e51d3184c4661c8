-- Changing and retiring resources, moving bookings, metadata and who acted.
--
-- * resources.archived_at: an archived resource takes no new holds, joins or
--   reschedules; what it has stays, and can still be cancelled.
-- * metadata on resources and reservations: an object of string values, checked in
--   the application (sizes) and here (shape).
-- * reservations.acted_by: the principal whose request made the row's latest change;
--   NULL when the service itself made it (an expiry, a waitlist offer, the worker).
--   Every reservation event carries it, and the reservation's metadata.
-- * Capacity may change. The reservations' composite foreign key now cascades a new
--   capacity into every row that is still attached, so the exclusion constraint of
--   capacity 1 keys on the capacity the resource has now: crossing between 1 and N
--   keeps the database-level guarantee exact. A row detaches (resource_capacity NULL,
--   which a MATCH SIMPLE foreign key and both checks ignore) when it no longer claims
--   anything ahead: the capacity change detaches ended and inactive rows before it
--   cascades, because the past may hold loads (two overlapping bookings of a room that
--   had 2 places) that the new capacity could not have allowed.

ALTER TABLE resources ADD COLUMN IF NOT EXISTS archived_at timestamptz;
ALTER TABLE resources
    ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN updated_at timestamptz,
    ADD CONSTRAINT resources_metadata_object CHECK (jsonb_typeof(metadata) = 'object');
UPDATE resources SET updated_at = created_at;
ALTER TABLE resources ALTER COLUMN updated_at SET NOT NULL;

ALTER TABLE reservations
    ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN acted_by text,
    ADD CONSTRAINT reservations_metadata_object CHECK (jsonb_typeof(metadata) = 'object'),
    ALTER COLUMN resource_capacity DROP NOT NULL,
    DROP CONSTRAINT reservations_resource_fkey,
    ADD CONSTRAINT reservations_resource_fkey FOREIGN KEY (resource_id, resource_capacity)
        REFERENCES resources (id, capacity) ON UPDATE CASCADE;
-- The foreign key itself needs resource_id; this keeps its check and cascade indexed.
CREATE INDEX reservations_resource_capacity_idx ON reservations (resource_id, resource_capacity);

-- The events a move, a relabel and an archive record.
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_known;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_known CHECK (kind IN (
    'reservation.held', 'reservation.confirmed', 'reservation.released', 'reservation.expired',
    'reservation.cancelled', 'reservation.failed', 'reservation.rescheduled', 'reservation.updated',
    'waitlist.offered', 'waitlist.offer_expired', 'waitlist.cancelled', 'intent.requested'));

-- What a reservation event carries (the outbox payload), now with metadata and the
-- principal who acted (null: the service).
DROP FUNCTION reservation_event(uuid, uuid, text, timestamptz, timestamptz, integer, text, text, text);
CREATE FUNCTION reservation_event(
    p_id uuid, p_resource_id uuid, p_owner text, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_status text, p_source text, p_failure_reason text, p_metadata jsonb, p_acted_by text
) RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object('reservation_id', p_id, 'resource_id', p_resource_id, 'owner', p_owner,
                              'start', p_start, 'end', p_end, 'quantity', p_quantity, 'status', p_status,
                              'source', p_source, 'failure_reason', p_failure_reason,
                              'metadata', p_metadata, 'acted_by', p_acted_by)
$$;

-- The load profile of V7, optionally leaving one reservation out: a reschedule is
-- judged against everything but the booking it moves.
DROP FUNCTION reservation_load(uuid, timestamptz, timestamptz, timestamptz);
CREATE FUNCTION reservation_load(p_resource uuid, p_start timestamptz, p_end timestamptz, p_now timestamptz,
                                 p_except uuid DEFAULT NULL, OUT peak bigint, OUT lapsed boolean)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    WITH overlapping AS (
        SELECT starts_at, ends_at, quantity, (status = 'HELD' AND expires_at <= p_now) AS is_lapsed
        FROM reservations
        WHERE resource_id = p_resource AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
          AND period && tstzrange(p_start, p_end, '[)')
          AND id IS DISTINCT FROM p_except
    ), events AS (
        SELECT greatest(starts_at, p_start) AS at, quantity AS delta FROM overlapping WHERE NOT is_lapsed
        UNION ALL SELECT least(ends_at, p_end), -quantity FROM overlapping WHERE NOT is_lapsed
    )
    SELECT coalesce((SELECT max(load) FROM (
               SELECT sum(delta) OVER (ORDER BY at, delta ROWS UNBOUNDED PRECEDING) AS load FROM events) running), 0),
           coalesce((SELECT bool_or(o.is_lapsed) FROM overlapping o), false)
    INTO peak, lapsed;
END
$$;

-- The conditional insert of V7 with metadata and acted_by. The expiries it writes are
-- the service's own acts (acted_by NULL).
DROP FUNCTION reservation_insert_if_fits(uuid, uuid, integer, text, timestamptz, timestamptz, integer, text,
                                         timestamptz, text, text, timestamptz);
CREATE FUNCTION reservation_insert_if_fits(
    p_id uuid, p_resource uuid, p_capacity integer, p_owner text, p_start timestamptz, p_end timestamptz,
    p_quantity integer, p_status text, p_expires_at timestamptz, p_failure_reason text, p_source text,
    p_now timestamptz, p_metadata jsonb, p_acted_by text
) RETURNS TABLE (
    inserted boolean, id uuid, resource_id uuid, owner text, starts_at timestamptz, ends_at timestamptz,
    quantity integer, status text, expires_at timestamptz, failure_reason text, source text,
    created_at timestamptz, updated_at timestamptz, metadata jsonb, acted_by text
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH exp AS (
        UPDATE reservations r SET status = 'EXPIRED', updated_at = p_now, acted_by = NULL
        WHERE r.resource_id = p_resource AND r.status = 'HELD' AND r.expires_at <= p_now
          AND r.period && tstzrange(p_start, p_end, '[)')
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
                  r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by
    ), exp_ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT 'reservation.expired', exp.id,
               reservation_event(exp.id, exp.resource_id, exp.owner, exp.starts_at, exp.ends_at, exp.quantity,
                                 exp.status, exp.source, exp.failure_reason, exp.metadata, exp.acted_by),
               p_now, p_now
        FROM exp
        RETURNING 1
    ), gate AS (
        SELECT count(*) AS expired FROM exp
    ), ins AS (
        INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity,
                                       status, expires_at, failure_reason, source, created_at, updated_at,
                                       metadata, acted_by)
        SELECT p_id, p_resource, p_capacity, p_owner, p_start, p_end, p_quantity, p_status, p_expires_at,
               p_failure_reason, p_source, p_now, p_now, p_metadata, p_acted_by
        FROM gate
        WHERE (SELECT l.peak FROM reservation_load(p_resource, p_start, p_end, p_now) l) + p_quantity <= p_capacity
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
                  r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by
    ), ev AS (
        -- A CONFIRMING booking records its event when the system of record settles it.
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT CASE ins.status WHEN 'HELD' THEN 'reservation.held' ELSE 'reservation.confirmed' END, ins.id,
               reservation_event(ins.id, ins.resource_id, ins.owner, ins.starts_at, ins.ends_at, ins.quantity,
                                 ins.status, ins.source, ins.failure_reason, ins.metadata, ins.acted_by),
               p_now, p_now
        -- After the expiries' events (exp_ev), so the log reads in the order things happened.
        FROM ins, (SELECT count(*) FROM exp_ev) AS expiries_logged WHERE ins.status IN ('HELD', 'CONFIRMED')
    )
    SELECT true, ins.* FROM ins
    UNION ALL
    SELECT false, exp.* FROM exp;
END
$$;

-- Moves a reservation to [p_start, p_end) with p_quantity (and p_metadata), only if it
-- fits under the capacity at every instant beside everything else (the reservation
-- itself left out: 10:00-11:00 may move to 10:30-11:30), and records p_event
-- (reservation.rescheduled, or reservation.updated when only the metadata changed).
-- Like the insert, it first writes down the lapsed holds over the new range, and reads
-- their count before it updates. Returns the moved row (moved = true, absent when it
-- does not fit) and the holds it expired (moved = false). Call it under the resource
-- lock, holding the reservation's lock.
CREATE FUNCTION reservation_move_if_fits(
    p_id uuid, p_resource uuid, p_capacity integer, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_now timestamptz, p_metadata jsonb, p_acted_by text, p_event text
) RETURNS TABLE (
    moved boolean, id uuid, resource_id uuid, owner text, starts_at timestamptz, ends_at timestamptz,
    quantity integer, status text, expires_at timestamptz, failure_reason text, source text,
    created_at timestamptz, updated_at timestamptz, metadata jsonb, acted_by text
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH exp AS (
        UPDATE reservations r SET status = 'EXPIRED', updated_at = p_now, acted_by = NULL
        WHERE r.resource_id = p_resource AND r.status = 'HELD' AND r.expires_at <= p_now
          AND r.period && tstzrange(p_start, p_end, '[)') AND r.id <> p_id
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
                  r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by
    ), exp_ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT 'reservation.expired', exp.id,
               reservation_event(exp.id, exp.resource_id, exp.owner, exp.starts_at, exp.ends_at, exp.quantity,
                                 exp.status, exp.source, exp.failure_reason, exp.metadata, exp.acted_by),
               p_now, p_now
        FROM exp
        RETURNING 1
    ), gate AS (
        SELECT count(*) AS expired FROM exp
    ), upd AS (
        UPDATE reservations r
        SET starts_at = p_start, ends_at = p_end, quantity = p_quantity, metadata = p_metadata,
            acted_by = p_acted_by, updated_at = p_now
        FROM gate
        WHERE r.id = p_id
          AND (SELECT l.peak FROM reservation_load(p_resource, p_start, p_end, p_now, p_id) l) + p_quantity
              <= p_capacity
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
                  r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT p_event, upd.id,
               reservation_event(upd.id, upd.resource_id, upd.owner, upd.starts_at, upd.ends_at, upd.quantity,
                                 upd.status, upd.source, upd.failure_reason, upd.metadata, upd.acted_by),
               p_now, p_now
        FROM upd, (SELECT count(*) FROM exp_ev) AS expiries_logged
    )
    SELECT true, upd.* FROM upd
    UNION ALL
    SELECT false, exp.* FROM exp;
END
$$;

-- The one-round-trip hold of V7, with metadata, and with the resource read again under
-- its lock: its capacity may have changed, or it may have been archived, between the
-- look and the lock. New outcome: archived.
DROP FUNCTION reservation_hold(uuid, uuid, text, timestamptz, timestamptz, integer, boolean, timestamptz);
CREATE FUNCTION reservation_hold(
    p_id uuid, p_resource uuid, p_owner text, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_confirm boolean, p_now timestamptz, p_metadata jsonb
) RETURNS TABLE (
    outcome text, capacity integer, id uuid, resource_id uuid, owner text,
    starts_at timestamptz, ends_at timestamptz, quantity integer, status text, expires_at timestamptz,
    failure_reason text, source text, created_at timestamptz, updated_at timestamptz, metadata jsonb,
    acted_by text
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    res resources%ROWTYPE;
    load record;
    row record;
    won boolean := false;
BEGIN
    SELECT * INTO res FROM resources WHERE resources.id = p_resource;
    IF NOT FOUND THEN
        outcome := 'not_found';
        RETURN NEXT;
        RETURN;
    END IF;
    IF res.archived_at IS NOT NULL THEN
        outcome := 'archived';
        RETURN NEXT;
        RETURN;
    END IF;
    capacity := res.capacity;
    IF p_quantity > res.capacity THEN
        outcome := 'too_many';
        RETURN NEXT;
        RETURN;
    END IF;
    load := reservation_load(p_resource, p_start, p_end, p_now);
    IF res.authority <> 'local' OR load.lapsed THEN
        outcome := 'general';
        RETURN NEXT;
        RETURN;
    END IF;
    -- Taken at this instant by live claims: refused without a lock or a write.
    IF load.peak + p_quantity > res.capacity THEN
        outcome := 'unavailable';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT * INTO res FROM resources WHERE resources.id = p_resource FOR NO KEY UPDATE;
    -- What the look saw may have changed before the lock was granted.
    IF res.archived_at IS NOT NULL THEN
        outcome := 'archived';
        RETURN NEXT;
        RETURN;
    END IF;
    capacity := res.capacity;
    IF p_quantity > res.capacity THEN
        outcome := 'too_many';
        RETURN NEXT;
        RETURN;
    END IF;
    FOR row IN
        SELECT * FROM reservation_insert_if_fits(
            p_id, p_resource, res.capacity, p_owner, p_start, p_end, p_quantity,
            CASE WHEN p_confirm THEN 'CONFIRMED' ELSE 'HELD' END,
            CASE WHEN p_confirm THEN NULL ELSE p_now + make_interval(secs => res.hold_ttl_seconds) END,
            NULL, 'request', p_now, p_metadata, p_owner)
    LOOP
        outcome := CASE WHEN row.inserted THEN 'reserved' ELSE 'expired' END;
        won := won OR row.inserted;
        id := row.id; resource_id := row.resource_id; owner := row.owner; starts_at := row.starts_at;
        ends_at := row.ends_at; quantity := row.quantity; status := row.status; expires_at := row.expires_at;
        failure_reason := row.failure_reason; source := row.source; created_at := row.created_at;
        updated_at := row.updated_at; metadata := row.metadata; acted_by := row.acted_by;
        RETURN NEXT;
    END LOOP;
    IF NOT won THEN
        -- Lost under the lock. A crash that lost this commit would lose only a
        -- refusal (or expiries the next request or sweep redoes): no need to wait for
        -- the disk, and the queue of losers behind the lock moves faster.
        PERFORM set_config('synchronous_commit', 'off', true);
        outcome := 'unavailable';
        id := NULL; resource_id := NULL; owner := NULL; starts_at := NULL; ends_at := NULL;
        quantity := NULL; status := NULL; expires_at := NULL; failure_reason := NULL; source := NULL;
        created_at := NULL; updated_at := NULL; metadata := NULL; acted_by := NULL;
        RETURN NEXT;
    END IF;
END
$$;
