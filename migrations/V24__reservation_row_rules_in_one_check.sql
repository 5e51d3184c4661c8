-- The reservation row's five rules that compare its columns, as one check (issue 13).
--
-- V23 made the single-column lists domains, whose checks PostgreSQL reads once per
-- backend. The five rules below compare columns with each other, so they cannot be
-- domains, and as table checks each was read back from its stored node tree, planned
-- and compiled again for every statement that writes a reservation row: about 106 k
-- instructions of a hold's 907 k (`scripts/hold-instructions`, dropping them).
--
-- Here they are one check that hands the whole row (one small node) to a PL/pgSQL
-- function. PL/pgSQL compiles the function once per backend and keeps its expressions'
-- plans, so a row costs the call and the comparisons: 843 k per hold against 907 k
-- (-7 %); a statement that updates one reservation is spared the same (not measured).
-- Measured the same way and not kept: the function over nine columns instead of the
-- row (874 k, with one IF per rule or one for all: the nine arguments are a node tree
-- of their own to read back).
--
-- A row that breaks a rule is refused as before: SQLSTATE 23514 (check_violation)
-- under the rule's own constraint name, which the function raises; PostgreSQL's own
-- check (`reservations_row_valid`) never fails, since the function returns true or
-- raises. The function takes the row type, so a column added to `reservations` later
-- needs no change here.
CREATE FUNCTION reservation_row_valid(r reservations) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    -- A table check passes unless its expression is false (NULL passes), so each rule
    -- is read the same way: IS NOT FALSE.
    IF (r.starts_at < r.ends_at) IS NOT FALSE
       AND (r.quantity >= 1 AND r.quantity <= r.resource_capacity) IS NOT FALSE
       AND (r.status <> 'HELD' OR r.expires_at IS NOT NULL) IS NOT FALSE
       AND ((r.status = 'FAILED') = (r.failure_reason IS NOT NULL)) IS NOT FALSE
       AND (r.buffered @> r.period) IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- Only a refused row gets here: name the rule it breaks, the first by name when it
    -- breaks more than one, as PostgreSQL checks a table's constraints in name order.
    IF NOT (r.buffered @> r.period) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'reservations',
            CONSTRAINT = 'reservations_buffered_holds_period', DETAIL = format('Failing row contains %s.', r),
            MESSAGE = 'new row for relation "reservations" violates check constraint "reservations_buffered_holds_period"';
    END IF;
    IF NOT ((r.status = 'FAILED') = (r.failure_reason IS NOT NULL)) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'reservations',
            CONSTRAINT = 'reservations_failure_reason', DETAIL = format('Failing row contains %s.', r),
            MESSAGE = 'new row for relation "reservations" violates check constraint "reservations_failure_reason"';
    END IF;
    IF NOT (r.status <> 'HELD' OR r.expires_at IS NOT NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'reservations',
            CONSTRAINT = 'reservations_held_expires', DETAIL = format('Failing row contains %s.', r),
            MESSAGE = 'new row for relation "reservations" violates check constraint "reservations_held_expires"';
    END IF;
    IF NOT (r.starts_at < r.ends_at) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'reservations',
            CONSTRAINT = 'reservations_period_ordered', DETAIL = format('Failing row contains %s.', r),
            MESSAGE = 'new row for relation "reservations" violates check constraint "reservations_period_ordered"';
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'reservations',
        CONSTRAINT = 'reservations_quantity_fits', DETAIL = format('Failing row contains %s.', r),
        MESSAGE = 'new row for relation "reservations" violates check constraint "reservations_quantity_fits"';
END
$$;

-- Added valid: the stored rows are checked once, under the lock the drops take anyway
-- (a migration is one transaction, so NOT VALID and a later VALIDATE would not let
-- writes in between).
ALTER TABLE reservations
    DROP CONSTRAINT reservations_period_ordered,
    DROP CONSTRAINT reservations_quantity_fits,
    DROP CONSTRAINT reservations_held_expires,
    DROP CONSTRAINT reservations_failure_reason,
    DROP CONSTRAINT reservations_buffered_holds_period,
    ADD CONSTRAINT reservations_row_valid CHECK (reservation_row_valid(reservations));
