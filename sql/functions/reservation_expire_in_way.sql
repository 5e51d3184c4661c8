-- Writes down the lapsed holds in the way of a claim of p_quantity over
-- [p_start, p_end) on p_resource (p_except: the booking a move leaves out), with their
-- events (reservation_expire_lapsed), and returns them for the hand-over. The sweep
-- writes down the rest. Call it under the resource's lock.
--
-- On a single unit, every lapsed hold over the range: the exclusion constraint counts
-- each until its status says it lapsed. They cannot overlap one another, so the range
-- bounds their number.
--
-- On capacity N, enough that the load timeline has room for the claim (the left-out
-- booking's own quantity aside), and no more: piece by piece over the range, the
-- first without room has the oldest lapsed holds over it written down until their
-- quantities cover its shortfall; none where it has room, however many lapsed (a
-- sold-out event whose holds all lapsed at once). The timeline counts a lapsed hold
-- until it is written down, and so does a reader of the events: a claim that fits
-- takes no place whose hold has not been written down before it. A piece without room
-- and without a lapsed hold over it is full of live claims: the claim cannot fit, and
-- the write-down stops there.
CREATE OR REPLACE FUNCTION reservation_expire_in_way(p_resource uuid, p_start timestamptz, p_end timestamptz,
                                                     p_quantity integer, p_now timestamptz,
                                                     p_except uuid DEFAULT NULL)
RETURNS TABLE (
    id uuid, resource_id uuid, owner text, starts_at timestamptz, ends_at timestamptz, quantity integer,
    status text, expires_at timestamptz, failure_reason text, source text, created_at timestamptz,
    updated_at timestamptz, metadata jsonb, acted_by text, series_id uuid
) LANGUAGE plpgsql AS $$
DECLARE
    cap integer;
    range tstzrange := tstzrange(p_start, p_end, '[)');
    left_out record;
    short record;
    oldest uuid[];
BEGIN
    SELECT r.capacity INTO cap FROM resources r WHERE r.id = p_resource;
    IF cap = 1 THEN
        RETURN QUERY SELECT * FROM reservation_expire_lapsed(ARRAY(
            SELECT b.id FROM reservations b
            WHERE b.resource_id = p_resource AND b.status = 'HELD' AND b.expires_at <= p_now
              AND b.period && range AND b.id IS DISTINCT FROM p_except), p_now);
        RETURN;
    END IF;
    SELECT x.period, x.quantity INTO left_out FROM reservations x
    WHERE x.id = p_except AND x.resource_id = p_resource AND x.status IN ('HELD', 'CONFIRMING', 'CONFIRMED');
    LOOP
        -- Each statement sees the pieces as the write-downs before it lowered them.
        SELECT s.during, s.shortfall INTO short
        FROM (SELECT l.during,
                     l.load - CASE WHEN l.during && left_out.period THEN left_out.quantity ELSE 0 END
                     + p_quantity - cap AS shortfall
              FROM resource_load l
              WHERE l.resource_id = p_resource AND l.during && range) s
        WHERE s.shortfall > 0
        ORDER BY s.during LIMIT 1;
        EXIT WHEN NOT FOUND;
        -- Planned afresh (EXECUTE), with the clock's value, as reservation_load's check: a
        -- plan kept for any time reads every booking of the range by the period's index.
        -- Among holds that lapsed at the same instant, any will do.
        EXECUTE 'SELECT array_agg(o.id) FROM ('
                '    SELECT b.id, sum(b.quantity) OVER (ORDER BY b.expires_at, b.id) - b.quantity AS before FROM ('
                '        SELECT h.id, h.quantity, h.expires_at FROM reservations h'
                '        WHERE h.resource_id = $1 AND h.status = ''HELD'' AND h.resource_capacity IS DISTINCT FROM 1'
                '          AND h.expires_at <= $2 AND h.period && $3 AND h.id IS DISTINCT FROM $5'
                '        ORDER BY h.expires_at LIMIT $4) b) o '
                'WHERE o.before < $4'
        INTO oldest USING p_resource, p_now, short.during, short.shortfall, p_except;
        EXIT WHEN oldest IS NULL;
        RETURN QUERY SELECT * FROM reservation_expire_lapsed(oldest, p_now);
    END LOOP;
END
$$;
