-- The capacity rules as named SQL functions: one definition of the load profile, of
-- the conditional insert and of a reservation's event, shared by every statement that
-- needs them, and a hold of a local resource in one round trip.

-- What a reservation event carries (the outbox payload).
CREATE FUNCTION reservation_event(
    p_id uuid, p_resource_id uuid, p_owner text, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_status text, p_source text, p_failure_reason text
) RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object('reservation_id', p_id, 'resource_id', p_resource_id, 'owner', p_owner,
                              'start', p_start, 'end', p_end, 'quantity', p_quantity, 'status', p_status,
                              'source', p_source, 'failure_reason', p_failure_reason)
$$;

-- The highest load at any instant of [p_start, p_end) from the active reservations
-- that have not lapsed by p_now: +quantity at each (clipped) start, -quantity at each
-- end, ends first at one instant so that ranges are half-open; the running sum's
-- maximum is the peak. `lapsed` tells whether holds that lapsed by p_now (and do not
-- count) still overlap the range unwritten. One scan of the active-period index.
CREATE FUNCTION reservation_load(p_resource uuid, p_start timestamptz, p_end timestamptz, p_now timestamptz,
                                 OUT peak bigint, OUT lapsed boolean)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    WITH overlapping AS (
        SELECT starts_at, ends_at, quantity, (status = 'HELD' AND expires_at <= p_now) AS is_lapsed
        FROM reservations
        WHERE resource_id = p_resource AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
          AND period && tstzrange(p_start, p_end, '[)')
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

-- Writes down the lapse of the holds that overlap the new reservation, then inserts it
-- only if its quantity fits under the capacity at every instant of its range. Returns
-- the inserted row (inserted = true) and the holds it expired (inserted = false).
--
-- The expiry comes first because the exclusion constraint cannot know the time: a
-- lapsed hold still counts for it until its status says so. Sub-statements of one WITH
-- run in no fixed order, so the insert reads a count of the expired rows (gate): that
-- data dependency makes PostgreSQL finish the expiry before it inserts.
--
-- Call it only while holding the resource lock, in a statement after the one that took
-- it, so that its snapshot includes every committed competitor.
CREATE FUNCTION reservation_insert_if_fits(
    p_id uuid, p_resource uuid, p_capacity integer, p_owner text, p_start timestamptz, p_end timestamptz,
    p_quantity integer, p_status text, p_expires_at timestamptz, p_failure_reason text, p_source text,
    p_now timestamptz
) RETURNS TABLE (
    inserted boolean, id uuid, resource_id uuid, owner text, starts_at timestamptz, ends_at timestamptz,
    quantity integer, status text, expires_at timestamptz, failure_reason text, source text,
    created_at timestamptz, updated_at timestamptz
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH exp AS (
        UPDATE reservations r SET status = 'EXPIRED', updated_at = p_now
        WHERE r.resource_id = p_resource AND r.status = 'HELD' AND r.expires_at <= p_now
          AND r.period && tstzrange(p_start, p_end, '[)')
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
                  r.failure_reason, r.source, r.created_at, r.updated_at
    ), exp_ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT 'reservation.expired', exp.id,
               reservation_event(exp.id, exp.resource_id, exp.owner, exp.starts_at, exp.ends_at, exp.quantity,
                                 exp.status, exp.source, exp.failure_reason),
               p_now, p_now
        FROM exp
        RETURNING 1
    ), gate AS (
        SELECT count(*) AS expired FROM exp
    ), ins AS (
        INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity,
                                       status, expires_at, failure_reason, source, created_at, updated_at)
        SELECT p_id, p_resource, p_capacity, p_owner, p_start, p_end, p_quantity, p_status, p_expires_at,
               p_failure_reason, p_source, p_now, p_now
        FROM gate
        WHERE (SELECT l.peak FROM reservation_load(p_resource, p_start, p_end, p_now) l) + p_quantity <= p_capacity
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
                  r.failure_reason, r.source, r.created_at, r.updated_at
    ), ev AS (
        -- A CONFIRMING booking records its event when the system of record settles it.
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT CASE ins.status WHEN 'HELD' THEN 'reservation.held' ELSE 'reservation.confirmed' END, ins.id,
               reservation_event(ins.id, ins.resource_id, ins.owner, ins.starts_at, ins.ends_at, ins.quantity,
                                 ins.status, ins.source, ins.failure_reason),
               p_now, p_now
        -- After the expiries' events (exp_ev), so the log reads in the order things happened.
        FROM ins, (SELECT count(*) FROM exp_ev) AS expiries_logged WHERE ins.status IN ('HELD', 'CONFIRMED')
    )
    SELECT true, ins.* FROM ins
    UNION ALL
    SELECT false, exp.* FROM exp;
END
$$;

-- A hold (or, with p_confirm, a booking) of a local resource in one round trip: the
-- look before the lock, the lock, and the conditional insert, each statement with a
-- snapshot of its own. outcome is one of:
--   reserved     the new row;
--   expired      (beside one of the others) a lapsed hold the insert wrote down on
--                the way, which the caller hands to the waitlist;
--   unavailable  taken, by the look before the lock (no lock, no write) or under it;
--   not_found    no such resource;
--   too_many     the quantity exceeds the capacity (given in capacity);
--   general      not for this path: an upstream resource, or lapsed holds over the
--                range whose capacity the waitlist must be offered first. The caller
--                takes the general path, in the same transaction.
CREATE FUNCTION reservation_hold(
    p_id uuid, p_resource uuid, p_owner text, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_confirm boolean, p_now timestamptz
) RETURNS TABLE (
    outcome text, capacity integer, id uuid, resource_id uuid, owner text,
    starts_at timestamptz, ends_at timestamptz, quantity integer, status text, expires_at timestamptz,
    failure_reason text, source text, created_at timestamptz, updated_at timestamptz
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
    PERFORM 1 FROM resources WHERE resources.id = p_resource FOR NO KEY UPDATE;
    FOR row IN
        SELECT * FROM reservation_insert_if_fits(
            p_id, p_resource, res.capacity, p_owner, p_start, p_end, p_quantity,
            CASE WHEN p_confirm THEN 'CONFIRMED' ELSE 'HELD' END,
            CASE WHEN p_confirm THEN NULL ELSE p_now + make_interval(secs => res.hold_ttl_seconds) END,
            NULL, 'request', p_now)
    LOOP
        outcome := CASE WHEN row.inserted THEN 'reserved' ELSE 'expired' END;
        won := won OR row.inserted;
        id := row.id; resource_id := row.resource_id; owner := row.owner; starts_at := row.starts_at;
        ends_at := row.ends_at; quantity := row.quantity; status := row.status; expires_at := row.expires_at;
        failure_reason := row.failure_reason; source := row.source; created_at := row.created_at;
        updated_at := row.updated_at;
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
        created_at := NULL; updated_at := NULL;
        RETURN NEXT;
    END IF;
END
$$;
