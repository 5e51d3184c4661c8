-- The highest load at any instant of [p_start, p_end) from the active reservations
-- that have not lapsed by p_now, optionally leaving one reservation out (a reschedule
-- is judged against everything but the booking it moves). `lapsed` tells whether holds
-- that lapsed by p_now (and do not count) still overlap the range unwritten.
--
-- A capacity-N resource answers from its load timeline (`resource_load`): the highest
-- piece over the range, less the left-out booking where it counts. Its cost grows with
-- the distinct boundaries in the range, not with the bookings on it. The pieces count
-- lapsed holds until they are written down, so their peak is never below the live one.
-- With p_need (the quantity the caller wants to fit), the pieces always answer. A
-- peak that leaves room for it is the answer as it stands: lapsed holds could only
-- lower it, so they are not looked for and `lapsed` is false (their capacity stays
-- owed to the waitlist, which the sweep or the next request that needs it writes
-- down). Otherwise `lapsed` tells whether lapsed holds meet the range (found by the
-- expiry index, without reading live rows): the caller then writes down those in its
-- way (reservation_expire_in_way) and asks again: a piece that still lacks room then
-- is full of live claims. Without p_need the pieces answer only when no
-- lapsed hold meets the range; when one does, and on capacity 1 (no pieces: the
-- exclusion constraint judges), the bookings themselves answer, in two steps: one
-- aggregate over the overlapping claims, which is the answer when at most one of them
-- is live (its quantity, or 0); the sweep over their starts and ends only when two or
-- more are.
CREATE OR REPLACE FUNCTION reservation_load(p_resource uuid, p_start timestamptz, p_end timestamptz,
                                            p_now timestamptz, p_except uuid DEFAULT NULL,
                                            p_need integer DEFAULT NULL,
                                            OUT peak bigint, OUT lapsed boolean)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    live bigint;
    left_out record;
    cap integer;
BEGIN
    SELECT r.capacity INTO cap FROM resources r WHERE r.id = p_resource;
    IF cap > 1 THEN
        SELECT x.period, x.quantity INTO left_out FROM reservations x
        WHERE x.id = p_except AND x.resource_id = p_resource AND x.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
          AND x.resource_capacity IS DISTINCT FROM 1;
        SELECT coalesce(max(l.load - CASE WHEN l.during && left_out.period THEN left_out.quantity ELSE 0 END), 0)
        INTO peak
        FROM resource_load l
        WHERE l.resource_id = p_resource AND l.during && tstzrange(p_start, p_end, '[)');
        IF p_need IS NOT NULL AND peak + p_need <= cap THEN
            lapsed := false;
            RETURN;
        END IF;
        -- The resource's lapsed holds, by its expiry index, and whether one meets the
        -- range. Planned afresh each time (EXECUTE), with the clock's value: a plan
        -- kept for any time cannot tell that `expires_at <= now` is rare, and reads the
        -- resource's live bookings instead (by the period's index, or a scan), a cost
        -- that grows with the bookings on the range. The planner needs the table's
        -- statistics for it (autovacuum's analyze). The lower bound keeps the estimate
        -- small without them; a hold lapsed longer ago than a week, which the sweep has
        -- not written down, still counts in the pieces: it can only refuse, never
        -- overbook.
        EXECUTE 'SELECT coalesce(bool_or(h.period && $3 AND h.id IS DISTINCT FROM $4), false) FROM reservations h '
                'WHERE h.resource_id = $1 AND h.status = ''HELD'' AND h.resource_capacity IS DISTINCT FROM 1 '
                'AND h.expires_at <= $2 AND h.expires_at > $2 - interval ''7 days'''
        INTO lapsed USING p_resource, p_now, tstzrange(p_start, p_end, '[)'), p_except;
        IF NOT lapsed OR p_need IS NOT NULL THEN
            RETURN;
        END IF;
    END IF;
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
