-- Moves a reservation to [p_start, p_end) with p_quantity (and p_metadata), only if it
-- fits under the capacity at every instant beside everything else (the reservation
-- itself left out: 10:00-11:00 may move to 10:30-11:30), and records p_event
-- (reservation.rescheduled, or reservation.updated when only the metadata changed),
-- counting the moves in `reschedules`.
-- Like the insert, it first writes down the lapsed holds in the way of the new range
-- (reservation_expire_in_way), in a statement before the update. Returns the moved row (moved = true, absent when it
-- does not fit) and the holds it expired (moved = false). Call it under the resource
-- lock, holding the reservation's lock.
CREATE OR REPLACE FUNCTION reservation_move_if_fits(
    p_id uuid, p_resource uuid, p_capacity integer, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_now timestamptz, p_metadata jsonb, p_acted_by text, p_event text
) RETURNS TABLE (
    moved boolean, id uuid, resource_id uuid, owner text, starts_at timestamptz, ends_at timestamptz,
    quantity integer, status text, expires_at timestamptz, failure_reason text, source text,
    created_at timestamptz, updated_at timestamptz, metadata jsonb, acted_by text
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    -- The lapsed holds in the way first, in a statement of their own (see
    -- reservation_insert_if_fits).
    RETURN QUERY
    SELECT false, e.id, e.resource_id, e.owner, e.starts_at, e.ends_at, e.quantity, e.status, e.expires_at,
           e.failure_reason, e.source, e.created_at, e.updated_at, e.metadata, e.acted_by
    FROM reservation_expire_in_way(p_resource, p_start, p_end, p_quantity, p_now, p_id) e;
    RETURN QUERY
    WITH upd AS (
        UPDATE reservations r
        SET starts_at = p_start, ends_at = p_end, quantity = p_quantity, metadata = p_metadata,
            acted_by = p_acted_by, updated_at = p_now,
            reschedules = r.reschedules + CASE WHEN p_event = 'reservation.rescheduled' THEN 1 ELSE 0 END
        WHERE r.id = p_id
          AND (SELECT l.peak FROM reservation_load(p_resource, p_start, p_end, p_now, p_id, p_quantity) l) + p_quantity
              <= p_capacity
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status::text, r.expires_at,
                  r.failure_reason::text, r.source::text, r.created_at, r.updated_at, r.metadata::jsonb, r.acted_by
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT p_event, upd.id,
               reservation_event(upd.id, upd.resource_id, upd.owner, upd.starts_at, upd.ends_at, upd.quantity,
                                 upd.status, upd.source, upd.failure_reason, upd.metadata, upd.acted_by,
                                 reservation_items(upd.id, upd.resource_id, upd.quantity))
               || reservation_series_field(upd.id),
               p_now, p_now
        FROM upd
        -- An item of a booking of several: its lead's move is the booking's event.
        WHERE NOT reservation_is_item(upd.id)
    )
    SELECT true, upd.* FROM upd;
END
$$;
