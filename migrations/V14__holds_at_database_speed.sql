-- Holds at the speed of the database (issue 13): what a hold costs PostgreSQL, cut
-- where a profile of `reservation_hold` (perf on one backend, 10,000 calls) showed
-- work that buys no guarantee. Each change keeps what it replaces exact.

-- 1. The event payload is built inline. `reservation_event` was declared IMMUTABLE
-- around jsonb_build_object, which is STABLE (a timestamp's text follows the session's
-- settings); a function more volatile inside than declared is never inlined, so every
-- statement that wrote an event parsed and planned the function's body again (9 % of
-- a hold's database time). STABLE is what it is, and lets the planner inline it.
ALTER FUNCTION reservation_event(uuid, uuid, text, timestamptz, timestamptz, integer, text, text, text, jsonb,
                                 text) STABLE;

-- 2. One exclusion constraint for capacity 1. A reservation's kept range `buffered`
-- (V12) holds its period, now by a check of its own, so keeping the buffered ranges of
-- the active bookings apart (reservations_single_unit_buffers_apart) keeps their
-- periods apart too: V1's constraint on `period` could never fire first, and cost a
-- second GiST entry and probe on every active write.
ALTER TABLE reservations
    ADD CONSTRAINT reservations_buffered_holds_period CHECK (buffered @> period),
    DROP CONSTRAINT reservations_single_unit_no_overlap;

-- 3. The foreign key's own index (V9) goes: its check and cascade look reservations up
-- by resource, which reservations_resource_created_idx (V8) leads with. A capacity
-- change walks a resource's rows either way; a hold no longer writes a btree entry
-- for it.
DROP INDEX reservations_resource_capacity_idx;

-- 4. A writer that knows the buffers passes `buffered`; the trigger computes it for
-- every other insert, and for every move, as before. The one-round-trip hold below
-- reads the resource under its lock, as the trigger would, and saves the trigger's
-- call and its second read of the resource row.
DROP TRIGGER reservations_buffered ON reservations;
CREATE TRIGGER reservations_buffered_insert BEFORE INSERT ON reservations
    FOR EACH ROW WHEN (NEW.buffered IS NULL) EXECUTE FUNCTION reservations_set_buffered();
CREATE TRIGGER reservations_buffered_move BEFORE UPDATE OF starts_at, ends_at, buffered ON reservations
    FOR EACH ROW EXECUTE FUNCTION reservations_set_buffered();

-- 5. The load profile of V9 in two steps: one aggregate over the overlapping claims,
-- which is the answer when at most one of them is live (its quantity, or 0); the sweep
-- over their starts and ends only when two or more are. A capacity-1 resource never
-- needs the sweep, and a free range has nothing to sweep.
CREATE OR REPLACE FUNCTION reservation_load(p_resource uuid, p_start timestamptz, p_end timestamptz,
                                            p_now timestamptz, p_except uuid DEFAULT NULL,
                                            OUT peak bigint, OUT lapsed boolean)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    live bigint;
BEGIN
    SELECT count(*) FILTER (WHERE NOT (status = 'HELD' AND expires_at <= p_now)),
           coalesce(sum(quantity) FILTER (WHERE NOT (status = 'HELD' AND expires_at <= p_now)), 0),
           coalesce(bool_or(status = 'HELD' AND expires_at <= p_now), false)
    INTO live, peak, lapsed
    FROM reservations
    WHERE resource_id = p_resource AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
      AND period && tstzrange(p_start, p_end, '[)')
      AND id IS DISTINCT FROM p_except;
    IF live <= 1 THEN
        RETURN;
    END IF;
    -- +quantity at each (clipped) start, -quantity at each end, ends first at one
    -- instant so that ranges are half-open; the running sum's maximum is the peak.
    WITH live_claims AS (
        SELECT starts_at, ends_at, quantity
        FROM reservations
        WHERE resource_id = p_resource AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
          AND period && tstzrange(p_start, p_end, '[)')
          AND id IS DISTINCT FROM p_except
          AND NOT (status = 'HELD' AND expires_at <= p_now)
    ), events AS (
        SELECT greatest(starts_at, p_start) AS at, quantity AS delta FROM live_claims
        UNION ALL SELECT least(ends_at, p_end), -quantity FROM live_claims
    )
    SELECT coalesce(max(load), 0) INTO peak
    FROM (SELECT sum(delta) OVER (ORDER BY at, delta ROWS UNBOUNDED PRECEDING) AS load FROM events) running;
END
$$;

-- 6. The hold of V12 with plain statements under the lock. The look, the lock and the
-- checks under it are V12's. Then the load is read again in a statement of its own,
-- whose snapshot (taken after the lock was granted) includes every committed
-- competitor. With no lapsed hold over the range, the reservation and its event are
-- two plain inserts: no expiry to write first, so none of the conditional insert's
-- ordering machinery. A hold that lapsed between the look and the lock still goes
-- through reservation_insert_if_fits, which writes it down first.
CREATE OR REPLACE FUNCTION reservation_hold(
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
    new_status text := CASE WHEN p_confirm THEN 'CONFIRMED' ELSE 'HELD' END;
    new_expires_at timestamptz;
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
    IF res.has_calendar_rules OR res.authority <> 'local' THEN
        outcome := 'general';
        RETURN NEXT;
        RETURN;
    END IF;
    load := reservation_load(p_resource, p_start, p_end, p_now);
    IF load.lapsed THEN
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
    IF res.has_calendar_rules THEN
        outcome := 'general';
        RETURN NEXT;
        RETURN;
    END IF;
    -- A booking made while the resource had buffers keeps them after they were
    -- cleared; where one meets this range, the general path judges it (see V12).
    IF res.capacity = 1 AND EXISTS (
        SELECT 1 FROM reservations r
        WHERE r.resource_id = p_resource AND r.resource_capacity = 1
          AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
          AND r.buffered && tstzrange(p_start, p_end, '[)') AND r.buffered <> r.period) THEN
        outcome := 'general';
        RETURN NEXT;
        RETURN;
    END IF;
    new_expires_at := CASE WHEN p_confirm THEN NULL ELSE p_now + make_interval(secs => res.hold_ttl_seconds) END;
    load := reservation_load(p_resource, p_start, p_end, p_now);
    IF load.lapsed THEN
        FOR row IN
            SELECT * FROM reservation_insert_if_fits(
                p_id, p_resource, res.capacity, p_owner, p_start, p_end, p_quantity, new_status, new_expires_at,
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
    ELSIF load.peak + p_quantity <= res.capacity THEN
        -- `buffered` as the trigger would compute it, from the row read under the lock
        -- (no rules here, so no buffers: the period itself).
        INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity,
                                       status, expires_at, failure_reason, source, created_at, updated_at,
                                       metadata, acted_by, buffered)
        VALUES (p_id, p_resource, res.capacity, p_owner, p_start, p_end, p_quantity, new_status, new_expires_at,
                NULL, 'request', p_now, p_now, p_metadata, p_owner,
                tstzrange(p_start - make_interval(mins => res.buffer_before_minutes),
                          p_end + make_interval(mins => res.buffer_after_minutes), '[)'))
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
                  r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by
        INTO id, resource_id, owner, starts_at, ends_at, quantity, status, expires_at, failure_reason, source,
             created_at, updated_at, metadata, acted_by;
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        VALUES (CASE WHEN p_confirm THEN 'reservation.confirmed' ELSE 'reservation.held' END, id,
                reservation_event(id, resource_id, owner, starts_at, ends_at, quantity, status, source,
                                  failure_reason, metadata, acted_by),
                p_now, p_now);
        outcome := 'reserved';
        won := true;
        RETURN NEXT;
    END IF;
    IF NOT won THEN
        -- Lost under the lock: see V9.
        PERFORM set_config('synchronous_commit', 'off', true);
        outcome := 'unavailable';
        id := NULL; resource_id := NULL; owner := NULL; starts_at := NULL; ends_at := NULL;
        quantity := NULL; status := NULL; expires_at := NULL; failure_reason := NULL; source := NULL;
        created_at := NULL; updated_at := NULL; metadata := NULL; acted_by := NULL;
        RETURN NEXT;
    END IF;
END
$$;
