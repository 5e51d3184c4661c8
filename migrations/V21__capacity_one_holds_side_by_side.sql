-- Holds of a capacity-1 resource side by side, judged by the exclusion constraint;
-- the outbox's lists as domains (issue 13).
--
-- Measured in one backend under callgrind (1,000 holds, each committed, 200 capacity-1
-- resources; instructions count the same whatever else the machine does): V15's hold
-- cost 1.22 M instructions, a plain `INSERT` and `COMMIT` 49 k. Of the hold, the look
-- at the load under the lock (the kept-buffers probe and the aggregate, two GiST scans
-- and two statements) was 273 k, and the outbox row's two check constraints 107 k:
-- PostgreSQL reads a table's checks from their stored node trees and plans them again
-- for every statement that writes a row (see V16), while a domain's checks are read
-- once per backend, into the type cache.
--
-- 1. A capacity-1 resource needs no load: `reservations_single_unit_buffers_apart`
--    already refuses any two live claims whose ranges meet, including a lapsed hold
--    and a booking's kept buffers. The hold takes the resource row FOR SHARE (not FOR
--    NO KEY UPDATE): holds of one resource no longer queue behind each other, and
--    `INSERT ... ON CONFLICT DO NOTHING` settles a race between them (a speculative
--    insertion waits for a competitor in flight and never deadlocks with it, where a
--    plain insert under an exclusion constraint can). The shared lock still excludes
--    every path that takes the row exclusively (a release's hand-over, a reschedule,
--    a capacity or rules change, the general hold), so those never meet a hold in
--    flight; with SKIP LOCKED, a hold that finds one of them there takes V15's way.
--    Refused: a lapsed hold in the way, or a booking's kept buffers, send the request
--    to the general path as before (V15); anything else is `unavailable`.
-- 2. `outbox.kind`, `outbox.topic` and `idempotency_keys.state` become domains with the
--    same lists and the same constraint names. (The reservation's own lists stay table
--    checks: functions of V9 return its columns through RETURN QUERY as `text`, which a
--    domain would no longer match, and they cost 17 k of a hold.)
-- Measured the same way, each database made by the migrations, the same rounds on the
-- same table sizes: 1.22 M instructions per committed hold before, 0.98 M after (-20 %);
-- a keyed hold (V17) 1.83 M before, 1.55 M after (-15 %).
CREATE DOMAIN outbox_kind AS text CONSTRAINT outbox_kind_known CHECK (VALUE = ANY ('{reservation.held,reservation.confirmed,reservation.released,reservation.expired,reservation.cancelled,reservation.failed,reservation.rescheduled,reservation.updated,waitlist.offered,waitlist.offer_expired,waitlist.cancelled,intent.requested}'::text[]));
CREATE DOMAIN outbox_topic AS text CONSTRAINT outbox_topic_known CHECK (VALUE = ANY ('{events,intents}'::text[]));
ALTER TABLE outbox
    DROP CONSTRAINT outbox_kind_known,
    DROP CONSTRAINT outbox_topic_known,
    ALTER COLUMN kind TYPE outbox_kind,
    ALTER COLUMN topic TYPE outbox_topic;
CREATE DOMAIN idempotency_state AS text
    CONSTRAINT idempotency_keys_state_known CHECK (VALUE = ANY ('{processing,completed}'::text[]));
ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_state_known,
    ALTER COLUMN state TYPE idempotency_state;

CREATE OR REPLACE FUNCTION reservation_hold(
    p_id uuid, p_resource uuid, p_owner text, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_confirm boolean, p_now timestamptz, p_metadata jsonb
) RETURNS TABLE (
    outcome text, capacity integer, id uuid, resource_id uuid, owner text,
    starts_at timestamptz, ends_at timestamptz, quantity integer, status text, expires_at timestamptz,
    failure_reason text, source text, created_at timestamptz, updated_at timestamptz, metadata jsonb,
    acted_by text
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    res resources%ROWTYPE;
    look record;
    range tstzrange := tstzrange(p_start, p_end, '[)');
    live_claims bigint;
    live_total bigint;
    any_lapsed boolean;
    fits boolean;
    new_status text := CASE WHEN p_confirm THEN 'CONFIRMED' ELSE 'HELD' END;
    new_expires_at timestamptz;
BEGIN
    -- Capacity 1: a shared lock, and the exclusion constraint as the judge.
    SELECT * INTO res FROM resources
    WHERE resources.id = p_resource AND resources.capacity = 1 AND resources.archived_at IS NULL
      AND resources.authority = 'local' AND NOT resources.has_calendar_rules
    FOR SHARE SKIP LOCKED;
    IF FOUND THEN
        capacity := 1;
        IF p_quantity > 1 THEN
            outcome := 'too_many';
            RETURN NEXT;
            RETURN;
        END IF;
        -- No rules, so no buffers: `buffered` is the period itself.
        INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity,
                                       status, expires_at, failure_reason, source, created_at, updated_at, metadata,
                                       acted_by, buffered)
        VALUES (p_id, p_resource, 1, p_owner, p_start, p_end, p_quantity, new_status,
                CASE WHEN p_confirm THEN NULL ELSE p_now + make_interval(secs => res.hold_ttl_seconds) END, NULL,
                'request', p_now, p_now, p_metadata, p_owner, range)
        ON CONFLICT DO NOTHING
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
                  r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by
        INTO id, resource_id, owner, starts_at, ends_at, quantity, status, expires_at, failure_reason, source,
             created_at, updated_at, metadata, acted_by;
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
                outcome := 'general';
                RETURN NEXT;
                RETURN;
            END IF;
            -- Lost: see V9.
            PERFORM set_config('synchronous_commit', 'off', true);
            outcome := 'unavailable';
            RETURN NEXT;
            RETURN;
        END IF;
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        VALUES (CASE WHEN p_confirm THEN 'reservation.confirmed' ELSE 'reservation.held' END, id,
                reservation_event(id, resource_id, owner, starts_at, ends_at, quantity, status, source,
                                  failure_reason, metadata, acted_by),
                p_now, p_now);
        outcome := 'reserved';
        RETURN NEXT;
        RETURN;
    END IF;
    -- Capacity N (or a capacity-1 resource whose lock a change holds): V15, unchanged.
    SELECT * INTO res FROM resources
    WHERE resources.id = p_resource AND resources.archived_at IS NULL AND resources.authority = 'local'
      AND NOT resources.has_calendar_rules
    FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        -- The look (V14): what is known without the lock, and a refusal without waiting
        -- for it when live claims already take the range.
        SELECT * INTO res FROM resources WHERE resources.id = p_resource;
        IF NOT FOUND THEN
            outcome := 'not_found';
            RETURN NEXT;
            RETURN;
        END IF;
        IF res.archived_at IS NOT NULL THEN
            outcome := 'archived';
            RETURN NEXT;
            RETURN;
        END IF;
        capacity := res.capacity;
        IF p_quantity > res.capacity THEN
            outcome := 'too_many';
            RETURN NEXT;
            RETURN;
        END IF;
        IF res.has_calendar_rules OR res.authority <> 'local' THEN
            outcome := 'general';
            RETURN NEXT;
            RETURN;
        END IF;
        look := reservation_load(p_resource, p_start, p_end, p_now);
        IF look.lapsed THEN
            outcome := 'general';
            RETURN NEXT;
            RETURN;
        END IF;
        IF look.peak + p_quantity > res.capacity THEN
            outcome := 'unavailable';
            RETURN NEXT;
            RETURN;
        END IF;
        SELECT * INTO res FROM resources WHERE resources.id = p_resource FOR NO KEY UPDATE;
        -- What the look saw may have changed before the lock was granted.
        IF res.archived_at IS NOT NULL THEN
            outcome := 'archived';
            RETURN NEXT;
            RETURN;
        END IF;
        IF res.has_calendar_rules THEN
            outcome := 'general';
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    capacity := res.capacity;
    IF p_quantity > res.capacity THEN
        outcome := 'too_many';
        RETURN NEXT;
        RETURN;
    END IF;
    -- A booking made while the resource had buffers keeps them after they were
    -- cleared; where one meets this range, the general path judges it (see V12).
    IF res.capacity = 1 AND EXISTS (
        SELECT 1 FROM reservations r
        WHERE r.resource_id = p_resource AND r.resource_capacity = 1
          AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
          AND r.buffered && range AND r.buffered <> r.period) THEN
        outcome := 'general';
        RETURN NEXT;
        RETURN;
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
        outcome := 'general';
        RETURN NEXT;
        RETURN;
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
        outcome := 'unavailable';
        RETURN NEXT;
        RETURN;
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
    INTO id, resource_id, owner, starts_at, ends_at, quantity, status, expires_at, failure_reason, source,
         created_at, updated_at, metadata, acted_by;
    INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
    VALUES (CASE WHEN p_confirm THEN 'reservation.confirmed' ELSE 'reservation.held' END, id,
            reservation_event(id, resource_id, owner, starts_at, ends_at, quantity, status, source, failure_reason,
                              metadata, acted_by),
            p_now, p_now);
    outcome := 'reserved';
    RETURN NEXT;
END
$$;

-- 3. The keyed hold (V17) claims its key with the answer a hold most likely gives
--    already in it: the reservation the hold will make is known before it is made
--    (its id, range, owner and metadata are the request's; its expiry is the resource's
--    hold TTL from now), so the claim is written `completed`, and the statement's other
--    write to the key, the answer's update, is needed only when the hold did not go as
--    expected: a refusal stores its prerendered answer, and a hold whose expiry moved
--    (the TTL changed between the claim and the lock) stores what the hold returned.
--    Nobody reads the row before the statement commits (a duplicate waits on the
--    primary key), so it is never seen holding an answer it will not give.
--    The claim is V6's `idempotency_claim` inline, with its bounded wait and its
--    takeover of a lapsed claim of the older scheme; as the row is never `processing`
--    once committed, `p_locked_until` is no longer used.
CREATE OR REPLACE FUNCTION reservation_hold_keyed(
    p_principal text, p_method text, p_route text, p_key text, p_fingerprint bytea, p_locked_until timestamptz,
    p_retain_until timestamptz, p_wait text, p_refused_status smallint, p_refused_headers jsonb,
    p_refused_body bytea,
    p_id uuid, p_resource uuid, p_owner text, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_confirm boolean, p_now timestamptz, p_metadata jsonb
) RETURNS TABLE (
    outcome text, capacity integer, id uuid, resource_id uuid, owner text,
    starts_at timestamptz, ends_at timestamptz, quantity integer, status text, expires_at timestamptz,
    failure_reason text, source text, created_at timestamptz, updated_at timestamptz, metadata jsonb,
    acted_by text
) LANGUAGE plpgsql AS $$
DECLARE
    session_timeout text := current_setting('lock_timeout');
    claimed boolean;
    expected_expiry jsonb;
    h record;
BEGIN
    PERFORM set_config('lock_timeout', p_wait, true);
    INSERT INTO idempotency_keys AS k (principal, method, route, key, fingerprint, state, owner_token, locked_until,
                                       response_status, response_reservation, created_at, expires_at)
    VALUES (p_principal, p_method, p_route, p_key, p_fingerprint, 'completed', gen_random_uuid(), p_now, 201,
            jsonb_build_object(
                'id', p_id, 'resource_id', p_resource, 'owner', p_owner, 'starts_at', p_start, 'ends_at', p_end,
                'quantity', p_quantity, 'status', CASE WHEN p_confirm THEN 'CONFIRMED' ELSE 'HELD' END,
                'expires_at', CASE WHEN NOT p_confirm THEN p_now + make_interval(secs => (
                    SELECT r.hold_ttl_seconds FROM resources r WHERE r.id = p_resource)) END,
                'failure_reason', NULL, 'source', 'request', 'created_at', p_now, 'updated_at', p_now,
                'metadata', p_metadata, 'acted_by', p_owner),
            p_now, p_retain_until)
    ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO UPDATE
        SET owner_token = EXCLUDED.owner_token, state = EXCLUDED.state, locked_until = EXCLUDED.locked_until,
            response_status = EXCLUDED.response_status, response_reservation = EXCLUDED.response_reservation
        WHERE k.state = 'processing' AND k.locked_until <= p_now AND k.fingerprint = EXCLUDED.fingerprint
    RETURNING k.response_reservation -> 'expires_at' INTO expected_expiry;
    claimed := FOUND;
    PERFORM set_config('lock_timeout', session_timeout, true);
    IF NOT claimed THEN
        -- A committed row: an answer to replay, another request's key, or a live claim
        -- of the older scheme. Nothing was written; the guard reads it.
        outcome := 'key_taken';
        RETURN NEXT;
        RETURN;
    END IF;

    SELECT * INTO h FROM reservation_hold(p_id, p_resource, p_owner, p_start, p_end, p_quantity, p_confirm, p_now,
                                          p_metadata);
    IF h.outcome = 'reserved' THEN
        IF coalesce(to_jsonb(h.expires_at), 'null') IS DISTINCT FROM expected_expiry THEN
            UPDATE idempotency_keys k SET response_reservation = to_jsonb(h)
            WHERE k.principal = p_principal AND k.method = p_method AND k.route = p_route AND k.key = p_key;
        END IF;
    ELSIF h.outcome = 'unavailable' THEN
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
    outcome := h.outcome;
    capacity := h.capacity;
    id := h.id;
    resource_id := h.resource_id;
    owner := h.owner;
    starts_at := h.starts_at;
    ends_at := h.ends_at;
    quantity := h.quantity;
    status := h.status;
    expires_at := h.expires_at;
    failure_reason := h.failure_reason;
    source := h.source;
    created_at := h.created_at;
    updated_at := h.updated_at;
    metadata := h.metadata;
    acted_by := h.acted_by;
    RETURN NEXT;
END
$$;
