-- A hold (or, with p_confirm, a booking) of a local resource in one round trip, with
-- its event in the outbox under `p_event_id` (the server makes the id, as it makes the
-- reservation's). One row: the `outcome` (`reserved` with the row, `unavailable`,
-- `not_found`, `archived`, `too_many` with the `capacity`, or `general` when the
-- general path must decide: upstream resources, calendar rules not proved current, a
-- range refused for kept buffers, lapsed holds whose capacity the waitlist is offered
-- first). The caller takes the general path.
--
-- Calendar rules: the caller judges the rules that need no load (hours, notice,
-- advance, grid) from the rules it read, and passes their `p_rules_version`. A
-- resource with rules is served here only when its row, locked, still has that version
-- (every change of the rules bumps it, under the row's exclusive lock): the rules
-- judged are the rules in force until this commits. The buffers are judged on the kept
-- ranges: on capacity 1 by the exclusion constraint, on capacity N by the peak of the
-- other bookings' kept ranges over the new one's, under the lock. A `general`
-- outcome carries the `rules_version` of the row it read (none when it read none), so
-- that the caller knows whether the rules it judged by are still current.
--
-- With an Idempotency-Key (`p_key` and the arguments after it), the key is claimed
-- first and its answer settled last, around the same body, in the same statement: one
-- more outcome, `key_taken`, when the key already has a committed row; past `p_wait`
-- waiting for a concurrent original, lock_not_available. Outcomes other than
-- `reserved` and `unavailable` leave nothing behind, the claim included. The body's
-- outcomes are exits from its block, so that the key's last write follows every one.
--
-- The limit of active holds per principal (`p_max_holds`, 0: none): a hold (not a
-- booking) first takes its owner's lock (`principal_holds`, the lock order's first
-- level, before the resource's) and counts the owner's active holds under it; at the
-- limit the outcome is `general`, and the general path answers the refusal. The caller
-- passes 0 for an admin, who is not limited.
--
-- The event's lease (`p_event_lease`): when the caller publishes the event itself
-- before it answers, the event is written claimed until then, so no relay takes it,
-- and the row returns it (`event`: its kind and payload). Its subject is the new
-- reservation, so no earlier event of the subject can be waiting.
CREATE OR REPLACE FUNCTION reservation_hold(
    p_id uuid, p_resource uuid, p_owner text, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_confirm boolean, p_now timestamptz, p_metadata jsonb, p_event_id uuid,
    p_principal text DEFAULT NULL, p_method text DEFAULT NULL, p_route text DEFAULT NULL, p_key text DEFAULT NULL,
    p_fingerprint bytea DEFAULT NULL, p_retain_until timestamptz DEFAULT NULL, p_wait text DEFAULT NULL,
    p_refused_status smallint DEFAULT NULL, p_refused_headers jsonb DEFAULT NULL, p_refused_body bytea DEFAULT NULL,
    p_rules_version bigint DEFAULT NULL, p_max_holds integer DEFAULT 0,
    p_event_lease timestamptz DEFAULT NULL
) RETURNS SETOF reservation_hold_result LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    -- The row returned.
    o reservation_hold_result;
    -- The capacity-N path's eight columns of the resource; the capacity-1 path's TTL
    -- and the range the new booking keeps.
    res record;
    ttl integer;
    kept tstzrange;
    taken boolean;
    look record;
    range tstzrange := tstzrange(p_start, p_end, '[)');
    any_lapsed boolean;
    fits boolean;
    kept_beyond boolean := false;
    new_status text := CASE WHEN p_confirm THEN 'CONFIRMED' ELSE 'HELD' END;
    new_expires_at timestamptz;
    session_timeout text;
    claimed boolean;
    expected_expiry jsonb;
    answered jsonb;
BEGIN
    IF p_key IS NOT NULL THEN
        -- The claim, written `completed` with the answer a hold most likely gives:
        -- the reservation it will make is known before it is made (its expiry is the
        -- resource's hold TTL from now). The key's answer is written again at the end
        -- only when the hold did not go as expected. Nobody reads the row before the
        -- statement commits (a duplicate waits on the primary key), so it is never seen
        -- holding an answer it will not give.
        session_timeout := current_setting('lock_timeout');
        PERFORM set_config('lock_timeout', p_wait, true);
        INSERT INTO idempotency_keys AS k (principal, method, route, key, fingerprint, state, response_status,
                                           response_reservation, created_at, expires_at)
        VALUES (p_principal, p_method, p_route, p_key, p_fingerprint, 'completed', 201,
                reservation_snapshot(
                    p_id, p_resource, p_owner, p_start, p_end, p_quantity,
                    CASE WHEN p_confirm THEN 'CONFIRMED' ELSE 'HELD' END,
                    CASE WHEN NOT p_confirm THEN p_now + make_interval(secs => (
                        SELECT r.hold_ttl_seconds FROM resources r WHERE r.id = p_resource)) END,
                    NULL, 'request', p_now, p_now, p_metadata, p_owner),
                p_now, p_retain_until)
        ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO NOTHING
        RETURNING k.response_reservation -> 'expires_at' INTO expected_expiry;
        claimed := FOUND;
        PERFORM set_config('lock_timeout', session_timeout, true);
        IF NOT claimed THEN
            -- A committed row: an answer to replay, or another request's key.
            -- Nothing was written; the guard reads it.
            o.outcome := 'key_taken';
            RETURN NEXT o;
            RETURN;
        END IF;
    END IF;

    <<hold>>
    BEGIN
        IF p_max_holds > 0 AND NOT p_confirm THEN
            IF (SELECT h.active FROM principal_holds(p_owner, p_now) h) >= p_max_holds THEN
                o.outcome := 'general';
                EXIT hold;
            END IF;
        END IF;
        -- Capacity 1: a shared lock, and the exclusion constraint as the judge. Holds
        -- of one resource go side by side, and `ON CONFLICT DO NOTHING` settles a race
        -- between them (a speculative insertion waits for a competitor in flight and
        -- never deadlocks with it). The shared lock still excludes every path that
        -- takes the row exclusively (a hand-over, a reschedule, a capacity or rules
        -- change, the general path); SKIP LOCKED sends a hold that finds one of them
        -- there the capacity-N way. A resource with rules is served only at the rules'
        -- version the caller judged. The TTL is read, and the range the booking keeps
        -- (`buffered`) computed as the trigger would, from the row locked here.
        SELECT resources.hold_ttl_seconds,
               CASE WHEN resources.buffer_before_minutes = 0 AND resources.buffer_after_minutes = 0 THEN range
                    ELSE tstzrange(p_start - make_interval(mins => resources.buffer_before_minutes),
                                   p_end + make_interval(mins => resources.buffer_after_minutes), '[)') END
        INTO ttl, kept FROM resources
        WHERE resources.id = p_resource AND resources.capacity = 1 AND resources.archived_at IS NULL
          AND resources.authority = 'local'
          AND (NOT resources.has_calendar_rules OR resources.rules_version = p_rules_version)
        FOR SHARE SKIP LOCKED;
        IF FOUND THEN
            o.capacity := 1;
            IF p_quantity > 1 THEN
                o.outcome := 'too_many';
                EXIT hold;
            END IF;
            INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity,
                                           status, expires_at, failure_reason, source, created_at, updated_at, metadata,
                                           acted_by, buffered)
            VALUES (p_id, p_resource, 1, p_owner, p_start, p_end, p_quantity, new_status,
                    CASE WHEN p_confirm THEN NULL ELSE p_now + make_interval(secs => ttl) END, NULL,
                    'request', p_now, p_now, p_metadata, p_owner, kept)
            ON CONFLICT ON CONSTRAINT reservations_single_unit_buffers_apart DO NOTHING
            RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
                      r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by
            INTO o.id, o.resource_id, o.owner, o.starts_at, o.ends_at, o.quantity, o.status, o.expires_at,
                 o.failure_reason, o.source, o.created_at, o.updated_at, o.metadata, o.acted_by;
            IF NOT FOUND THEN
                -- The general path judges the refusals the constraint cannot tell apart
                -- from a taken range: a lapsed hold in the way (its capacity goes to the
                -- waitlist first), and kept buffers in the way (refused as outside the
                -- calendar rules) where no live claim takes the period itself. The rules
                -- read are at the version passed (or there are none).
                o.rules_version := p_rules_version;
                IF kept = range THEN
                    -- No buffers of its own: only another booking's kept buffers can be
                    -- in the way without taking the period.
                    IF EXISTS (
                        SELECT 1 FROM reservations r
                        WHERE r.resource_id = p_resource AND r.resource_capacity = 1
                          AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND r.buffered && range
                          AND ((r.status = 'HELD' AND r.expires_at <= p_now) OR r.buffered <> r.period)) THEN
                        o.outcome := 'general';
                        EXIT hold;
                    END IF;
                ELSE
                    SELECT coalesce(bool_or(r.status = 'HELD' AND r.expires_at <= p_now), false),
                           coalesce(bool_or(r.period && range AND NOT (r.status = 'HELD' AND r.expires_at <= p_now)),
                                    false)
                    INTO any_lapsed, taken
                    FROM reservations r
                    WHERE r.resource_id = p_resource AND r.resource_capacity = 1
                      AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND r.buffered && kept;
                    IF any_lapsed OR NOT taken THEN
                        o.outcome := 'general';
                        EXIT hold;
                    END IF;
                END IF;
                -- Lost. Without a key, a crash or failover that lost this commit would
                -- lose only a refusal: no need to wait for the disk. Under a key the
                -- refusal is the key's answer, a promise: it commits as the session says.
                IF p_key IS NULL THEN
                    PERFORM set_config('synchronous_commit', 'off', true);
                END IF;
                o.outcome := 'unavailable';
                EXIT hold;
            END IF;
            INSERT INTO outbox (id, kind, subject_id, payload, created_at, next_attempt_at, claimed_until)
            VALUES (p_event_id, CASE WHEN p_confirm THEN 'reservation.confirmed' ELSE 'reservation.held' END,
                    o.id, reservation_event(o.id, o.resource_id, o.owner, o.starts_at, o.ends_at, o.quantity,
                                            o.status, o.source, o.failure_reason, o.metadata, o.acted_by, NULL),
                    p_now, p_now, p_event_lease)
            RETURNING CASE WHEN p_event_lease IS NOT NULL
                           THEN jsonb_build_object('kind', outbox.kind, 'payload', outbox.payload) END INTO o.event;
            o.outcome := 'reserved';
            EXIT hold;
        END IF;
        -- Capacity N (or a capacity-1 resource whose lock a change holds): the lock
        -- when it is free (nobody holds it, so nobody is ahead to lose to), only for a
        -- resource this path serves (local, not archived, and without calendar rules
        -- or, on capacity N, with them at the version passed).
        SELECT resources.capacity, resources.hold_ttl_seconds, resources.buffer_before_minutes,
               resources.buffer_after_minutes, resources.archived_at, resources.has_calendar_rules,
               resources.authority, resources.rules_version
        INTO res FROM resources
        WHERE resources.id = p_resource AND resources.archived_at IS NULL AND resources.authority = 'local'
          AND (NOT resources.has_calendar_rules
               OR (resources.capacity > 1 AND resources.rules_version = p_rules_version))
        FOR NO KEY UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            -- The lock is held, or the resource is not for this path. The look: what is
            -- known without the lock, and a refusal without waiting for it when live
            -- claims already take the range, so a burst's losers do not queue on it.
            SELECT resources.capacity, resources.hold_ttl_seconds, resources.buffer_before_minutes,
                   resources.buffer_after_minutes, resources.archived_at, resources.has_calendar_rules,
                   resources.authority, resources.rules_version
            INTO res FROM resources WHERE resources.id = p_resource;
            IF NOT FOUND THEN
                o.outcome := 'not_found';
                EXIT hold;
            END IF;
            o.rules_version := res.rules_version;
            IF res.archived_at IS NOT NULL THEN
                o.outcome := 'archived';
                EXIT hold;
            END IF;
            o.capacity := res.capacity;
            IF p_quantity > res.capacity THEN
                o.outcome := 'too_many';
                EXIT hold;
            END IF;
            IF res.authority <> 'local' OR (res.has_calendar_rules
                    AND (res.capacity = 1 OR res.rules_version IS DISTINCT FROM p_rules_version)) THEN
                o.outcome := 'general';
                EXIT hold;
            END IF;
            look := reservation_load(p_resource, p_start, p_end, p_now, NULL, p_quantity);
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
                   resources.authority, resources.rules_version
            INTO res FROM resources WHERE resources.id = p_resource FOR NO KEY UPDATE;
            o.rules_version := res.rules_version;
            -- What the look saw may have changed before the lock was granted.
            IF res.archived_at IS NOT NULL THEN
                o.outcome := 'archived';
                EXIT hold;
            END IF;
            IF res.has_calendar_rules
               AND (res.capacity = 1 OR res.rules_version IS DISTINCT FROM p_rules_version) THEN
                o.outcome := 'general';
                EXIT hold;
            END IF;
        END IF;
        o.rules_version := res.rules_version;
        o.capacity := res.capacity;
        IF p_quantity > res.capacity THEN
            o.outcome := 'too_many';
            EXIT hold;
        END IF;
        -- A booking made while the resource had buffers keeps them after they were
        -- cleared; where one meets this range, the general path judges it.
        IF res.capacity = 1 AND EXISTS (
            SELECT 1 FROM reservations r
            WHERE r.resource_id = p_resource AND r.resource_capacity = 1
              AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
              AND r.buffered && range AND r.buffered <> r.period) THEN
            o.outcome := 'general';
            EXIT hold;
        END IF;
        -- The load under the lock, in a statement of its own: its snapshot, taken after the
        -- lock was granted, includes every committed competitor. On capacity N it is the
        -- load timeline's, whatever the number of bookings on the range.
        look := reservation_load(p_resource, p_start, p_end, p_now, NULL, p_quantity);
        IF look.lapsed THEN
            -- Lapsed capacity goes to the waitlist first: the general path writes the lapse
            -- down and offers it, in this transaction, under the lock already held.
            o.outcome := 'general';
            EXIT hold;
        END IF;
        new_expires_at := CASE WHEN p_confirm THEN NULL ELSE p_now + make_interval(secs => res.hold_ttl_seconds) END;
        fits := look.peak + p_quantity <= res.capacity;
        IF NOT fits THEN
            -- Lost under the lock. Without a key, a crash or failover that lost this
            -- commit would lose only a refusal: no need to wait for the disk, and the
            -- queue behind the lock moves faster. Under a key the refusal is the key's
            -- answer, replayed to every retry: it commits as the session says.
            IF p_key IS NULL THEN
                PERFORM set_config('synchronous_commit', 'off', true);
            END IF;
            o.outcome := 'unavailable';
            EXIT hold;
        END IF;
        kept := tstzrange(p_start - make_interval(mins => res.buffer_before_minutes),
                          p_end + make_interval(mins => res.buffer_after_minutes), '[)');
        -- With rules, the buffers: the peak of the live bookings' kept ranges over this
        -- booking's must leave room for it, as the general path judges them (lapsed holds
        -- left out). The range fits, so where every booking meeting the kept range keeps
        -- its period alone and that period meets the range, the peak is the range's:
        -- nothing more to count. Without buffers of its own (kept = range) only a
        -- booking whose kept range is wider than its period can break that, and the
        -- partial index of those (`reservations_kept_wider_idx`) finds it without
        -- reading the bookings on the range (a big event with rules). Otherwise the
        -- general path refuses what does not fit, with its own answer.
        IF res.has_calendar_rules THEN
            -- Two statements, each planned on its own: one expression holding both
            -- would be planned whole for every hold.
            IF kept = range THEN
                kept_beyond := EXISTS (
                    SELECT 1 FROM reservations r
                    WHERE r.resource_id = p_resource AND (r.buffered <> r.period) IS TRUE
                      AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
                      AND r.buffered && kept AND NOT (r.status = 'HELD' AND r.expires_at <= p_now));
            ELSE
                kept_beyond := EXISTS (
                    SELECT 1 FROM reservations r
                    WHERE r.resource_id = p_resource AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
                      AND r.period && tstzrange(lower(kept) - interval '1 day', upper(kept) + interval '1 day', '[)')
                      AND r.buffered && kept AND NOT (r.status = 'HELD' AND r.expires_at <= p_now)
                      AND (r.buffered <> r.period OR NOT r.period && range));
            END IF;
        END IF;
        IF kept_beyond THEN
            -- +quantity at each (clipped) start of a kept range, -quantity at each end,
            -- ends first at one instant; the running sum's maximum is the peak.
            IF (WITH near AS (
                    SELECT lower(r.buffered) AS kept_from, upper(r.buffered) AS kept_to, r.quantity
                    FROM reservations r
                    WHERE r.resource_id = p_resource AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
                      AND r.period && tstzrange(lower(kept) - interval '1 day', upper(kept) + interval '1 day', '[)')
                      AND r.buffered && kept AND NOT (r.status = 'HELD' AND r.expires_at <= p_now)
                ), events AS (
                    SELECT greatest(near.kept_from, lower(kept)) AS at, near.quantity AS delta FROM near
                    UNION ALL SELECT least(near.kept_to, upper(kept)), -near.quantity FROM near
                )
                SELECT coalesce(max(load), 0)
                FROM (SELECT sum(events.delta) OVER (ORDER BY events.at, events.delta ROWS UNBOUNDED PRECEDING) AS load
                      FROM events) running) + p_quantity > res.capacity THEN
                o.outcome := 'general';
                EXIT hold;
            END IF;
        END IF;
        -- `buffered` as the trigger would compute it, from the row read under the lock.
        INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, status,
                                       expires_at, failure_reason, source, created_at, updated_at, metadata, acted_by,
                                       buffered)
        VALUES (p_id, p_resource, res.capacity, p_owner, p_start, p_end, p_quantity, new_status, new_expires_at, NULL,
                'request', p_now, p_now, p_metadata, p_owner, kept)
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
                  r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by
        INTO o.id, o.resource_id, o.owner, o.starts_at, o.ends_at, o.quantity, o.status, o.expires_at,
             o.failure_reason, o.source, o.created_at, o.updated_at, o.metadata, o.acted_by;
        INSERT INTO outbox (id, kind, subject_id, payload, created_at, next_attempt_at, claimed_until)
        VALUES (p_event_id, CASE WHEN p_confirm THEN 'reservation.confirmed' ELSE 'reservation.held' END, o.id,
                reservation_event(o.id, o.resource_id, o.owner, o.starts_at, o.ends_at, o.quantity, o.status,
                                  o.source, o.failure_reason, o.metadata, o.acted_by, NULL),
                p_now, p_now, p_event_lease)
        RETURNING CASE WHEN p_event_lease IS NOT NULL
                       THEN jsonb_build_object('kind', outbox.kind, 'payload', outbox.payload) END INTO o.event;
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
