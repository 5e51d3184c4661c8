-- The hold's event id from its caller, and its row as a named type (issue 13).
--
-- Four changes to V25's hold, each priced with `scripts/hold-instructions` (one backend
-- under callgrind; its loops now pass an event id, as the server does):
--
-- 1. The event's id is a parameter, `p_event_id`, last and defaulting to NULL. The
--    server makes a UUIDv7 for it as it does for the reservation; the outbox's default,
--    `uuidv7()` in SQL (V5), cost 34 k instructions of a hold (8.5 k of strong random
--    bytes, the rest the bytes' shuffling). A caller from before V27 passes none and
--    gets `uuidv7()` as before.
-- 2. A keyed hold's claim records the reservation's id as its owner token instead of
--    a `gen_random_uuid()`: nothing reads the token of a claim stored as completed (it
--    told apart the claims of the older scheme, which committed them on their own),
--    and the id is as unique.
-- 3. The capacity-1 insert names its arbiter, `ON CONFLICT ON CONSTRAINT
--    reservations_single_unit_buffers_apart`: the primary key's probe before the insert
--    goes. An id already taken now raises unique_violation instead of reading as a
--    taken range; ids are fresh UUIDv7.
-- 4. The function returns `SETOF reservation_hold_result`, a row type of its own, with
--    the same sixteen columns: PostgreSQL reads a named type's descriptor from its type
--    cache, where a function that `RETURNS TABLE` has it built from its declaration on
--    every call (12 k instructions a call, measured on a bare function of each kind).
--
-- With the script's 1,000 operations a loop: a capacity-1 hold 803 k -> 769 k
-- instructions, a keyed one 1,186 k -> 1,143 k, a losing one (the range taken) 569 k ->
-- 554 k; the loops now spend 8.5 k of each on the event id the server sends, so the
-- database's own work fell by about 43 k, 52 k and 24 k.
--
-- Priced and not kept: a plain insert in a block that catches exclusion_violation,
-- instead of `ON CONFLICT` (the constraint checked once after the insert, instead of
-- before and after: 817 k -> 759 k with 300 operations a loop, but a losing hold
-- 605 k -> 744 k, and a loser would write the row, its index entries and their WAL
-- before the constraint refused it, where it now writes nothing); the outbox payload
-- as `json` built by `json_build_object` (-10 k, for a change of every event's
-- column).
--
-- Migrate, then deploy: the functions since V27 name `p_event_id`, which V26's
-- function does not have; V27's takes the calls of the code before it (nine or
-- nineteen arguments) and returns the same columns.

DROP FUNCTION reservation_hold(uuid, uuid, text, timestamptz, timestamptz, integer, boolean, timestamptz, jsonb, text,
                              text, text, text, bytea, timestamptz, text, smallint, jsonb, bytea);

-- The hold's one row, as a type of its own: a function that returns a named row type
-- gets its descriptor from the type cache, where one that `RETURNS TABLE` builds it
-- from its declaration on every call.
CREATE TYPE reservation_hold_result AS (
    outcome text, capacity integer, id uuid, resource_id uuid, owner text,
    starts_at timestamptz, ends_at timestamptz, quantity integer, status text, expires_at timestamptz,
    failure_reason text, source text, created_at timestamptz, updated_at timestamptz, metadata jsonb,
    acted_by text
);

CREATE FUNCTION reservation_hold(
    p_id uuid, p_resource uuid, p_owner text, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_confirm boolean, p_now timestamptz, p_metadata jsonb,
    p_principal text DEFAULT NULL, p_method text DEFAULT NULL, p_route text DEFAULT NULL, p_key text DEFAULT NULL,
    p_fingerprint bytea DEFAULT NULL, p_retain_until timestamptz DEFAULT NULL, p_wait text DEFAULT NULL,
    p_refused_status smallint DEFAULT NULL, p_refused_headers jsonb DEFAULT NULL, p_refused_body bytea DEFAULT NULL,
    p_event_id uuid DEFAULT NULL
) RETURNS SETOF reservation_hold_result LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    -- The row returned.
    o reservation_hold_result;
    -- The capacity-N path's seven columns of the resource; the capacity-1 path's TTL.
    res record;
    ttl integer;
    look record;
    range tstzrange := tstzrange(p_start, p_end, '[)');
    live_claims bigint;
    live_total bigint;
    any_lapsed boolean;
    fits boolean;
    new_status text := CASE WHEN p_confirm THEN 'CONFIRMED' ELSE 'HELD' END;
    new_expires_at timestamptz;
    session_timeout text;
    claimed boolean;
    expected_expiry jsonb;
    answered jsonb;
BEGIN
    IF p_event_id IS NULL THEN
        -- A caller from before V27.
        p_event_id := uuidv7();
    END IF;
    IF p_key IS NOT NULL THEN
        -- The claim, with the answer a hold most likely gives (V21, 3). Its owner
        -- token is the reservation's id (V27): nothing reads a completed claim's.
        session_timeout := current_setting('lock_timeout');
        PERFORM set_config('lock_timeout', p_wait, true);
        INSERT INTO idempotency_keys AS k (principal, method, route, key, fingerprint, state, owner_token,
                                           locked_until, response_status, response_reservation, created_at,
                                           expires_at)
        VALUES (p_principal, p_method, p_route, p_key, p_fingerprint, 'completed', p_id, p_now, 201,
                reservation_snapshot(
                    p_id, p_resource, p_owner, p_start, p_end, p_quantity,
                    CASE WHEN p_confirm THEN 'CONFIRMED' ELSE 'HELD' END,
                    CASE WHEN NOT p_confirm THEN p_now + make_interval(secs => (
                        SELECT r.hold_ttl_seconds FROM resources r WHERE r.id = p_resource)) END,
                    NULL, 'request', p_now, p_now, p_metadata, p_owner),
                p_now, p_retain_until)
        ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO UPDATE
            SET owner_token = EXCLUDED.owner_token, state = EXCLUDED.state, locked_until = EXCLUDED.locked_until,
                response_status = EXCLUDED.response_status, response_reservation = EXCLUDED.response_reservation
            WHERE k.state = 'processing' AND k.locked_until <= p_now AND k.fingerprint = EXCLUDED.fingerprint
        RETURNING k.response_reservation -> 'expires_at' INTO expected_expiry;
        claimed := FOUND;
        PERFORM set_config('lock_timeout', session_timeout, true);
        IF NOT claimed THEN
            -- A committed row: an answer to replay, another request's key, or a live
            -- claim of the older scheme. Nothing was written; the guard reads it.
            o.outcome := 'key_taken';
            RETURN NEXT o;
            RETURN;
        END IF;
    END IF;

    <<hold>>
    BEGIN
        -- Capacity 1: a shared lock, and the exclusion constraint as the judge. Only
        -- the TTL is read (V25).
        SELECT resources.hold_ttl_seconds INTO ttl FROM resources
        WHERE resources.id = p_resource AND resources.capacity = 1 AND resources.archived_at IS NULL
          AND resources.authority = 'local' AND NOT resources.has_calendar_rules
        FOR SHARE SKIP LOCKED;
        IF FOUND THEN
            o.capacity := 1;
            IF p_quantity > 1 THEN
                o.outcome := 'too_many';
                EXIT hold;
            END IF;
            -- No rules, so no buffers: `buffered` is the period itself.
            INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity,
                                           status, expires_at, failure_reason, source, created_at, updated_at, metadata,
                                           acted_by, buffered)
            VALUES (p_id, p_resource, 1, p_owner, p_start, p_end, p_quantity, new_status,
                    CASE WHEN p_confirm THEN NULL ELSE p_now + make_interval(secs => ttl) END, NULL,
                    'request', p_now, p_now, p_metadata, p_owner, range)
            ON CONFLICT ON CONSTRAINT reservations_single_unit_buffers_apart DO NOTHING
            RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
                      r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by
            INTO o.id, o.resource_id, o.owner, o.starts_at, o.ends_at, o.quantity, o.status, o.expires_at,
                 o.failure_reason, o.source, o.created_at, o.updated_at, o.metadata, o.acted_by;
            IF NOT FOUND THEN
                -- The general path judges two refusals the constraint cannot tell apart
                -- from a taken range: a lapsed hold in the way (its capacity goes to the
                -- waitlist first) and a booking's kept buffers (refused as outside the
                -- rules, see V12).
                IF EXISTS (
                    SELECT 1 FROM reservations r
                    WHERE r.resource_id = p_resource AND r.resource_capacity = 1
                      AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND r.buffered && range
                      AND ((r.status = 'HELD' AND r.expires_at <= p_now) OR r.buffered <> r.period)) THEN
                    o.outcome := 'general';
                    EXIT hold;
                END IF;
                -- Lost: see V9.
                PERFORM set_config('synchronous_commit', 'off', true);
                o.outcome := 'unavailable';
                EXIT hold;
            END IF;
            INSERT INTO outbox (id, kind, subject_id, payload, created_at, next_attempt_at)
            VALUES (p_event_id, CASE WHEN p_confirm THEN 'reservation.confirmed' ELSE 'reservation.held' END,
                    o.id, reservation_event(o.id, o.resource_id, o.owner, o.starts_at, o.ends_at, o.quantity,
                                            o.status, o.source, o.failure_reason, o.metadata, o.acted_by),
                    p_now, p_now);
            o.outcome := 'reserved';
            EXIT hold;
        END IF;
        -- Capacity N (or a capacity-1 resource whose lock a change holds): V15's, but for
        -- the columns read.
        SELECT resources.capacity, resources.hold_ttl_seconds, resources.buffer_before_minutes,
               resources.buffer_after_minutes, resources.archived_at, resources.has_calendar_rules,
               resources.authority
        INTO res FROM resources
        WHERE resources.id = p_resource AND resources.archived_at IS NULL AND resources.authority = 'local'
          AND NOT resources.has_calendar_rules
        FOR NO KEY UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            -- The look (V14): what is known without the lock, and a refusal without waiting
            -- for it when live claims already take the range.
            SELECT resources.capacity, resources.hold_ttl_seconds, resources.buffer_before_minutes,
                   resources.buffer_after_minutes, resources.archived_at, resources.has_calendar_rules,
                   resources.authority
            INTO res FROM resources WHERE resources.id = p_resource;
            IF NOT FOUND THEN
                o.outcome := 'not_found';
                EXIT hold;
            END IF;
            IF res.archived_at IS NOT NULL THEN
                o.outcome := 'archived';
                EXIT hold;
            END IF;
            o.capacity := res.capacity;
            IF p_quantity > res.capacity THEN
                o.outcome := 'too_many';
                EXIT hold;
            END IF;
            IF res.has_calendar_rules OR res.authority <> 'local' THEN
                o.outcome := 'general';
                EXIT hold;
            END IF;
            look := reservation_load(p_resource, p_start, p_end, p_now);
            IF look.lapsed THEN
                o.outcome := 'general';
                EXIT hold;
            END IF;
            IF look.peak + p_quantity > res.capacity THEN
                o.outcome := 'unavailable';
                EXIT hold;
            END IF;
            SELECT resources.capacity, resources.hold_ttl_seconds, resources.buffer_before_minutes,
                   resources.buffer_after_minutes, resources.archived_at, resources.has_calendar_rules,
                   resources.authority
            INTO res FROM resources WHERE resources.id = p_resource FOR NO KEY UPDATE;
            -- What the look saw may have changed before the lock was granted.
            IF res.archived_at IS NOT NULL THEN
                o.outcome := 'archived';
                EXIT hold;
            END IF;
            IF res.has_calendar_rules THEN
                o.outcome := 'general';
                EXIT hold;
            END IF;
        END IF;
        o.capacity := res.capacity;
        IF p_quantity > res.capacity THEN
            o.outcome := 'too_many';
            EXIT hold;
        END IF;
        -- A booking made while the resource had buffers keeps them after they were
        -- cleared; where one meets this range, the general path judges it (see V12).
        IF res.capacity = 1 AND EXISTS (
            SELECT 1 FROM reservations r
            WHERE r.resource_id = p_resource AND r.resource_capacity = 1
              AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
              AND r.buffered && range AND r.buffered <> r.period) THEN
            o.outcome := 'general';
            EXIT hold;
        END IF;
        -- The load under the lock, in a statement of its own: its snapshot, taken after the
        -- lock was granted, includes every committed competitor.
        SELECT count(*) FILTER (WHERE NOT (r.status = 'HELD' AND r.expires_at <= p_now)),
               coalesce(sum(r.quantity) FILTER (WHERE NOT (r.status = 'HELD' AND r.expires_at <= p_now)), 0),
               coalesce(bool_or(r.status = 'HELD' AND r.expires_at <= p_now), false)
        INTO live_claims, live_total, any_lapsed
        FROM reservations r
        WHERE r.resource_id = p_resource AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND r.period && range;
        IF any_lapsed THEN
            -- Lapsed capacity goes to the waitlist first: the general path writes the lapse
            -- down and offers it, in this transaction, under the lock already held.
            o.outcome := 'general';
            EXIT hold;
        END IF;
        new_expires_at := CASE WHEN p_confirm THEN NULL ELSE p_now + make_interval(secs => res.hold_ttl_seconds) END;
        -- The total of the live claims is the peak when at most one of them overlaps, and
        -- never below it: the sweep is needed only when the total does not fit.
        fits := live_total + p_quantity <= res.capacity;
        IF NOT fits AND live_claims > 1 THEN
            fits := (reservation_load(p_resource, p_start, p_end, p_now)).peak + p_quantity <= res.capacity;
        END IF;
        IF NOT fits THEN
            -- Lost under the lock: see V9.
            PERFORM set_config('synchronous_commit', 'off', true);
            o.outcome := 'unavailable';
            EXIT hold;
        END IF;
        -- `buffered` as the trigger would compute it, from the row read under the lock (no
        -- rules here, so no buffers: the period itself).
        INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, status,
                                       expires_at, failure_reason, source, created_at, updated_at, metadata, acted_by,
                                       buffered)
        VALUES (p_id, p_resource, res.capacity, p_owner, p_start, p_end, p_quantity, new_status, new_expires_at, NULL,
                'request', p_now, p_now, p_metadata, p_owner,
                tstzrange(p_start - make_interval(mins => res.buffer_before_minutes),
                          p_end + make_interval(mins => res.buffer_after_minutes), '[)'))
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
                  r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by
        INTO o.id, o.resource_id, o.owner, o.starts_at, o.ends_at, o.quantity, o.status, o.expires_at,
             o.failure_reason, o.source, o.created_at, o.updated_at, o.metadata, o.acted_by;
        INSERT INTO outbox (id, kind, subject_id, payload, created_at, next_attempt_at)
        VALUES (p_event_id, CASE WHEN p_confirm THEN 'reservation.confirmed' ELSE 'reservation.held' END, o.id,
                reservation_event(o.id, o.resource_id, o.owner, o.starts_at, o.ends_at, o.quantity, o.status,
                                  o.source, o.failure_reason, o.metadata, o.acted_by),
                p_now, p_now);
        o.outcome := 'reserved';
    END;

    IF p_key IS NOT NULL THEN
        IF o.outcome = 'reserved' THEN
            IF coalesce(to_jsonb(o.expires_at), 'null') IS DISTINCT FROM expected_expiry THEN
                -- The TTL changed between the claim and the lock: keep what was answered.
                answered := reservation_snapshot(o.id, o.resource_id, o.owner, o.starts_at, o.ends_at, o.quantity,
                                                 o.status, o.expires_at, o.failure_reason, o.source, o.created_at,
                                                 o.updated_at, o.metadata, o.acted_by);
                UPDATE idempotency_keys k SET response_reservation = answered
                WHERE k.principal = p_principal AND k.method = p_method AND k.route = p_route AND k.key = p_key;
            END IF;
        ELSIF o.outcome = 'unavailable' THEN
            UPDATE idempotency_keys k
            SET response_status = p_refused_status, response_headers = p_refused_headers,
                response_body = p_refused_body, response_reservation = NULL
            WHERE k.principal = p_principal AND k.method = p_method AND k.route = p_route AND k.key = p_key;
        ELSE
            -- Nothing to keep: the claim goes, and the commit need not wait for the disk.
            DELETE FROM idempotency_keys k
            WHERE k.principal = p_principal AND k.method = p_method AND k.route = p_route AND k.key = p_key;
            PERFORM set_config('synchronous_commit', 'off', true);
        END IF;
    END IF;
    RETURN NEXT o;
END
$$;
