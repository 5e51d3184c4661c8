-- The highest load at any instant of [p_start, p_end) from the active reservations
-- that have not lapsed by p_now, optionally leaving one reservation out (a reschedule
-- is judged against everything but the booking it moves). `lapsed` tells whether holds
-- that lapsed by p_now (and do not count) still overlap the range unwritten.
--
-- In two steps: one aggregate over the overlapping claims, which is the answer when at
-- most one of them is live (its quantity, or 0); the sweep over their starts and ends
-- only when two or more are. A capacity-1 resource never needs the sweep, and a free
-- range has nothing to sweep.
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
