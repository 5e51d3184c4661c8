-- The reservation's lists and its metadata's shape as domains (issue 13).
--
-- PostgreSQL reads a table's check constraints from their stored node trees and plans
-- them again for every statement that writes a row; a list's array constant is read
-- back byte by byte. A domain's checks are read once per backend, into the type cache
-- (V21 did the same for the outbox). Measured in one backend under callgrind
-- (`scripts/hold-instructions`, 1,000 committed holds on 200 capacity-1 resources):
-- the reservation's eight checks cost 210 k of a hold's 990 k instructions, of which
-- `stringToNode` alone 161 k; the four below, as domains, save 87 k (-9 %), keyed or
-- not.
--
-- `failure_reason`'s pairing with `status` stays a table check, under its name; the
-- list of reasons moves into the domain. Constraint names are kept, so a violation
-- names the same constraint as before.
--
-- A domain changes what a client sees of a bound parameter: `SET status = $1` now
-- asks for a `reservation_status`, which tokio-postgres will not encode from a
-- `&str`. The service's statements that assign these columns from parameters cast
-- them (`$1::text`), which works before this migration and after it; code older than
-- that cast must not run against it, so deploy before migrating.
CREATE DOMAIN reservation_status AS text
    CONSTRAINT reservations_status_known
    CHECK (VALUE = ANY ('{HELD,CONFIRMING,CONFIRMED,RELEASED,EXPIRED,CANCELLED,FAILED}'::text[]));
CREATE DOMAIN reservation_source AS text
    CONSTRAINT reservations_source_known CHECK (VALUE = ANY ('{request,waitlist_offer}'::text[]));
CREATE DOMAIN reservation_failure_reason AS text
    CONSTRAINT reservations_failure_reason_known CHECK (VALUE = ANY ('{race,auth,upstream}'::text[]));
CREATE DOMAIN reservation_metadata AS jsonb
    CONSTRAINT reservations_metadata_object CHECK (jsonb_typeof(VALUE) = 'object');

ALTER TABLE reservations
    DROP CONSTRAINT reservations_status_known,
    DROP CONSTRAINT reservations_source_known,
    DROP CONSTRAINT reservations_failure_reason,
    DROP CONSTRAINT reservations_metadata_object,
    ALTER COLUMN status TYPE reservation_status,
    ALTER COLUMN source TYPE reservation_source,
    ALTER COLUMN failure_reason TYPE reservation_failure_reason,
    ALTER COLUMN metadata TYPE reservation_metadata,
    ADD CONSTRAINT reservations_failure_reason CHECK ((status = 'FAILED') = (failure_reason IS NOT NULL));

-- V9's conditional insert and move, unchanged but for their RETURNING lists: RETURN
-- QUERY wants exactly the declared `text` and `jsonb`, which a domain column is not.
CREATE OR REPLACE FUNCTION reservation_insert_if_fits(
    p_id uuid, p_resource uuid, p_capacity integer, p_owner text, p_start timestamptz, p_end timestamptz,
    p_quantity integer, p_status text, p_expires_at timestamptz, p_failure_reason text, p_source text,
    p_now timestamptz, p_metadata jsonb, p_acted_by text
) RETURNS TABLE (
    inserted boolean, id uuid, resource_id uuid, owner text, starts_at timestamptz, ends_at timestamptz,
    quantity integer, status text, expires_at timestamptz, failure_reason text, source text,
    created_at timestamptz, updated_at timestamptz, metadata jsonb, acted_by text
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH exp AS (
        UPDATE reservations r SET status = 'EXPIRED', updated_at = p_now, acted_by = NULL
        WHERE r.resource_id = p_resource AND r.status = 'HELD' AND r.expires_at <= p_now
          AND r.period && tstzrange(p_start, p_end, '[)')
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status::text, r.expires_at,
                  r.failure_reason::text, r.source::text, r.created_at, r.updated_at, r.metadata::jsonb, r.acted_by
    ), exp_ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT 'reservation.expired', exp.id,
               reservation_event(exp.id, exp.resource_id, exp.owner, exp.starts_at, exp.ends_at, exp.quantity,
                                 exp.status, exp.source, exp.failure_reason, exp.metadata, exp.acted_by),
               p_now, p_now
        FROM exp
        RETURNING 1
    ), gate AS (
        SELECT count(*) AS expired FROM exp
    ), ins AS (
        INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity,
                                       status, expires_at, failure_reason, source, created_at, updated_at,
                                       metadata, acted_by)
        SELECT p_id, p_resource, p_capacity, p_owner, p_start, p_end, p_quantity, p_status, p_expires_at,
               p_failure_reason, p_source, p_now, p_now, p_metadata, p_acted_by
        FROM gate
        WHERE (SELECT l.peak FROM reservation_load(p_resource, p_start, p_end, p_now) l) + p_quantity <= p_capacity
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status::text, r.expires_at,
                  r.failure_reason::text, r.source::text, r.created_at, r.updated_at, r.metadata::jsonb, r.acted_by
    ), ev AS (
        -- A CONFIRMING booking records its event when the system of record settles it.
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT CASE ins.status WHEN 'HELD' THEN 'reservation.held' ELSE 'reservation.confirmed' END, ins.id,
               reservation_event(ins.id, ins.resource_id, ins.owner, ins.starts_at, ins.ends_at, ins.quantity,
                                 ins.status, ins.source, ins.failure_reason, ins.metadata, ins.acted_by),
               p_now, p_now
        -- After the expiries' events (exp_ev), so the log reads in the order things happened.
        FROM ins, (SELECT count(*) FROM exp_ev) AS expiries_logged WHERE ins.status IN ('HELD', 'CONFIRMED')
    )
    SELECT true, ins.* FROM ins
    UNION ALL
    SELECT false, exp.* FROM exp;
END
$$;

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
    RETURN QUERY
    WITH exp AS (
        UPDATE reservations r SET status = 'EXPIRED', updated_at = p_now, acted_by = NULL
        WHERE r.resource_id = p_resource AND r.status = 'HELD' AND r.expires_at <= p_now
          AND r.period && tstzrange(p_start, p_end, '[)') AND r.id <> p_id
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status::text, r.expires_at,
                  r.failure_reason::text, r.source::text, r.created_at, r.updated_at, r.metadata::jsonb, r.acted_by
    ), exp_ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT 'reservation.expired', exp.id,
               reservation_event(exp.id, exp.resource_id, exp.owner, exp.starts_at, exp.ends_at, exp.quantity,
                                 exp.status, exp.source, exp.failure_reason, exp.metadata, exp.acted_by),
               p_now, p_now
        FROM exp
        RETURNING 1
    ), gate AS (
        SELECT count(*) AS expired FROM exp
    ), upd AS (
        UPDATE reservations r
        SET starts_at = p_start, ends_at = p_end, quantity = p_quantity, metadata = p_metadata,
            acted_by = p_acted_by, updated_at = p_now
        FROM gate
        WHERE r.id = p_id
          AND (SELECT l.peak FROM reservation_load(p_resource, p_start, p_end, p_now, p_id) l) + p_quantity
              <= p_capacity
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status::text, r.expires_at,
                  r.failure_reason::text, r.source::text, r.created_at, r.updated_at, r.metadata::jsonb, r.acted_by
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT p_event, upd.id,
               reservation_event(upd.id, upd.resource_id, upd.owner, upd.starts_at, upd.ends_at, upd.quantity,
                                 upd.status, upd.source, upd.failure_reason, upd.metadata, upd.acted_by),
               p_now, p_now
        FROM upd, (SELECT count(*) FROM exp_ev) AS expiries_logged
    )
    SELECT true, upd.* FROM upd
    UNION ALL
    SELECT false, exp.* FROM exp;
END
$$;
