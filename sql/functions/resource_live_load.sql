-- The live load of a capacity-N resource over [p_from, p_to) as of p_now, from its load
-- timeline: each piece of the window that holds a load, clipped to the window, less
-- the holds that lapsed by p_now and are not written down yet (the pieces count them
-- until then). What a read of a big event's slots judges by: its cost grows with the
-- distinct boundaries in the window and the lapsed holds on it, not with the live
-- bookings. A read without locks, as every slots read is; the hold still decides.
--
-- Lapsed holds are left out as `reservation_load` leaves them out: those of the last
-- week, found by the expiry index and planned afresh with the clock's value. One the
-- sweep has not written down in a week still counts, as it does for a hold.
CREATE OR REPLACE FUNCTION resource_live_load(p_resource uuid, p_from timestamptz, p_to timestamptz,
                                              p_now timestamptz)
RETURNS TABLE (starts_at timestamptz, ends_at timestamptz, load bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY EXECUTE
        'WITH lapsed AS MATERIALIZED (
             SELECT h.period, h.quantity FROM reservations h
             WHERE h.resource_id = $1 AND h.status = ''HELD'' AND h.resource_capacity IS DISTINCT FROM 1
               AND h.expires_at <= $4 AND h.expires_at > $4 - interval ''7 days''
               AND h.period && tstzrange($2, $3, ''[)'')
         ), pieces AS (
             SELECT l.during, l.load - coalesce((SELECT sum(x.quantity) FROM lapsed x WHERE x.period && l.during), 0)
                    AS live
             FROM resource_load l
             WHERE l.resource_id = $1 AND l.during && tstzrange($2, $3, ''[)'') AND l.load > 0
         )
         SELECT greatest(lower(p.during), $2), least(upper(p.during), $3), p.live::bigint
         FROM pieces p WHERE p.live > 0 ORDER BY p.during'
    USING p_resource, p_from, p_to, p_now;
END
$$;
