-- Writes down the lapse of the holds that overlap the new reservation, then inserts it
-- only if its quantity fits under the capacity at every instant of its range. Returns
-- the inserted row (inserted = true) and the holds it expired (inserted = false). The
-- expiries it writes are the service's own acts (acted_by NULL).
--
-- The expiry comes first because the exclusion constraint cannot know the time: a
-- lapsed hold still counts for it until its status says so. Sub-statements of one WITH
-- run in no fixed order, so the insert reads a count of the expired rows (gate): that
-- data dependency makes PostgreSQL finish the expiry before it inserts. RETURN QUERY
-- wants exactly the declared `text` and `jsonb`, which the domain columns are not,
-- hence the casts in the RETURNING lists.
--
-- An item of a booking of several (p_booking_id, the lead row's id, p_item and p_pool_id
-- set) records no event: the booking records one, once all its items are in. Lapsed
-- items of other bookings expire without events of their own; their lead's expiry is
-- the event.
--
-- Call it only while holding the resource lock, in a statement after the one that took
-- it, so that its snapshot includes every committed competitor.
CREATE OR REPLACE FUNCTION reservation_insert_if_fits(
    p_id uuid, p_resource uuid, p_capacity integer, p_owner text, p_start timestamptz, p_end timestamptz,
    p_quantity integer, p_status text, p_expires_at timestamptz, p_failure_reason text, p_source text,
    p_now timestamptz, p_metadata jsonb, p_acted_by text, p_booking_id uuid, p_item smallint, p_pool_id uuid
) RETURNS TABLE (
    inserted boolean, id uuid, resource_id uuid, owner text, starts_at timestamptz, ends_at timestamptz,
    quantity integer, status text, expires_at timestamptz, failure_reason text, source text,
    created_at timestamptz, updated_at timestamptz, metadata jsonb, acted_by text
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH leads AS (
        -- The leads of the bookings of several it writes down, locked first, in id
        -- order (a booking's lead before its items): see lapse.rs, expire_lapsed_where.
        SELECT l.id FROM reservations l
        WHERE l.id IN (SELECT b.booking_id FROM reservations b
                       WHERE b.resource_id = p_resource AND b.status = 'HELD' AND b.expires_at <= p_now
                         AND b.period && tstzrange(p_start, p_end, '[)') AND b.booking_id IS NOT NULL)
        ORDER BY l.id
        FOR UPDATE OF l
    ), exp AS (
        UPDATE reservations r SET status = 'EXPIRED', updated_at = p_now, acted_by = NULL
        WHERE r.resource_id = p_resource AND r.status = 'HELD' AND r.expires_at <= p_now
          AND r.period && tstzrange(p_start, p_end, '[)')
          AND (SELECT count(*) FROM leads) >= 0
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status::text, r.expires_at,
                  r.failure_reason::text, r.source::text, r.created_at, r.updated_at, r.metadata::jsonb, r.acted_by
    ), exp_ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT 'reservation.expired', exp.id,
               reservation_event(exp.id, exp.resource_id, exp.owner, exp.starts_at, exp.ends_at, exp.quantity,
                                 exp.status, exp.source, exp.failure_reason, exp.metadata, exp.acted_by,
                                 reservation_items(exp.id, exp.resource_id, exp.quantity))
               || reservation_series_field(exp.id),
               p_now, p_now
        FROM exp
        WHERE NOT reservation_is_item(exp.id)
        RETURNING 1
    ), gate AS (
        SELECT count(*) AS expired FROM exp
    ), ins AS (
        INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity,
                                       status, expires_at, failure_reason, source, created_at, updated_at,
                                       metadata, acted_by, booking_id, item, pool_id)
        SELECT p_id, p_resource, p_capacity, p_owner, p_start, p_end, p_quantity, p_status, p_expires_at,
               p_failure_reason, p_source, p_now, p_now, p_metadata, p_acted_by, p_booking_id, p_item, p_pool_id
        FROM gate
        WHERE (SELECT l.peak FROM reservation_load(p_resource, p_start, p_end, p_now) l) + p_quantity <= p_capacity
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status::text, r.expires_at,
                  r.failure_reason::text, r.source::text, r.created_at, r.updated_at, r.metadata::jsonb, r.acted_by
    ), ev AS (
        -- A CONFIRMING booking records its event when the system of record settles it.
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT CASE ins.status WHEN 'HELD' THEN 'reservation.held' ELSE 'reservation.confirmed' END, ins.id,
               reservation_event(ins.id, ins.resource_id, ins.owner, ins.starts_at, ins.ends_at, ins.quantity,
                                 ins.status, ins.source, ins.failure_reason, ins.metadata, ins.acted_by, NULL),
               p_now, p_now
        -- After the expiries' events (exp_ev), so the log reads in the order things happened.
        FROM ins, (SELECT count(*) FROM exp_ev) AS expiries_logged
        WHERE ins.status IN ('HELD', 'CONFIRMED') AND p_booking_id IS NULL
    )
    SELECT true, ins.* FROM ins
    UNION ALL
    SELECT false, exp.* FROM exp;
END
$$;
