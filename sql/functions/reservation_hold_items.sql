-- A booking of several items (each a resource, or any one member of a pool) held, or
-- with p_confirm booked, all or nothing over one range, with its one event under
-- `p_event_id`, in one statement: the common case of a booking of several, as
-- reservation_hold is of one. Items are given by place (`p_targets[i]`, a pool's id
-- where `p_pooled[i]`, `p_quantities[i]`, the row's id `p_ids[i]`; `p_ids[1]` is the
-- lead's, which names the booking).
--
-- Served here: items whose resources, and every member of whose pools, are local, not
-- archived and without calendar rules (nor limits), with no lapsed hold over the
-- range where it may be needed (its capacity goes to the waitlist first): on capacity
-- N, only where the load timeline has no room for what the booking asks of it.
-- Anything else, and a pool that does not exist, is the general path's, and the
-- outcome says so having done nothing.
--
-- Outcomes (the `outcome` column): `reserved`, one row, the lead's with the booking's
-- `items`; `unavailable`, one row per item that did not fit (its place, from 0, in
-- `item`), nothing written; `general`, one row, nothing done.
--
-- Locks: with the limit of active holds per principal on (`p_max_holds`, 0: none), a
-- hold (not a booking) first takes its owner's lock (`principal_holds`, the lock
-- order's first level) and counts the owner's active holds under it, the booking
-- counting as one; at the limit the outcome is `general`, and the general path answers
-- the refusal (the caller passes 0 for an admin, who is not limited). Then the lock
-- order's resource level: the look first, without a lock, refusing
-- an item whose resource, or every member of whose pool, live claims take at this
-- instant, so that a burst's losers never queue on the winner's locks; then every
-- resource of the booking `FOR NO KEY UPDATE` in id order in one statement, so that
-- A+B and B+A wait for each other and never deadlock; the load is read under them in
-- a statement of its own, whose snapshot includes every committed competitor. Items
-- are judged in order, each counting the capacity the booking's earlier items take
-- (every item has the same range); a pool tries its members in its strategy's order
-- (`ordered`: its order; `least_booked`: the fewest live bookings within seven days of
-- the range, ties by id) and takes the first that fits.
--
-- A capacity-1 booking made while its resource had buffers keeps its kept range, which
-- the exclusion constraint may find in the way of an insert here (exclusion_violation,
-- the statement rolled back): the caller takes the general path, which judges it.
CREATE OR REPLACE FUNCTION reservation_hold_items(
    p_ids uuid[], p_targets uuid[], p_pooled boolean[], p_quantities integer[], p_owner text,
    p_start timestamptz, p_end timestamptz, p_confirm boolean, p_now timestamptz, p_metadata jsonb,
    p_event_id uuid, p_max_holds integer DEFAULT 0
) RETURNS TABLE (
    outcome text, item smallint, id uuid, resource_id uuid, owner text, starts_at timestamptz,
    ends_at timestamptz, quantity integer, status text, expires_at timestamptz, failure_reason text,
    source text, created_at timestamptz, updated_at timestamptz, metadata jsonb, acted_by text, items jsonb
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    n integer := cardinality(p_targets);
    range tstzrange := tstzrange(p_start, p_end, '[)');
    first_pass integer;
    new_status text := CASE WHEN p_confirm THEN 'CONFIRMED' ELSE 'HELD' END;
    pool_ids uuid[];
    pools_found integer;
    -- Every resource the booking may take, by id, and what is read of each at the same
    -- place: capacity, the peak of the live claims over the range, and what this
    -- booking's earlier items take.
    ids uuid[];
    -- The pools' members among them.
    members uuid[];
    caps integer[];
    -- What the booking asks of each resource, where that is known before the picks
    -- (NULL for a pool's member): the load then looks for lapsed holds only where the
    -- resource's timeline has no room for it.
    needs integer[];
    live_peak bigint[];
    own bigint[];
    ttl integer;
    usable boolean;
    lapsed boolean[];
    refused smallint[];
    picked uuid[];
    at integer;
    fits boolean;
    candidate uuid;
    candidates uuid[];
BEGIN
    IF p_max_holds > 0 AND NOT p_confirm THEN
        IF (SELECT h.active FROM principal_holds(p_owner, p_now) h) >= p_max_holds THEN
            outcome := 'general';
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    IF true = ANY(p_pooled) THEN
        SELECT array_agg(DISTINCT i.t) INTO pool_ids FROM unnest(p_targets, p_pooled) AS i(t, pooled) WHERE i.pooled;
        SELECT count(*) INTO pools_found FROM pools WHERE pools.id = ANY(pool_ids);
        IF pools_found < cardinality(pool_ids) THEN
            outcome := 'general';
            RETURN NEXT;
            RETURN;
        END IF;
        SELECT array_agg(m.resource_id) INTO members FROM pool_members m WHERE m.pool_id = ANY(pool_ids);
    END IF;
    SELECT array_agg(DISTINCT every.r ORDER BY every.r) INTO ids FROM (
        SELECT i.t AS r FROM unnest(p_targets, p_pooled) AS i(t, pooled) WHERE NOT i.pooled
        UNION ALL
        SELECT unnest(members)) every;

    -- The locks at once when nobody holds them: nobody is ahead to lose to, so the look
    -- is not needed. (A lock refused undoes the ones granted with it.)
    BEGIN
        PERFORM FROM resources WHERE resources.id = ANY(ids) ORDER BY resources.id FOR NO KEY UPDATE NOWAIT;
        first_pass := 2;
    EXCEPTION WHEN lock_not_available THEN
        first_pass := 1;
    END;
    -- Otherwise twice: the look, without a lock, where a lapsed hold may free its
    -- resource (the general path would write it down); then under the locks, where it
    -- sends the booking to the general path.
    FOR pass IN first_pass..2 LOOP
        IF pass = 1 THEN
            SELECT array_agg(r.capacity ORDER BY r.id), min(r.hold_ttl_seconds), count(*) = cardinality(ids)
                   AND bool_and(r.authority = 'local' AND NOT r.has_calendar_rules AND r.archived_at IS NULL)
            INTO caps, ttl, usable FROM resources r WHERE r.id = ANY(ids);
        ELSE
            -- The locks, and the rows as they stand under them.
            SELECT array_agg(r.capacity ORDER BY r.id), min(r.hold_ttl_seconds), count(*) = cardinality(ids)
                   AND bool_and(r.authority = 'local' AND NOT r.has_calendar_rules AND r.archived_at IS NULL)
            INTO caps, ttl, usable
            FROM (SELECT resources.id, resources.capacity, resources.hold_ttl_seconds, resources.authority,
                         resources.has_calendar_rules, resources.archived_at
                  FROM resources WHERE resources.id = ANY(ids) ORDER BY resources.id FOR NO KEY UPDATE) r;
        END IF;
        IF NOT coalesce(usable, false) THEN
            outcome := 'general';
            RETURN NEXT;
            RETURN;
        END IF;
        FOR k IN 1..n LOOP
            IF NOT p_pooled[k] AND p_quantities[k] > caps[array_position(ids, p_targets[k])] THEN
                outcome := 'general';
                RETURN NEXT;
                RETURN;
            END IF;
        END LOOP;
        IF needs IS NULL AND 1 < ANY(caps) THEN
            SELECT array_agg((SELECT CASE WHEN x.rid = ANY(members) THEN NULL ELSE sum(i.q)::integer END
                              FROM unnest(p_targets, p_pooled, p_quantities) AS i(t, pooled, q)
                              WHERE i.t = x.rid AND NOT i.pooled) ORDER BY x.n)
            INTO needs
            FROM unnest(ids) WITH ORDINALITY AS x(rid, n);
        END IF;
        -- In a statement after the lock's: its snapshot includes every committed
        -- competitor. Each resource's load is read on its own (`reservation_load`: on
        -- capacity N its load timeline, whatever the number of bookings on the range).
        SELECT array_agg(l.peak ORDER BY x.n), array_agg(l.lapsed ORDER BY x.n)
        INTO live_peak, lapsed
        FROM unnest(ids) WITH ORDINALITY AS x(rid, n)
        CROSS JOIN LATERAL reservation_load(x.rid, p_start, p_end, p_now, NULL, needs[x.n]) l;
        IF pass = 2 AND true = ANY(lapsed) THEN
            outcome := 'general';
            RETURN NEXT;
            RETURN;
        END IF;

        own := array_fill(0::bigint, ARRAY[cardinality(ids)]);
        refused := '{}';
        picked := '{}';
        FOR k IN 1..n LOOP
            fits := false;
            IF p_pooled[k] THEN
                SELECT array_agg(m.resource_id ORDER BY
                           CASE WHEN p.strategy = 'least_booked' THEN b.live END,
                           CASE WHEN p.strategy = 'least_booked' THEN m.resource_id END, m.position)
                INTO candidates
                FROM pool_members m JOIN pools p ON p.id = m.pool_id
                LEFT JOIN LATERAL (
                    SELECT count(*) AS live FROM reservations r
                    WHERE p.strategy = 'least_booked' AND r.resource_id = m.resource_id
                      AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
                      AND r.period && tstzrange(p_start - interval '7 days', p_end + interval '7 days', '[)')
                      AND NOT (r.status = 'HELD' AND r.expires_at <= p_now)) b ON true
                WHERE m.pool_id = p_targets[k];
            ELSE
                candidates := ARRAY[p_targets[k]];
            END IF;
            FOREACH candidate IN ARRAY candidates LOOP
                at := array_position(ids, candidate);
                IF p_quantities[k] > caps[at] THEN
                    CONTINUE;
                END IF;
                fits := lapsed[at] OR live_peak[at] + own[at] + p_quantities[k] <= caps[at];
                IF fits THEN
                    own[at] := own[at] + p_quantities[k];
                    picked := picked || candidate;
                    EXIT;
                END IF;
            END LOOP;
            IF NOT fits THEN
                refused := refused || (k - 1)::smallint;
            END IF;
        END LOOP;
        IF cardinality(refused) > 0 THEN
            -- Nothing written: a crash that lost this commit would lose only a refusal.
            PERFORM set_config('synchronous_commit', 'off', true);
            outcome := 'unavailable';
            FOREACH item IN ARRAY refused LOOP
                RETURN NEXT;
            END LOOP;
            RETURN;
        END IF;
    END LOOP;

    -- Every item keeps the lead's expiry (the shortest hold time among the booking's
    -- resources), so the booking lapses as one; its kept range is its period (no
    -- buffers here), given so that the trigger need not read the resource again.
    INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, status,
                                   expires_at, failure_reason, source, created_at, updated_at, metadata, acted_by,
                                   buffered, booking_id, item, pool_id)
    SELECT i.id, i.rid, caps[array_position(ids, i.rid)], p_owner, p_start, p_end, i.q, new_status,
           CASE WHEN p_confirm THEN NULL ELSE p_now + make_interval(secs => ttl) END, NULL, 'request', p_now, p_now,
           p_metadata, p_owner, range, p_ids[1], (i.n - 1)::smallint, CASE WHEN i.pooled THEN i.t END
    FROM unnest(p_ids, picked, p_quantities, p_pooled, p_targets) WITH ORDINALITY AS i(id, rid, q, pooled, t, n);
    outcome := 'reserved';
    item := 0;
    id := p_ids[1];
    resource_id := picked[1];
    owner := p_owner;
    starts_at := p_start;
    ends_at := p_end;
    quantity := p_quantities[1];
    status := new_status;
    expires_at := CASE WHEN p_confirm THEN NULL ELSE p_now + make_interval(secs => ttl) END;
    source := 'request';
    created_at := p_now;
    updated_at := p_now;
    metadata := p_metadata;
    acted_by := p_owner;
    INSERT INTO outbox (id, kind, subject_id, payload, created_at, next_attempt_at)
    VALUES (p_event_id, CASE WHEN p_confirm THEN 'reservation.confirmed' ELSE 'reservation.held' END, p_ids[1],
            reservation_event(p_ids[1], picked[1], p_owner, p_start, p_end, p_quantities[1], new_status, 'request', NULL,
                              p_metadata, p_owner, reservation_items(p_ids[1], picked[1], p_quantities[1])),
            p_now, p_now)
    RETURNING outbox.payload -> 'items' INTO items;
    RETURN NEXT;
END
$$;
