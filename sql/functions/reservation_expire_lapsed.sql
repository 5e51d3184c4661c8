-- Writes down the holds among `p_ids` that are still held and lapsed by `p_now`, as the
-- service's own act (acted_by NULL), with their `reservation.expired` events, and
-- returns them. The one home of a lapse's write-down: the lapse statements (a range of
-- a resource, the sweep's batch), the conditional insert and the conditional move pick
-- the rows, and this writes them.
--
-- The leads of the bookings of several it touches are locked first, in id order, in a
-- statement of their own (a booking's lead before its items, as lock_owned takes
-- them): two write-downs of one booking from two of its resources wait for each other,
-- and the first writes the whole booking down (the trigger reservation_booking_lapse
-- takes the other items) before the second looks; the update's snapshot, taken after
-- those locks, passes over what the first wrote. Items other than a lead record no
-- event: the lead's event carries every item.
--
-- Call it under the lock of every resource whose rows `p_ids` names.
CREATE OR REPLACE FUNCTION reservation_expire_lapsed(p_ids uuid[], p_now timestamptz)
RETURNS TABLE (
    id uuid, resource_id uuid, owner text, starts_at timestamptz, ends_at timestamptz, quantity integer,
    status text, expires_at timestamptz, failure_reason text, source text, created_at timestamptz,
    updated_at timestamptz, metadata jsonb, acted_by text, series_id uuid
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    IF cardinality(p_ids) = 0 THEN
        RETURN;
    END IF;
    PERFORM 1 FROM reservations l
    WHERE l.id IN (SELECT b.booking_id FROM reservations b WHERE b.id = ANY (p_ids) AND b.booking_id IS NOT NULL)
    ORDER BY l.id
    FOR UPDATE OF l;
    RETURN QUERY
    WITH exp AS (
        UPDATE reservations r SET status = 'EXPIRED', updated_at = p_now, acted_by = NULL
        WHERE r.id = ANY (p_ids) AND r.status = 'HELD' AND r.expires_at <= p_now
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status::text, r.expires_at,
                  r.failure_reason::text, r.source::text, r.created_at, r.updated_at, r.metadata::jsonb, r.acted_by,
                  r.series_id, r.booking_id
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT 'reservation.expired', exp.id,
               reservation_event(exp.id, exp.resource_id, exp.owner, exp.starts_at, exp.ends_at, exp.quantity,
                                 exp.status, exp.source, exp.failure_reason, exp.metadata, exp.acted_by,
                                 reservation_items(exp.id, exp.resource_id, exp.quantity))
               || jsonb_strip_nulls(jsonb_build_object('series_id', exp.series_id)),
               p_now, p_now
        FROM exp
        WHERE exp.booking_id IS NULL OR exp.booking_id = exp.id
    )
    SELECT exp.id, exp.resource_id, exp.owner, exp.starts_at, exp.ends_at, exp.quantity, exp.status, exp.expires_at,
           exp.failure_reason, exp.source, exp.created_at, exp.updated_at, exp.metadata, exp.acted_by, exp.series_id
    FROM exp;
END
$$;
