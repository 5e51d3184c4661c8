-- The check of the load timeline: every resource's pieces recomputed from the bookings
-- they count (active, not on a capacity-1 resource), one row per interval where the
-- recorded load and the recomputed one differ, or where a piece reaches across a
-- booking's boundary (a write that lowers the load would not find it). No row: the
-- timeline is exact. The tests, the bench and the chaos run call it after
-- every phase; any row fails them.
CREATE OR REPLACE FUNCTION resource_load_mismatches()
RETURNS TABLE (resource_id uuid, during tstzrange, recorded bigint, recomputed bigint)
LANGUAGE sql STABLE AS $$
    WITH counted AS (
        SELECT r.resource_id, r.period, r.quantity FROM reservations r
        WHERE r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND r.resource_capacity IS DISTINCT FROM 1
    ), bounds AS (
        SELECT c.resource_id, lower(c.period) AS at FROM counted c
        UNION SELECT c.resource_id, upper(c.period) FROM counted c
        UNION SELECT l.resource_id, lower(l.during) FROM resource_load l
        UNION SELECT l.resource_id, upper(l.during) FROM resource_load l
    ), intervals AS (
        SELECT b.resource_id, tstzrange(b.at, lead(b.at) OVER (PARTITION BY b.resource_id ORDER BY b.at), '[)') AS during
        FROM bounds b
    ), compared AS (
        SELECT i.resource_id, i.during,
               (SELECT sum(l.load) FROM resource_load l
                WHERE l.resource_id = i.resource_id AND l.during && i.during) AS recorded,
               (SELECT bool_or(l.during <> i.during) FROM resource_load l
                WHERE l.resource_id = i.resource_id AND l.during && i.during) AS reaches_across,
               (SELECT sum(c.quantity) FROM counted c
                WHERE c.resource_id = i.resource_id AND c.period && i.during) AS recomputed
        FROM intervals i
        WHERE NOT upper_inf(i.during)
    )
    SELECT c.resource_id, c.during, coalesce(c.recorded, 0), coalesce(c.recomputed, 0)
    FROM compared c
    WHERE coalesce(c.recorded, 0) <> coalesce(c.recomputed, 0) OR c.reaches_across
$$;
