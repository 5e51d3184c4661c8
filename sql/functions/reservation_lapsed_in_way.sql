-- The lapsed holds that a claim of p_quantity over [p_start, p_end) on p_resource
-- writes down before it is judged (p_except: the booking a move leaves out). The
-- caller writes them down (reservation_expire_lapsed) and hands their capacity over;
-- the sweep writes down the rest.
--
-- On a single unit, every lapsed hold over the range: the exclusion constraint counts
-- each until its status says it lapsed. They cannot overlap one another, so the range
-- bounds their number.
--
-- On capacity N, none while the load timeline leaves room for the claim (its pieces
-- count lapsed holds, so their peak is never below the live one). Otherwise the oldest
-- lapsed holds over the range whose quantities reach p_quantity: at most p_quantity
-- rows, however many lapsed (a sold-out event whose holds all lapsed at once), read in
-- order from the resource's expiry index. Where the timeline's peak lies elsewhere in the range,
-- reservation_load judges by the bookings, which leave lapsed holds out, so what stays
-- unwritten never refuses a claim that fits.
CREATE OR REPLACE FUNCTION reservation_lapsed_in_way(p_resource uuid, p_start timestamptz, p_end timestamptz,
                                                     p_quantity integer, p_now timestamptz,
                                                     p_except uuid DEFAULT NULL) RETURNS uuid[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    cap integer;
    oldest uuid[];
BEGIN
    SELECT r.capacity INTO cap FROM resources r WHERE r.id = p_resource;
    IF cap = 1 THEN
        RETURN ARRAY(
            SELECT b.id FROM reservations b
            WHERE b.resource_id = p_resource AND b.status = 'HELD' AND b.expires_at <= p_now
              AND b.period && tstzrange(p_start, p_end, '[)') AND b.id IS DISTINCT FROM p_except);
    END IF;
    -- The timeline's peak, counting the left-out booking too: an overestimate writes
    -- down holds that have lapsed anyway, never one that counts.
    IF (SELECT coalesce(max(l.load), 0) FROM resource_load l
        WHERE l.resource_id = p_resource AND l.during && tstzrange(p_start, p_end, '[)')) + p_quantity
       <= cap THEN
        RETURN '{}';
    END IF;
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
    INTO oldest USING p_resource, p_now, tstzrange(p_start, p_end, '[)'), p_quantity, p_except;
    RETURN coalesce(oldest, '{}');
END
$$;
