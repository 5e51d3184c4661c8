-- A hold that finds its resource's lock free takes it at once (issue 13).
--
-- V14's hold looked before it locked: it read the resource and the load over the range,
-- refused when the range was taken, and only then waited for the lock, where it read
-- the resource and the load again. The look is what lets a burst's losers go without
-- queueing on the lock; an uncontended hold paid for it in full and gained nothing
-- (three of its eight statements, and a second function call for the load).
--
-- Now the first statement asks for the lock with SKIP LOCKED, and only for a resource
-- the one-round-trip path serves (local, no calendar rules, not archived):
-- - granted: nobody holds the lock, so nobody is ahead to lose to; the hold goes
--   straight to the checks under the lock;
-- - skipped: another transaction holds the lock (a competitor, a capacity change), or
--   the resource is missing, archived or not for this path; the look of V14 runs, and
--   then the waiting lock.
-- Under the lock, the load is one aggregate over the overlapping claims, inline: their
-- total is an upper bound of the peak, so when it fits there is nothing to sweep; the
-- sweep (reservation_load) runs only when two or more live claims overlap and their
-- total does not fit. A lapsed hold over the range, seen under the lock, sends the
-- request to the general path (V14 gave its capacity to the newcomer in this rare
-- case; the general path offers it to the waitlist first, as everywhere else), so the
-- hold no longer expires anything itself and returns no `expired` rows.
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
    look record;
    range tstzrange := tstzrange(p_start, p_end, '[)');
    live_claims bigint;
    live_total bigint;
    any_lapsed boolean;
    fits boolean;
    new_status text := CASE WHEN p_confirm THEN 'CONFIRMED' ELSE 'HELD' END;
    new_expires_at timestamptz;
BEGIN
    SELECT * INTO res FROM resources
    WHERE resources.id = p_resource AND resources.archived_at IS NULL AND resources.authority = 'local'
      AND NOT resources.has_calendar_rules
    FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        -- The look (V14): what is known without the lock, and a refusal without waiting
        -- for it when live claims already take the range.
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
        look := reservation_load(p_resource, p_start, p_end, p_now);
        IF look.lapsed THEN
            outcome := 'general';
            RETURN NEXT;
            RETURN;
        END IF;
        IF look.peak + p_quantity > res.capacity THEN
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
        IF res.has_calendar_rules THEN
            outcome := 'general';
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    capacity := res.capacity;
    IF p_quantity > res.capacity THEN
        outcome := 'too_many';
        RETURN NEXT;
        RETURN;
    END IF;
    -- A booking made while the resource had buffers keeps them after they were
    -- cleared; where one meets this range, the general path judges it (see V12).
    IF res.capacity = 1 AND EXISTS (
        SELECT 1 FROM reservations r
        WHERE r.resource_id = p_resource AND r.resource_capacity = 1
          AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
          AND r.buffered && range AND r.buffered <> r.period) THEN
        outcome := 'general';
        RETURN NEXT;
        RETURN;
    END IF;
    -- The load under the lock, in a statement of its own: its snapshot, taken after the
    -- lock was granted, includes every committed competitor.
    SELECT count(*) FILTER (WHERE NOT (r.status = 'HELD' AND r.expires_at <= p_now)),
           coalesce(sum(r.quantity) FILTER (WHERE NOT (r.status = 'HELD' AND r.expires_at <= p_now)), 0),
           coalesce(bool_or(r.status = 'HELD' AND r.expires_at <= p_now), false)
    INTO live_claims, live_total, any_lapsed
    FROM reservations r
    WHERE r.resource_id = p_resource AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND r.period && range;
    IF any_lapsed THEN
        -- Lapsed capacity goes to the waitlist first: the general path writes the lapse
        -- down and offers it, in this transaction, under the lock already held.
        outcome := 'general';
        RETURN NEXT;
        RETURN;
    END IF;
    new_expires_at := CASE WHEN p_confirm THEN NULL ELSE p_now + make_interval(secs => res.hold_ttl_seconds) END;
    -- The total of the live claims is the peak when at most one of them overlaps, and
    -- never below it: the sweep is needed only when the total does not fit.
    fits := live_total + p_quantity <= res.capacity;
    IF NOT fits AND live_claims > 1 THEN
        fits := (reservation_load(p_resource, p_start, p_end, p_now)).peak + p_quantity <= res.capacity;
    END IF;
    IF NOT fits THEN
        -- Lost under the lock: see V9.
        PERFORM set_config('synchronous_commit', 'off', true);
        outcome := 'unavailable';
        RETURN NEXT;
        RETURN;
    END IF;
    -- `buffered` as the trigger would compute it, from the row read under the lock (no
    -- rules here, so no buffers: the period itself).
    INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, status,
                                   expires_at, failure_reason, source, created_at, updated_at, metadata, acted_by,
                                   buffered)
    VALUES (p_id, p_resource, res.capacity, p_owner, p_start, p_end, p_quantity, new_status, new_expires_at, NULL,
            'request', p_now, p_now, p_metadata, p_owner,
            tstzrange(p_start - make_interval(mins => res.buffer_before_minutes),
                      p_end + make_interval(mins => res.buffer_after_minutes), '[)'))
    RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
              r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by
    INTO id, resource_id, owner, starts_at, ends_at, quantity, status, expires_at, failure_reason, source,
         created_at, updated_at, metadata, acted_by;
    INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
    VALUES (CASE WHEN p_confirm THEN 'reservation.confirmed' ELSE 'reservation.held' END, id,
            reservation_event(id, resource_id, owner, starts_at, ends_at, quantity, status, source, failure_reason,
                              metadata, acted_by),
            p_now, p_now);
    outcome := 'reserved';
    RETURN NEXT;
END
$$;
