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
-- plans, so a row costs the call and the comparisons: 846 k per hold against 907 k
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
DECLARE
    broken text;
BEGIN
    -- A table check fails only when its expression is false (NULL passes), hence IS
    -- FALSE. The rules go in name order, the order in which PostgreSQL checks a table's
    -- constraints, so a row that breaks two is refused under the name it was before.
    IF (r.buffered @> r.period) IS FALSE THEN
        broken := 'reservations_buffered_holds_period';
    ELSIF ((r.status = 'FAILED') = (r.failure_reason IS NOT NULL)) IS FALSE THEN
        broken := 'reservations_failure_reason';
    ELSIF (r.status <> 'HELD' OR r.expires_at IS NOT NULL) IS FALSE THEN
        broken := 'reservations_held_expires';
    ELSIF (r.starts_at < r.ends_at) IS FALSE THEN
        broken := 'reservations_period_ordered';
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
