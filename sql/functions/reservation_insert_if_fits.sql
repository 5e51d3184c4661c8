-- Writes down the lapse of the holds in the new reservation's way (on a single unit,
-- every one over its range; see reservation_expire_in_way), then inserts it
-- only if its quantity fits under the capacity at every instant of its range. Returns
-- the inserted row (inserted = true) and the holds it expired (inserted = false). The
-- expiries it writes are the service's own acts (acted_by NULL).
--
-- The expiry comes first (reservation_expire_lapsed) because the exclusion constraint
-- cannot know the time: a lapsed hold still counts for it until its status says so.
-- RETURN QUERY wants exactly the declared `text` and `jsonb`, which the domain columns
-- are not, hence the casts in the RETURNING list.
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
    -- The lapsed holds in the way first, in a statement of their own, so that the
    -- insert's snapshot is taken after them (and after the locks of their bookings'
    -- leads): their capacity is free for the load and the exclusion constraint.
    RETURN QUERY
    SELECT false, e.id, e.resource_id, e.owner, e.starts_at, e.ends_at, e.quantity, e.status, e.expires_at,
           e.failure_reason, e.source, e.created_at, e.updated_at, e.metadata, e.acted_by
    FROM reservation_expire_in_way(p_resource, p_start, p_end, p_quantity, p_now) e;
    RETURN QUERY
    WITH ins AS (
        INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity,
                                       status, expires_at, failure_reason, source, created_at, updated_at,
                                       metadata, acted_by, booking_id, item, pool_id)
        SELECT p_id, p_resource, p_capacity, p_owner, p_start, p_end, p_quantity, p_status, p_expires_at,
               p_failure_reason, p_source, p_now, p_now, p_metadata, p_acted_by, p_booking_id, p_item, p_pool_id
        WHERE (SELECT l.peak FROM reservation_load(p_resource, p_start, p_end, p_now, NULL, p_quantity) l)
              + p_quantity <= p_capacity
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status::text, r.expires_at,
                  r.failure_reason::text, r.source::text, r.created_at, r.updated_at, r.metadata::jsonb, r.acted_by
    ), ev AS (
        -- A CONFIRMING booking records its event when the system of record settles it.
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT CASE ins.status WHEN 'HELD' THEN 'reservation.held' ELSE 'reservation.confirmed' END, ins.id,
               reservation_event(ins.id, ins.resource_id, ins.owner, ins.starts_at, ins.ends_at, ins.quantity,
                                 ins.status, ins.source, ins.failure_reason, ins.metadata, ins.acted_by, NULL),
               p_now, p_now
        FROM ins
        WHERE ins.status IN ('HELD', 'CONFIRMED') AND p_booking_id IS NULL
    )
    SELECT true, ins.* FROM ins;
END
$$;
