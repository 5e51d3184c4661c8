-- The reservation row's rules that compare its columns, behind the table's one check
-- `reservations_row_valid` (see the baseline migration for why one check). A row that
-- breaks a rule is refused with SQLSTATE 23514 (check_violation) under the rule's own
-- constraint name, which the function raises; the table's check itself never fails,
-- since the function returns true or raises. It takes the row type, so a column added
-- to `reservations` needs no change here.
CREATE OR REPLACE FUNCTION reservation_row_valid(r reservations) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    broken text;
BEGIN
    -- A table check fails only when its expression is false (NULL passes), hence IS
    -- FALSE. The rules go in name order, the order in which PostgreSQL checks a table's
    -- constraints, so a row that breaks two is refused under the first name.
    IF (r.buffered @> r.period) IS FALSE THEN
        broken := 'reservations_buffered_holds_period';
    ELSIF ((r.status = 'FAILED') = (r.failure_reason IS NOT NULL)) IS FALSE THEN
        broken := 'reservations_failure_reason';
    ELSIF (r.status <> 'HELD' OR r.expires_at IS NOT NULL) IS FALSE THEN
        broken := 'reservations_held_expires';
    ELSIF ((r.booking_id IS NULL) = (r.item IS NULL)) IS FALSE THEN
        broken := 'reservations_item_of_booking';
    ELSIF (r.starts_at < r.ends_at) IS FALSE THEN
        broken := 'reservations_period_ordered';
    ELSIF (r.pool_id IS NULL OR r.booking_id IS NOT NULL) IS FALSE THEN
        broken := 'reservations_pool_in_booking';
    ELSIF (r.quantity >= 1 AND r.quantity <= r.resource_capacity) IS FALSE THEN
        broken := 'reservations_quantity_fits';
    ELSE
        RETURN true;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'reservations', CONSTRAINT = broken,
        MESSAGE = format('new row for relation "reservations" violates check constraint "%s"', broken),
        DETAIL = format('Failing row contains %s.', r);
END
$$;
