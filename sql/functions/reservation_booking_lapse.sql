-- A booking of several is written down whole. When a statement writes down the lapse of
-- one of its rows (HELD to EXPIRED), this trigger writes down every other row of the
-- booking that is still HELD, in the same transaction, and records the booking's one
-- `reservation.expired` event when the lead is among them (a statement that writes the
-- lead down itself records the event). So no snapshot shows a booking with some items
-- live and others written down, whichever path found the lapse: another principal's
-- hold on one item's resource, or the sweep of one resource.
--
-- Every write-down runs under the lock of its row's resource, not of the siblings'.
-- Writing a lapse down only lowers a load, so it needs no resource lock; every path
-- that raises a load, or confirms or extends this booking, takes the locks of the
-- resources it touches (for a whole booking: every item's), and so never runs beside
-- this. Every write-down of lapses (reservation_expire_lapsed) locks the leads of the
-- bookings it touches first, in id order, as every operation on a booking does
-- (lock_owned): so the transaction that fired this holds the lead, a second write-down
-- of the same booking from another resource waits for it, and the siblings' rows are
-- free to take.
--
-- The siblings' resources are owed a hand-over to their waitlists that needs their
-- locks: each range is recorded in handovers_owed, and the sweep offers it.
CREATE OR REPLACE FUNCTION reservation_booking_lapse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH siblings AS (
        SELECT r.id FROM reservations r
        WHERE r.booking_id = NEW.booking_id AND r.id <> NEW.id AND r.status = 'HELD'
        ORDER BY r.item
        FOR UPDATE OF r
    ), exp AS (
        UPDATE reservations r SET status = 'EXPIRED', updated_at = NEW.updated_at, acted_by = NULL
        FROM siblings s
        WHERE r.id = s.id AND r.status = 'HELD'
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.source,
                  r.failure_reason, r.metadata, r.acted_by, r.series_id, r.booking_id
    ), owed AS (
        INSERT INTO handovers_owed (resource_id, starts_at, ends_at, owed_at)
        SELECT DISTINCT exp.resource_id, exp.starts_at, exp.ends_at, NEW.updated_at
        FROM exp WHERE exp.resource_id <> NEW.resource_id
    )
    INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
    SELECT 'reservation.expired', exp.id,
           reservation_event(exp.id, exp.resource_id, exp.owner, exp.starts_at, exp.ends_at, exp.quantity,
                             exp.status, exp.source, exp.failure_reason, exp.metadata, exp.acted_by,
                             reservation_items(exp.id, exp.resource_id, exp.quantity))
           || jsonb_strip_nulls(jsonb_build_object('series_id', exp.series_id)),
           NEW.updated_at, NEW.updated_at
    FROM exp WHERE exp.id = exp.booking_id;
    RETURN NULL;
END
$$;

-- Not for the trigger's own write-downs (pg_trigger_depth): their siblings are the ones
-- it is writing down already.
CREATE OR REPLACE TRIGGER reservations_booking_lapse AFTER UPDATE OF status ON reservations
    FOR EACH ROW
    WHEN (OLD.status = 'HELD' AND NEW.status = 'EXPIRED' AND NEW.booking_id IS NOT NULL AND pg_trigger_depth() = 0)
    EXECUTE FUNCTION reservation_booking_lapse();
