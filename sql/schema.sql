--
-- PostgreSQL database dump
--

--
-- Name: btree_gist; Type: EXTENSION; Schema: -; Owner: -
--

CREATE EXTENSION IF NOT EXISTS btree_gist WITH SCHEMA public;

--
-- Name: EXTENSION btree_gist; Type: COMMENT; Schema: -; Owner: -
--

COMMENT ON EXTENSION btree_gist IS 'support for indexing common datatypes in GiST';

--
-- Name: idempotency_state; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.idempotency_state AS text
	CONSTRAINT idempotency_keys_state_known CHECK ((VALUE = ANY ('{processing,completed}'::text[])));

--
-- Name: outbox_kind; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.outbox_kind AS text
	CONSTRAINT outbox_kind_known CHECK ((VALUE = ANY ('{reservation.held,reservation.confirmed,reservation.released,reservation.expired,reservation.cancelled,reservation.failed,reservation.rescheduled,reservation.updated,reservation.extended,waitlist.offered,waitlist.offer_expired,waitlist.cancelled,webhook.endpoint_disabled,intent.requested}'::text[])));

--
-- Name: outbox_topic; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.outbox_topic AS text
	CONSTRAINT outbox_topic_known CHECK ((VALUE = ANY ('{events,intents}'::text[])));

--
-- Name: reservation_failure_reason; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.reservation_failure_reason AS text
	CONSTRAINT reservations_failure_reason_known CHECK ((VALUE = ANY ('{race,auth,upstream}'::text[])));

--
-- Name: reservation_hold_result; Type: TYPE; Schema: public; Owner: -
--

CREATE TYPE public.reservation_hold_result AS (
	outcome text,
	capacity integer,
	id uuid,
	resource_id uuid,
	owner text,
	starts_at timestamp with time zone,
	ends_at timestamp with time zone,
	quantity integer,
	status text,
	expires_at timestamp with time zone,
	failure_reason text,
	source text,
	created_at timestamp with time zone,
	updated_at timestamp with time zone,
	metadata jsonb,
	acted_by text,
	rules_version bigint,
	event jsonb
);

--
-- Name: reservation_metadata; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.reservation_metadata AS jsonb
	CONSTRAINT reservations_metadata_object CHECK ((jsonb_typeof(VALUE) = 'object'::text));

--
-- Name: reservation_source; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.reservation_source AS text
	CONSTRAINT reservations_source_known CHECK ((VALUE = ANY ('{request,waitlist_offer}'::text[])));

--
-- Name: reservation_status; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.reservation_status AS text
	CONSTRAINT reservations_status_known CHECK ((VALUE = ANY ('{HELD,CONFIRMING,CONFIRMED,RELEASED,EXPIRED,CANCELLED,FAILED}'::text[])));

--
-- Name: idempotency_claim(text, text, text, text, bytea, timestamp with time zone, timestamp with time zone, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.idempotency_claim(p_principal text, p_method text, p_route text, p_key text, p_fingerprint bytea, p_now timestamp with time zone, p_expires_at timestamp with time zone, p_wait text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
    session_timeout text := current_setting('lock_timeout');
    claimed boolean;
BEGIN
    PERFORM set_config('lock_timeout', p_wait, true);
    INSERT INTO idempotency_keys (principal, method, route, key, fingerprint, state, created_at, expires_at)
    VALUES (p_principal, p_method, p_route, p_key, p_fingerprint, 'processing', p_now, p_expires_at)
    ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO NOTHING;
    claimed := FOUND;
    PERFORM set_config('lock_timeout', session_timeout, true);
    RETURN claimed;
END
$$;

--
-- Name: outbox_claim_due(text, timestamp with time zone, integer, integer, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.outbox_claim_due(p_topic text, p_now timestamp with time zone, p_limit integer, p_window integer, p_lease timestamp with time zone) RETURNS TABLE(id uuid, kind text, subject_id uuid, payload jsonb, created_at timestamp with time zone, attempts integer)
    LANGUAGE plpgsql
    SET enable_bitmapscan TO 'off'
    SET enable_seqscan TO 'off'
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH due AS MATERIALIZED (
        SELECT o.id, o.subject_id, o.seq, o.claimed_until FROM outbox o
        WHERE o.topic = p_topic AND o.published_at IS NULL AND o.next_attempt_at <= p_now
          AND NOT EXISTS (SELECT 1 FROM outbox_stalled_subjects s
                          WHERE s.topic = o.topic AND s.subject_id = o.subject_id AND s.head_seq < o.seq)
        ORDER BY o.seq LIMIT p_window),
    heads AS MATERIALIZED (
        SELECT DISTINCT ON (d.subject_id) d.id, d.claimed_until FROM due d ORDER BY d.subject_id, d.seq),
    claimable AS (
        SELECT o.id FROM outbox o
        WHERE o.id = ANY (ARRAY(SELECT h.id FROM heads h WHERE h.claimed_until IS NULL OR h.claimed_until <= p_now))
          AND o.published_at IS NULL AND (o.claimed_until IS NULL OR o.claimed_until <= p_now)
        LIMIT p_limit FOR NO KEY UPDATE SKIP LOCKED),
    claimed AS (
        UPDATE outbox o SET claimed_until = p_lease FROM claimable c WHERE o.id = c.id
        RETURNING o.id, o.seq, o.kind, o.subject_id, o.payload, o.created_at, o.attempts)
    SELECT c.id, c.kind::text, c.subject_id, c.payload, c.created_at, c.attempts FROM claimed c ORDER BY c.seq;
END
$$;

--
-- Name: principal_holds(text, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.principal_holds(p_owner text, p_now timestamp with time zone, OUT active bigint, OUT frees_at timestamp with time zone) RETURNS record
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM FROM principals p WHERE p.owner = p_owner FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        -- The principal's first hold. A row inserted here is as good as locked: nobody
        -- else sees it before this transaction ends, and a concurrent first's insert
        -- waits for that end and then locks the row. A row a concurrent first
        -- committed meanwhile is locked here.
        INSERT INTO principals (owner) VALUES (p_owner) ON CONFLICT ON CONSTRAINT principals_pkey DO NOTHING;
        IF NOT FOUND THEN
            PERFORM FROM principals p WHERE p.owner = p_owner FOR NO KEY UPDATE;
        END IF;
    END IF;
    SELECT count(*) FILTER (WHERE coalesce(r.item, 0) = 0), min(r.expires_at)
    INTO active, frees_at
    FROM reservations r
    WHERE r.owner = p_owner AND r.status = 'HELD' AND r.expires_at > p_now;
END
$$;

--
-- Name: reservation_booking_lapse(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_booking_lapse() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: reservation_claim_lapsed(timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_claim_lapsed(p_now timestamp with time zone) RETURNS uuid
    LANGUAGE plpgsql
    SET enable_bitmapscan TO 'off'
    SET enable_seqscan TO 'off'
    AS $$
DECLARE
    lapsed record;
    claimed uuid;
    tried uuid[] := '{}';
BEGIN
    FOR lapsed IN
        SELECT r.resource_id FROM reservations r
        WHERE r.status = 'HELD' AND r.expires_at <= p_now
        ORDER BY r.expires_at
    LOOP
        CONTINUE WHEN lapsed.resource_id = ANY (tried);
        SELECT res.id INTO claimed FROM resources res WHERE res.id = lapsed.resource_id
        FOR NO KEY UPDATE SKIP LOCKED;
        IF FOUND THEN
            RETURN claimed;
        END IF;
        -- Held by another sweep, or by a path writing its own lapses down: its holds are
        -- passed over once, and the next resource is tried.
        tried := tried || lapsed.resource_id;
    END LOOP;
    RETURN NULL;
END
$$;

--
-- Name: reservation_event(uuid, uuid, text, timestamp with time zone, timestamp with time zone, integer, text, text, text, jsonb, text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_event(p_id uuid, p_resource_id uuid, p_owner text, p_start timestamp with time zone, p_end timestamp with time zone, p_quantity integer, p_status text, p_source text, p_failure_reason text, p_metadata jsonb, p_acted_by text, p_items jsonb) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT jsonb_build_object('reservation_id', p_id, 'resource_id', p_resource_id, 'owner', p_owner,
                              'start', p_start, 'end', p_end, 'quantity', p_quantity, 'status', p_status,
                              'source', p_source, 'failure_reason', p_failure_reason,
                              'metadata', p_metadata, 'acted_by', p_acted_by,
                              'items', coalesce(p_items, jsonb_build_array(jsonb_build_object(
                                  'resource_id', p_resource_id, 'pool_id', NULL, 'quantity', p_quantity))))
$$;

--
-- Name: reservation_expire_in_way(uuid, timestamp with time zone, timestamp with time zone, integer, timestamp with time zone, uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_expire_in_way(p_resource uuid, p_start timestamp with time zone, p_end timestamp with time zone, p_quantity integer, p_now timestamp with time zone, p_except uuid DEFAULT NULL::uuid) RETURNS TABLE(id uuid, resource_id uuid, owner text, starts_at timestamp with time zone, ends_at timestamp with time zone, quantity integer, status text, expires_at timestamp with time zone, failure_reason text, source text, created_at timestamp with time zone, updated_at timestamp with time zone, metadata jsonb, acted_by text, series_id uuid)
    LANGUAGE plpgsql
    AS $_$
DECLARE
    cap integer;
    range tstzrange := tstzrange(p_start, p_end, '[)');
    left_out record;
    short record;
    oldest uuid[];
BEGIN
    SELECT r.capacity INTO cap FROM resources r WHERE r.id = p_resource;
    IF cap = 1 THEN
        RETURN QUERY SELECT * FROM reservation_expire_lapsed(ARRAY(
            SELECT b.id FROM reservations b
            WHERE b.resource_id = p_resource AND b.status = 'HELD' AND b.expires_at <= p_now
              AND b.period && range AND b.id IS DISTINCT FROM p_except), p_now);
        RETURN;
    END IF;
    SELECT x.period, x.quantity INTO left_out FROM reservations x
    WHERE x.id = p_except AND x.resource_id = p_resource AND x.status IN ('HELD', 'CONFIRMING', 'CONFIRMED');
    LOOP
        -- Each statement sees the pieces as the write-downs before it lowered them.
        SELECT s.during, s.shortfall INTO short
        FROM (SELECT l.during,
                     l.load - CASE WHEN l.during && left_out.period THEN left_out.quantity ELSE 0 END
                     + p_quantity - cap AS shortfall
              FROM resource_load l
              WHERE l.resource_id = p_resource AND l.during && range) s
        WHERE s.shortfall > 0
        ORDER BY s.during LIMIT 1;
        EXIT WHEN NOT FOUND;
        -- Planned afresh (EXECUTE), with the clock's value, as reservation_load's check: a
        -- plan kept for any time reads every booking of the range by the period's index.
        -- Among holds that lapsed at the same instant, any will do.
        EXECUTE 'SELECT array_agg(o.id) FROM ('
                '    SELECT b.id, sum(b.quantity) OVER (ORDER BY b.expires_at, b.id) - b.quantity AS before FROM ('
                '        SELECT h.id, h.quantity, h.expires_at FROM reservations h'
                '        WHERE h.resource_id = $1 AND h.status = ''HELD'' AND h.resource_capacity IS DISTINCT FROM 1'
                '          AND h.expires_at <= $2 AND h.period && $3 AND h.id IS DISTINCT FROM $5'
                '        ORDER BY h.expires_at LIMIT $4) b) o '
                'WHERE o.before < $4'
        INTO oldest USING p_resource, p_now, short.during, short.shortfall, p_except;
        EXIT WHEN oldest IS NULL;
        RETURN QUERY SELECT * FROM reservation_expire_lapsed(oldest, p_now);
    END LOOP;
END
$_$;

--
-- Name: reservation_expire_lapsed(uuid[], timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_expire_lapsed(p_ids uuid[], p_now timestamp with time zone) RETURNS TABLE(id uuid, resource_id uuid, owner text, starts_at timestamp with time zone, ends_at timestamp with time zone, quantity integer, status text, expires_at timestamp with time zone, failure_reason text, source text, created_at timestamp with time zone, updated_at timestamp with time zone, metadata jsonb, acted_by text, series_id uuid)
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: reservation_hold(uuid, uuid, text, timestamp with time zone, timestamp with time zone, integer, boolean, timestamp with time zone, jsonb, uuid, text, text, text, text, bytea, timestamp with time zone, text, smallint, jsonb, bytea, bigint, integer, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_hold(p_id uuid, p_resource uuid, p_owner text, p_start timestamp with time zone, p_end timestamp with time zone, p_quantity integer, p_confirm boolean, p_now timestamp with time zone, p_metadata jsonb, p_event_id uuid, p_principal text DEFAULT NULL::text, p_method text DEFAULT NULL::text, p_route text DEFAULT NULL::text, p_key text DEFAULT NULL::text, p_fingerprint bytea DEFAULT NULL::bytea, p_retain_until timestamp with time zone DEFAULT NULL::timestamp with time zone, p_wait text DEFAULT NULL::text, p_refused_status smallint DEFAULT NULL::smallint, p_refused_headers jsonb DEFAULT NULL::jsonb, p_refused_body bytea DEFAULT NULL::bytea, p_rules_version bigint DEFAULT NULL::bigint, p_max_holds integer DEFAULT 0, p_event_lease timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF public.reservation_hold_result
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: reservation_hold_items(uuid[], uuid[], boolean[], integer[], text, timestamp with time zone, timestamp with time zone, boolean, timestamp with time zone, jsonb, uuid, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_hold_items(p_ids uuid[], p_targets uuid[], p_pooled boolean[], p_quantities integer[], p_owner text, p_start timestamp with time zone, p_end timestamp with time zone, p_confirm boolean, p_now timestamp with time zone, p_metadata jsonb, p_event_id uuid, p_max_holds integer DEFAULT 0) RETURNS TABLE(outcome text, item smallint, id uuid, resource_id uuid, owner text, starts_at timestamp with time zone, ends_at timestamp with time zone, quantity integer, status text, expires_at timestamp with time zone, failure_reason text, source text, created_at timestamp with time zone, updated_at timestamp with time zone, metadata jsonb, acted_by text, items jsonb)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
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

--
-- Name: reservation_insert_if_fits(uuid, uuid, integer, text, timestamp with time zone, timestamp with time zone, integer, text, timestamp with time zone, text, text, timestamp with time zone, jsonb, text, uuid, smallint, uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_insert_if_fits(p_id uuid, p_resource uuid, p_capacity integer, p_owner text, p_start timestamp with time zone, p_end timestamp with time zone, p_quantity integer, p_status text, p_expires_at timestamp with time zone, p_failure_reason text, p_source text, p_now timestamp with time zone, p_metadata jsonb, p_acted_by text, p_booking_id uuid, p_item smallint, p_pool_id uuid) RETURNS TABLE(inserted boolean, id uuid, resource_id uuid, owner text, starts_at timestamp with time zone, ends_at timestamp with time zone, quantity integer, status text, expires_at timestamp with time zone, failure_reason text, source text, created_at timestamp with time zone, updated_at timestamp with time zone, metadata jsonb, acted_by text)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
BEGIN
    -- The lapsed holds in the way first, in a statement of their own, so that the
    -- insert's snapshot is taken after them (and after the locks of their bookings'
    -- leads): their capacity is free for the load and the exclusion constraint.
    RETURN QUERY
    SELECT false, e.id, e.resource_id, e.owner, e.starts_at, e.ends_at, e.quantity, e.status, e.expires_at,
           e.failure_reason, e.source, e.created_at, e.updated_at, e.metadata, e.acted_by
    FROM reservation_expire_in_way(p_resource, p_start, p_end, p_quantity, p_now) e;
    RETURN QUERY
    WITH ins AS (
        INSERT INTO reservations AS r (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity,
                                       status, expires_at, failure_reason, source, created_at, updated_at,
                                       metadata, acted_by, booking_id, item, pool_id)
        SELECT p_id, p_resource, p_capacity, p_owner, p_start, p_end, p_quantity, p_status, p_expires_at,
               p_failure_reason, p_source, p_now, p_now, p_metadata, p_acted_by, p_booking_id, p_item, p_pool_id
        WHERE (SELECT l.peak FROM reservation_load(p_resource, p_start, p_end, p_now, NULL, p_quantity) l)
              + p_quantity <= p_capacity
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status::text, r.expires_at,
                  r.failure_reason::text, r.source::text, r.created_at, r.updated_at, r.metadata::jsonb, r.acted_by
    ), ev AS (
        -- A CONFIRMING booking records its event when the system of record settles it.
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT CASE ins.status WHEN 'HELD' THEN 'reservation.held' ELSE 'reservation.confirmed' END, ins.id,
               reservation_event(ins.id, ins.resource_id, ins.owner, ins.starts_at, ins.ends_at, ins.quantity,
                                 ins.status, ins.source, ins.failure_reason, ins.metadata, ins.acted_by, NULL),
               p_now, p_now
        FROM ins
        WHERE ins.status IN ('HELD', 'CONFIRMED') AND p_booking_id IS NULL
    )
    SELECT true, ins.* FROM ins;
END
$$;

--
-- Name: reservation_is_item(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_is_item(p_id uuid) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT EXISTS (SELECT 1 FROM reservations r WHERE r.id = p_id AND r.booking_id <> r.id)
$$;

--
-- Name: reservation_items(uuid, uuid, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_items(p_id uuid, p_resource_id uuid, p_quantity integer) RETURNS jsonb
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
BEGIN
    RETURN coalesce(
        (SELECT jsonb_agg(jsonb_build_object('resource_id', i.resource_id, 'pool_id', i.pool_id,
                                             'quantity', i.quantity) ORDER BY i.item)
         FROM reservations i WHERE i.booking_id = p_id),
        jsonb_build_array(jsonb_build_object('resource_id', p_resource_id, 'pool_id', NULL, 'quantity', p_quantity)));
END
$$;

--
-- Name: reservation_load(uuid, timestamp with time zone, timestamp with time zone, timestamp with time zone, uuid, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_load(p_resource uuid, p_start timestamp with time zone, p_end timestamp with time zone, p_now timestamp with time zone, p_except uuid DEFAULT NULL::uuid, p_need integer DEFAULT NULL::integer, OUT peak bigint, OUT lapsed boolean) RETURNS record
    LANGUAGE plpgsql STABLE
    AS $_$
DECLARE
    live bigint;
    left_out record;
    cap integer;
BEGIN
    SELECT r.capacity INTO cap FROM resources r WHERE r.id = p_resource;
    IF cap > 1 THEN
        SELECT x.period, x.quantity INTO left_out FROM reservations x
        WHERE x.id = p_except AND x.resource_id = p_resource AND x.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
          AND x.resource_capacity IS DISTINCT FROM 1;
        SELECT coalesce(max(l.load - CASE WHEN l.during && left_out.period THEN left_out.quantity ELSE 0 END), 0)
        INTO peak
        FROM resource_load l
        WHERE l.resource_id = p_resource AND l.during && tstzrange(p_start, p_end, '[)');
        IF p_need IS NOT NULL AND peak + p_need <= cap THEN
            lapsed := false;
            RETURN;
        END IF;
        -- The resource's lapsed holds, by its expiry index, and whether one meets the
        -- range. Planned afresh each time (EXECUTE), with the clock's value: a plan
        -- kept for any time cannot tell that `expires_at <= now` is rare, and reads the
        -- resource's live bookings instead (by the period's index, or a scan), a cost
        -- that grows with the bookings on the range. The planner needs the table's
        -- statistics for it (autovacuum's analyze). The lower bound keeps the estimate
        -- small without them; a hold lapsed longer ago than a week, which the sweep has
        -- not written down, still counts in the pieces: it can only refuse, never
        -- overbook.
        EXECUTE 'SELECT coalesce(bool_or(h.period && $3 AND h.id IS DISTINCT FROM $4), false) FROM reservations h '
                'WHERE h.resource_id = $1 AND h.status = ''HELD'' AND h.resource_capacity IS DISTINCT FROM 1 '
                'AND h.expires_at <= $2 AND h.expires_at > $2 - interval ''7 days'''
        INTO lapsed USING p_resource, p_now, tstzrange(p_start, p_end, '[)'), p_except;
        IF NOT lapsed OR p_need IS NOT NULL THEN
            RETURN;
        END IF;
    END IF;
    SELECT count(*) FILTER (WHERE NOT (status = 'HELD' AND expires_at <= p_now)),
           coalesce(sum(quantity) FILTER (WHERE NOT (status = 'HELD' AND expires_at <= p_now)), 0),
           coalesce(bool_or(status = 'HELD' AND expires_at <= p_now), false)
    INTO live, peak, lapsed
    FROM reservations
    WHERE resource_id = p_resource AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
      AND period && tstzrange(p_start, p_end, '[)')
      AND id IS DISTINCT FROM p_except;
    IF live <= 1 THEN
        RETURN;
    END IF;
    -- +quantity at each (clipped) start, -quantity at each end, ends first at one
    -- instant so that ranges are half-open; the running sum's maximum is the peak.
    WITH live_claims AS (
        SELECT starts_at, ends_at, quantity
        FROM reservations
        WHERE resource_id = p_resource AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
          AND period && tstzrange(p_start, p_end, '[)')
          AND id IS DISTINCT FROM p_except
          AND NOT (status = 'HELD' AND expires_at <= p_now)
    ), events AS (
        SELECT greatest(starts_at, p_start) AS at, quantity AS delta FROM live_claims
        UNION ALL SELECT least(ends_at, p_end), -quantity FROM live_claims
    )
    SELECT coalesce(max(load), 0) INTO peak
    FROM (SELECT sum(delta) OVER (ORDER BY at, delta ROWS UNBOUNDED PRECEDING) AS load FROM events) running;
END
$_$;

--
-- Name: reservation_load_follow(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_load_follow() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    counted_before boolean := TG_OP <> 'INSERT' AND OLD.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
                              AND OLD.resource_capacity IS DISTINCT FROM 1;
    counted_after boolean := TG_OP <> 'DELETE' AND NEW.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
                             AND NEW.resource_capacity IS DISTINCT FROM 1;
    covered tstzmultirange;
    changed tstzmultirange;
    piece record;
    at timestamptz;
BEGIN
    IF counted_before AND counted_after AND OLD.resource_id = NEW.resource_id AND OLD.period = NEW.period
       AND OLD.quantity = NEW.quantity THEN
        RETURN NULL;
    END IF;
    IF counted_before THEN
        covered := '{}';
        LOOP
            WITH lowered AS (
                UPDATE resource_load l SET load = l.load - OLD.quantity
                WHERE l.resource_id = OLD.resource_id AND l.during <@ OLD.period AND NOT l.during <@ covered
                RETURNING l.during
            )
            SELECT range_agg(lowered.during) INTO changed FROM lowered;
            IF changed IS NULL THEN
                RAISE EXCEPTION 'the load timeline of resource % does not cover % (reservation %)',
                    OLD.resource_id, OLD.period, OLD.id;
            END IF;
            covered := covered + changed;
            EXIT WHEN covered @> OLD.period;
        END LOOP;
    END IF;
    IF counted_after THEN
        PERFORM 1 FROM resources WHERE resources.id = NEW.resource_id FOR NO KEY UPDATE;
        FOREACH at IN ARRAY ARRAY[lower(NEW.period), upper(NEW.period)] LOOP
            SELECT l.during, l.load INTO piece FROM resource_load l
            WHERE l.resource_id = NEW.resource_id AND l.during @> at AND lower(l.during) < at
            FOR UPDATE;
            IF FOUND THEN
                UPDATE resource_load l SET during = tstzrange(lower(piece.during), at, '[)')
                WHERE l.resource_id = NEW.resource_id AND l.during = piece.during;
                INSERT INTO resource_load (resource_id, during, load)
                VALUES (NEW.resource_id, tstzrange(at, upper(piece.during), '[)'), piece.load);
            END IF;
        END LOOP;
        -- The pieces of the period (split at its bounds, so inside it) are raised; the
        -- gaps between them are new pieces holding the quantity alone. One statement:
        -- a range no booking had is one insert.
        WITH raised AS (
            UPDATE resource_load l SET load = l.load + NEW.quantity
            WHERE l.resource_id = NEW.resource_id AND l.during <@ NEW.period
            RETURNING l.during
        )
        INSERT INTO resource_load (resource_id, during, load)
        SELECT NEW.resource_id, gap, NEW.quantity
        FROM unnest(tstzmultirange(NEW.period) - coalesce((SELECT range_agg(raised.during) FROM raised), '{}')) AS gap;
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: reservation_move_if_fits(uuid, uuid, integer, timestamp with time zone, timestamp with time zone, integer, timestamp with time zone, jsonb, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_move_if_fits(p_id uuid, p_resource uuid, p_capacity integer, p_start timestamp with time zone, p_end timestamp with time zone, p_quantity integer, p_now timestamp with time zone, p_metadata jsonb, p_acted_by text, p_event text) RETURNS TABLE(moved boolean, id uuid, resource_id uuid, owner text, starts_at timestamp with time zone, ends_at timestamp with time zone, quantity integer, status text, expires_at timestamp with time zone, failure_reason text, source text, created_at timestamp with time zone, updated_at timestamp with time zone, metadata jsonb, acted_by text)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
BEGIN
    -- The lapsed holds in the way first, in a statement of their own (see
    -- reservation_insert_if_fits).
    RETURN QUERY
    SELECT false, e.id, e.resource_id, e.owner, e.starts_at, e.ends_at, e.quantity, e.status, e.expires_at,
           e.failure_reason, e.source, e.created_at, e.updated_at, e.metadata, e.acted_by
    FROM reservation_expire_in_way(p_resource, p_start, p_end, p_quantity, p_now, p_id) e;
    RETURN QUERY
    WITH upd AS (
        UPDATE reservations r
        SET starts_at = p_start, ends_at = p_end, quantity = p_quantity, metadata = p_metadata,
            acted_by = p_acted_by, updated_at = p_now,
            reschedules = r.reschedules + CASE WHEN p_event = 'reservation.rescheduled' THEN 1 ELSE 0 END
        WHERE r.id = p_id
          AND (SELECT l.peak FROM reservation_load(p_resource, p_start, p_end, p_now, p_id, p_quantity) l) + p_quantity
              <= p_capacity
        RETURNING r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status::text, r.expires_at,
                  r.failure_reason::text, r.source::text, r.created_at, r.updated_at, r.metadata::jsonb, r.acted_by
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT p_event, upd.id,
               reservation_event(upd.id, upd.resource_id, upd.owner, upd.starts_at, upd.ends_at, upd.quantity,
                                 upd.status, upd.source, upd.failure_reason, upd.metadata, upd.acted_by,
                                 reservation_items(upd.id, upd.resource_id, upd.quantity))
               || reservation_series_field(upd.id),
               p_now, p_now
        FROM upd
        -- An item of a booking of several: its lead's move is the booking's event.
        WHERE NOT reservation_is_item(upd.id)
    )
    SELECT true, upd.* FROM upd;
END
$$;

--
-- Name: reservations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.reservations (
    id uuid NOT NULL,
    resource_id uuid NOT NULL,
    resource_capacity integer,
    owner text NOT NULL,
    starts_at timestamp with time zone NOT NULL,
    ends_at timestamp with time zone NOT NULL,
    period tstzrange GENERATED ALWAYS AS (tstzrange(starts_at, ends_at, '[)'::text)) STORED,
    quantity integer NOT NULL,
    status public.reservation_status NOT NULL,
    expires_at timestamp with time zone,
    failure_reason public.reservation_failure_reason,
    source public.reservation_source NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    metadata public.reservation_metadata DEFAULT '{}'::jsonb NOT NULL,
    acted_by text,
    buffered tstzrange NOT NULL,
    booking_id uuid,
    item smallint,
    pool_id uuid,
    reschedules integer DEFAULT 0 NOT NULL,
    series_id uuid
);

--
-- Name: reservation_row_valid(public.reservations); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_row_valid(r public.reservations) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
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

--
-- Name: reservation_series_field(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_series_field(p_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT coalesce((SELECT jsonb_strip_nulls(jsonb_build_object('series_id', r.series_id))
                     FROM reservations r WHERE r.id = p_id), '{}'::jsonb)
$$;

--
-- Name: reservation_snapshot(uuid, uuid, text, timestamp with time zone, timestamp with time zone, integer, text, timestamp with time zone, text, text, timestamp with time zone, timestamp with time zone, jsonb, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservation_snapshot(p_id uuid, p_resource_id uuid, p_owner text, p_start timestamp with time zone, p_end timestamp with time zone, p_quantity integer, p_status text, p_expires_at timestamp with time zone, p_failure_reason text, p_source text, p_created_at timestamp with time zone, p_updated_at timestamp with time zone, p_metadata jsonb, p_acted_by text) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT jsonb_build_object('id', p_id, 'resource_id', p_resource_id, 'owner', p_owner, 'starts_at', p_start,
                              'ends_at', p_end, 'quantity', p_quantity, 'status', p_status,
                              'expires_at', p_expires_at, 'failure_reason', p_failure_reason, 'source', p_source,
                              'created_at', p_created_at, 'updated_at', p_updated_at, 'metadata', p_metadata,
                              'acted_by', p_acted_by)
$$;

--
-- Name: reservations_set_buffered(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reservations_set_buffered() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    before_minutes integer;
    after_minutes integer;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.starts_at = OLD.starts_at AND NEW.ends_at = OLD.ends_at THEN
        NEW.buffered := OLD.buffered;
        RETURN NEW;
    END IF;
    SELECT buffer_before_minutes, buffer_after_minutes INTO before_minutes, after_minutes
    FROM resources WHERE id = NEW.resource_id;
    NEW.buffered := tstzrange(NEW.starts_at - make_interval(mins => coalesce(before_minutes, 0)),
                              NEW.ends_at + make_interval(mins => coalesce(after_minutes, 0)), '[)');
    RETURN NEW;
END
$$;

--
-- Name: resource_live_load(uuid, timestamp with time zone, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_live_load(p_resource uuid, p_from timestamp with time zone, p_to timestamp with time zone, p_now timestamp with time zone) RETURNS TABLE(starts_at timestamp with time zone, ends_at timestamp with time zone, load bigint)
    LANGUAGE plpgsql STABLE
    AS $_$
BEGIN
    RETURN QUERY EXECUTE
        'WITH lapsed AS MATERIALIZED (
             SELECT h.period, h.quantity FROM reservations h
             WHERE h.resource_id = $1 AND h.status = ''HELD'' AND h.resource_capacity IS DISTINCT FROM 1
               AND h.expires_at <= $4 AND h.expires_at > $4 - interval ''7 days''
               AND h.period && tstzrange($2, $3, ''[)'')
         ), pieces AS (
             SELECT l.during, l.load - coalesce((SELECT sum(x.quantity) FROM lapsed x WHERE x.period && l.during), 0)
                    AS live
             FROM resource_load l
             WHERE l.resource_id = $1 AND l.during && tstzrange($2, $3, ''[)'') AND l.load > 0
         )
         SELECT greatest(lower(p.during), $2), least(upper(p.during), $3), p.live::bigint
         FROM pieces p WHERE p.live > 0 ORDER BY p.during'
    USING p_resource, p_from, p_to, p_now;
END
$_$;

--
-- Name: resource_load_mismatches(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_load_mismatches() RETURNS TABLE(resource_id uuid, during tstzrange, recorded bigint, recomputed bigint)
    LANGUAGE sql STABLE
    AS $$
    WITH counted AS (
        SELECT r.resource_id, r.period, r.quantity FROM reservations r
        WHERE r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND r.resource_capacity IS DISTINCT FROM 1
    ), bounds AS (
        SELECT c.resource_id, lower(c.period) AS at FROM counted c
        UNION SELECT c.resource_id, upper(c.period) FROM counted c
        UNION SELECT l.resource_id, lower(l.during) FROM resource_load l
        UNION SELECT l.resource_id, upper(l.during) FROM resource_load l
    ), intervals AS (
        SELECT b.resource_id, tstzrange(b.at, lead(b.at) OVER (PARTITION BY b.resource_id ORDER BY b.at), '[)') AS during
        FROM bounds b
    ), compared AS (
        SELECT i.resource_id, i.during,
               (SELECT sum(l.load) FROM resource_load l
                WHERE l.resource_id = i.resource_id AND l.during && i.during) AS recorded,
               (SELECT bool_or(l.during <> i.during) FROM resource_load l
                WHERE l.resource_id = i.resource_id AND l.during && i.during) AS reaches_across,
               (SELECT sum(c.quantity) FROM counted c
                WHERE c.resource_id = i.resource_id AND c.period && i.during) AS recomputed
        FROM intervals i
        WHERE NOT upper_inf(i.during)
    )
    SELECT c.resource_id, c.during, coalesce(c.recorded, 0), coalesce(c.recomputed, 0)
    FROM compared c
    WHERE coalesce(c.recorded, 0) <> coalesce(c.recomputed, 0) OR c.reaches_across
$$;

--
-- Name: resources_rules_version(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resources_rules_version() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.rules_version := OLD.rules_version + 1;
    RETURN NEW;
END
$$;

--
-- Name: uuidv7(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.uuidv7() RETURNS uuid
    LANGUAGE sql PARALLEL SAFE
    AS $$
    SELECT encode(
        set_bit(
            set_bit(
                overlay(uuid_send(gen_random_uuid())
                        PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                        FROM 1 FOR 6),
                52, 1),
            53, 1),
        'hex')::uuid
$$;

--
-- Name: approvals; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approvals (
    id uuid NOT NULL,
    reservation_id uuid,
    principal text NOT NULL,
    action text NOT NULL,
    fingerprint bytea NOT NULL,
    created_at timestamp with time zone NOT NULL,
    waitlist_entry_id uuid,
    CONSTRAINT approvals_action_known CHECK ((action = ANY (ARRAY['confirm'::text, 'wait_for_seat'::text]))),
    CONSTRAINT approvals_names_its_subject CHECK ((((action = 'confirm'::text) AND (reservation_id IS NOT NULL)) OR ((action = 'wait_for_seat'::text) AND (waitlist_entry_id IS NOT NULL))))
);

--
-- Name: calendar_feeds; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.calendar_feeds (
    id uuid NOT NULL,
    token_hash bytea NOT NULL,
    owner text NOT NULL,
    resource_id uuid,
    created_at timestamp with time zone NOT NULL,
    rotated_at timestamp with time zone,
    CONSTRAINT calendar_feeds_token_hash_sha256 CHECK ((octet_length(token_hash) = 32))
);

--
-- Name: handovers_owed; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.handovers_owed (
    id bigint NOT NULL,
    resource_id uuid NOT NULL,
    starts_at timestamp with time zone NOT NULL,
    ends_at timestamp with time zone NOT NULL,
    owed_at timestamp with time zone NOT NULL
);

--
-- Name: handovers_owed_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.handovers_owed ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.handovers_owed_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: idempotency_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.idempotency_keys (
    principal text NOT NULL,
    method text NOT NULL,
    route text NOT NULL,
    key text NOT NULL,
    fingerprint bytea NOT NULL,
    state public.idempotency_state NOT NULL,
    response_status smallint,
    response_headers jsonb,
    response_body bytea,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    response_reservation jsonb,
    CONSTRAINT idempotency_keys_completed_has_response CHECK ((((state)::text <> 'completed'::text) OR ((response_status IS NOT NULL) AND ((response_body IS NOT NULL) OR (response_reservation IS NOT NULL)))))
);

--
-- Name: intents; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.intents (
    id uuid NOT NULL,
    reservation_id uuid,
    upstream_ref text NOT NULL,
    state text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    lease_owner uuid,
    locked_until timestamp with time zone,
    not_before timestamp with time zone NOT NULL,
    charge_id text,
    last_error text,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    kind text DEFAULT 'reserve'::text NOT NULL,
    waitlist_entry_id uuid,
    CONSTRAINT intents_cancel_names_charge CHECK (((kind <> 'cancel'::text) OR (charge_id IS NOT NULL))),
    CONSTRAINT intents_kind_known CHECK ((kind = ANY (ARRAY['reserve'::text, 'cancel'::text, 'wait'::text]))),
    CONSTRAINT intents_only_waits_wait CHECK (((kind = 'wait'::text) OR (state <> ALL (ARRAY['WAITING_FOR_SEAT'::text, 'CANCELLED'::text])))),
    CONSTRAINT intents_reserving_is_leased CHECK (((state <> 'RESERVING'::text) OR ((lease_owner IS NOT NULL) AND (locked_until IS NOT NULL)))),
    CONSTRAINT intents_state_known CHECK ((state = ANY (ARRAY['REQUESTED'::text, 'WAITING_FOR_SEAT'::text, 'RESERVING'::text, 'SUCCEEDED'::text, 'FAILED_RACE'::text, 'FAILED_AUTH'::text, 'FAILED_UPSTREAM'::text, 'CANCELLED'::text]))),
    CONSTRAINT intents_succeeded_has_charge CHECK (((state <> 'SUCCEEDED'::text) OR (charge_id IS NOT NULL))),
    CONSTRAINT intents_wait_names_entry CHECK (((kind = 'wait'::text) = (waitlist_entry_id IS NOT NULL))),
    CONSTRAINT intents_write_names_reservation CHECK (((reservation_id IS NOT NULL) OR ((kind = 'wait'::text) AND (state = ANY (ARRAY['WAITING_FOR_SEAT'::text, 'CANCELLED'::text])))))
);

--
-- Name: list_cursor_key; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.list_cursor_key (
    id smallint DEFAULT 1 NOT NULL,
    secret bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT list_cursor_key_one_row CHECK ((id = 1)),
    CONSTRAINT list_cursor_key_secret_length CHECK ((octet_length(secret) = 32))
);

--
-- Name: outbox; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outbox (
    id uuid DEFAULT public.uuidv7() NOT NULL,
    seq bigint NOT NULL,
    kind public.outbox_kind NOT NULL,
    subject_id uuid NOT NULL,
    payload jsonb NOT NULL,
    created_at timestamp with time zone NOT NULL,
    published_at timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone NOT NULL,
    last_error text,
    topic public.outbox_topic DEFAULT 'events'::text NOT NULL,
    claimed_until timestamp with time zone
)
WITH (fillfactor='85', autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='10000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='10000');

--
-- Name: COLUMN outbox.next_attempt_at; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.outbox.next_attempt_at IS 'When the event is due: when it was written, or after a failed attempt, when its backoff ends.';

--
-- Name: COLUMN outbox.claimed_until; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.outbox.claimed_until IS 'The lease of the relay that claimed the event: no other relay takes it, or its subject''s later events, before then.';

--
-- Name: outbox_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.outbox ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.outbox_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: outbox_stalled_subjects; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outbox_stalled_subjects (
    topic text NOT NULL,
    subject_id uuid NOT NULL,
    head_seq bigint NOT NULL
);

--
-- Name: pool_members; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.pool_members (
    pool_id uuid NOT NULL,
    resource_id uuid NOT NULL,
    "position" integer NOT NULL
);

--
-- Name: pools; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.pools (
    id uuid NOT NULL,
    name text NOT NULL,
    strategy text NOT NULL,
    created_by text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT pools_name_length CHECK (((char_length(name) >= 1) AND (char_length(name) <= 200))),
    CONSTRAINT pools_strategy_known CHECK ((strategy = ANY (ARRAY['least_booked'::text, 'ordered'::text])))
);

--
-- Name: principals; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.principals (
    owner text NOT NULL
);

--
-- Name: resource_load; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.resource_load (
    resource_id uuid NOT NULL,
    during tstzrange NOT NULL,
    load bigint NOT NULL,
    CONSTRAINT resource_load_bounded CHECK (((NOT lower_inf(during)) AND (NOT upper_inf(during)) AND (NOT isempty(during)))),
    CONSTRAINT resource_load_not_negative CHECK ((load >= 0))
);

--
-- Name: resources; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.resources (
    id uuid NOT NULL,
    name text NOT NULL,
    capacity integer NOT NULL,
    authority text NOT NULL,
    upstream_ref text,
    hold_ttl_seconds integer NOT NULL,
    offer_ttl_seconds integer NOT NULL,
    created_by text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    archived_at timestamp with time zone,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    time_zone text DEFAULT 'UTC'::text NOT NULL,
    schedule jsonb,
    buffer_before_minutes integer DEFAULT 0 NOT NULL,
    buffer_after_minutes integer DEFAULT 0 NOT NULL,
    min_notice_minutes integer DEFAULT 0 NOT NULL,
    max_advance_days integer,
    slot_minutes integer,
    rules_version bigint DEFAULT 0 NOT NULL,
    cancel_notice_minutes integer,
    reschedule_notice_minutes integer,
    max_reschedules integer,
    max_hold_seconds integer,
    default_duration_minutes integer,
    booking_limits jsonb,
    has_calendar_rules boolean GENERATED ALWAYS AS (((schedule IS NOT NULL) OR (buffer_before_minutes > 0) OR (buffer_after_minutes > 0) OR (min_notice_minutes > 0) OR (max_advance_days IS NOT NULL) OR (slot_minutes IS NOT NULL) OR (booking_limits IS NOT NULL))) STORED,
    CONSTRAINT resources_authority_known CHECK ((authority = ANY (ARRAY['local'::text, 'upstream'::text]))),
    CONSTRAINT resources_booking_limits_array CHECK (((booking_limits IS NULL) OR (jsonb_typeof(booking_limits) = 'array'::text))),
    CONSTRAINT resources_buffers_range CHECK ((((buffer_before_minutes >= 0) AND (buffer_before_minutes <= 1440)) AND ((buffer_after_minutes >= 0) AND (buffer_after_minutes <= 1440)))),
    CONSTRAINT resources_cancel_notice_range CHECK (((cancel_notice_minutes IS NULL) OR ((cancel_notice_minutes >= 0) AND (cancel_notice_minutes <= 525600)))),
    CONSTRAINT resources_capacity_range CHECK (((capacity >= 1) AND (capacity <= 100000))),
    CONSTRAINT resources_default_duration_range CHECK (((default_duration_minutes IS NULL) OR ((default_duration_minutes >= 1) AND (default_duration_minutes <= 1440)))),
    CONSTRAINT resources_max_advance_range CHECK (((max_advance_days IS NULL) OR ((max_advance_days >= 1) AND (max_advance_days <= 3660)))),
    CONSTRAINT resources_max_hold_range CHECK (((max_hold_seconds IS NULL) OR ((max_hold_seconds >= 1) AND (max_hold_seconds <= 604800)))),
    CONSTRAINT resources_max_reschedules_range CHECK (((max_reschedules IS NULL) OR ((max_reschedules >= 0) AND (max_reschedules <= 1000)))),
    CONSTRAINT resources_metadata_object CHECK ((jsonb_typeof(metadata) = 'object'::text)),
    CONSTRAINT resources_min_notice_range CHECK (((min_notice_minutes >= 0) AND (min_notice_minutes <= 525600))),
    CONSTRAINT resources_name_length CHECK (((char_length(name) >= 1) AND (char_length(name) <= 200))),
    CONSTRAINT resources_reschedule_notice_range CHECK (((reschedule_notice_minutes IS NULL) OR ((reschedule_notice_minutes >= 0) AND (reschedule_notice_minutes <= 525600)))),
    CONSTRAINT resources_schedule_shape CHECK (((schedule IS NULL) OR ((jsonb_typeof(schedule) = 'object'::text) AND (jsonb_typeof((schedule -> 'weekly'::text)) = 'object'::text) AND (jsonb_typeof((schedule -> 'exceptions'::text)) = 'array'::text)))),
    CONSTRAINT resources_slot_minutes_range CHECK (((slot_minutes IS NULL) OR ((slot_minutes >= 1) AND (slot_minutes <= 1440)))),
    CONSTRAINT resources_time_zone_length CHECK (((char_length(time_zone) >= 1) AND (char_length(time_zone) <= 64))),
    CONSTRAINT resources_ttls_positive CHECK (((hold_ttl_seconds >= 1) AND (offer_ttl_seconds >= 1))),
    CONSTRAINT resources_upstream_shape CHECK (((authority = 'local'::text) OR ((upstream_ref IS NOT NULL) AND (capacity = 1))))
);

--
-- Name: seat_polls; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.seat_polls (
    resource_id uuid NOT NULL,
    next_poll_at timestamp with time zone NOT NULL,
    idle_polls integer DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT seat_polls_idle_polls_non_negative CHECK ((idle_polls >= 0))
);

--
-- Name: series; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.series (
    id uuid NOT NULL,
    owner text NOT NULL,
    resource_id uuid NOT NULL,
    time_zone text NOT NULL,
    recurrence text NOT NULL,
    mode text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT series_mode_known CHECK ((mode = ANY (ARRAY['all_or_nothing'::text, 'skip_conflicts'::text])))
);

--
-- Name: series_occurrences; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.series_occurrences (
    series_id uuid NOT NULL,
    "position" integer NOT NULL,
    starts_at timestamp with time zone NOT NULL,
    ends_at timestamp with time zone NOT NULL,
    reservation_id uuid,
    problem jsonb,
    CONSTRAINT series_occurrences_held_or_why CHECK (((reservation_id IS NULL) <> (problem IS NULL)))
);

--
-- Name: upstream_breakers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.upstream_breakers (
    name text NOT NULL,
    consecutive_failures integer DEFAULT 0 NOT NULL,
    open_until timestamp with time zone,
    probe_owner uuid,
    probe_until timestamp with time zone,
    updated_at timestamp with time zone NOT NULL
);

--
-- Name: upstream_views; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.upstream_views (
    upstream_ref text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    window_end timestamp with time zone NOT NULL,
    taken jsonb,
    fetched_at timestamp with time zone,
    refresh_owner uuid,
    refreshing_until timestamp with time zone
);

--
-- Name: waitlist_entries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.waitlist_entries (
    id uuid NOT NULL,
    resource_id uuid NOT NULL,
    owner text NOT NULL,
    starts_at timestamp with time zone NOT NULL,
    ends_at timestamp with time zone NOT NULL,
    period tstzrange GENERATED ALWAYS AS (tstzrange(starts_at, ends_at, '[)'::text)) STORED,
    quantity integer NOT NULL,
    status text NOT NULL,
    seq bigint NOT NULL,
    reservation_id uuid,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    auto_book boolean DEFAULT false NOT NULL,
    leave_requested_at timestamp with time zone,
    CONSTRAINT waitlist_entries_offer_has_reservation CHECK ((((status = ANY (ARRAY['OFFERED'::text, 'ACCEPTED'::text])) AND (reservation_id IS NOT NULL)) OR ((status = 'WAITING'::text) AND (reservation_id IS NULL)) OR (status = ANY (ARRAY['EXPIRED'::text, 'CANCELLED'::text])))),
    CONSTRAINT waitlist_entries_period_ordered CHECK ((starts_at < ends_at)),
    CONSTRAINT waitlist_entries_quantity_positive CHECK ((quantity >= 1)),
    CONSTRAINT waitlist_entries_status_known CHECK ((status = ANY (ARRAY['WAITING'::text, 'OFFERED'::text, 'ACCEPTED'::text, 'EXPIRED'::text, 'CANCELLED'::text])))
);

--
-- Name: waitlist_entries_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.waitlist_entries ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.waitlist_entries_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: webhook_deliveries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_deliveries (
    event_id uuid NOT NULL,
    endpoint_id uuid NOT NULL,
    status integer NOT NULL,
    delivered_at timestamp with time zone NOT NULL,
    CONSTRAINT webhook_deliveries_status_success CHECK (((status >= 200) AND (status <= 299)))
);

--
-- Name: webhook_delivery_attempts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_delivery_attempts (
    id uuid NOT NULL,
    endpoint_id uuid NOT NULL,
    event_id uuid NOT NULL,
    attempt integer NOT NULL,
    trigger text NOT NULL,
    attempted_at timestamp with time zone NOT NULL,
    status_code integer,
    error text,
    duration_ms integer NOT NULL,
    next_attempt_at timestamp with time zone,
    CONSTRAINT webhook_delivery_attempts_attempt_positive CHECK ((attempt >= 1)),
    CONSTRAINT webhook_delivery_attempts_duration CHECK ((duration_ms >= 0)),
    CONSTRAINT webhook_delivery_attempts_outcome CHECK (((status_code IS NOT NULL) OR (error IS NOT NULL))),
    CONSTRAINT webhook_delivery_attempts_status_http CHECK (((status_code >= 100) AND (status_code <= 599))),
    CONSTRAINT webhook_delivery_attempts_trigger_known CHECK ((trigger = ANY (ARRAY['queue'::text, 'retry'::text, 'recover'::text])))
);

--
-- Name: webhook_endpoints; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_endpoints (
    id uuid NOT NULL,
    url text NOT NULL,
    secret bytea NOT NULL,
    resource_id uuid,
    event_types text[] NOT NULL,
    created_by text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    deleted_at timestamp with time zone,
    previous_secret bytea,
    previous_secret_expires_at timestamp with time zone,
    failing_since timestamp with time zone,
    disabled_at timestamp with time zone,
    disabled_reason text,
    CONSTRAINT webhook_endpoints_disabled_with_reason CHECK ((((disabled_at IS NULL) = (disabled_reason IS NULL)) AND (disabled_reason = ANY (ARRAY['gone'::text, 'failing'::text])))),
    CONSTRAINT webhook_endpoints_event_types_not_empty CHECK ((cardinality(event_types) >= 1)),
    CONSTRAINT webhook_endpoints_previous_secret_length CHECK (((previous_secret IS NULL) OR ((octet_length(previous_secret) >= 24) AND (octet_length(previous_secret) <= 64)))),
    CONSTRAINT webhook_endpoints_previous_secret_with_expiry CHECK (((previous_secret IS NULL) = (previous_secret_expires_at IS NULL))),
    CONSTRAINT webhook_endpoints_secret_length CHECK (((octet_length(secret) >= 24) AND (octet_length(secret) <= 64))),
    CONSTRAINT webhook_endpoints_url_http CHECK (((url ~ '^https?://'::text) AND (length(url) <= 2000)))
);

--
-- Name: webhook_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_events (
    id uuid NOT NULL,
    type text NOT NULL,
    body text NOT NULL,
    received_at timestamp with time zone NOT NULL
);

--
-- Name: webhook_resends; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_resends (
    endpoint_id uuid NOT NULL,
    event_id uuid NOT NULL,
    trigger text NOT NULL,
    requested_by text NOT NULL,
    requested_at timestamp with time zone NOT NULL,
    CONSTRAINT webhook_resends_trigger_known CHECK ((trigger = ANY (ARRAY['retry'::text, 'recover'::text])))
);

--
-- Name: approvals approvals_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approvals
    ADD CONSTRAINT approvals_pkey PRIMARY KEY (id);

--
-- Name: calendar_feeds calendar_feeds_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.calendar_feeds
    ADD CONSTRAINT calendar_feeds_pkey PRIMARY KEY (id);

--
-- Name: calendar_feeds calendar_feeds_token_hash_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.calendar_feeds
    ADD CONSTRAINT calendar_feeds_token_hash_key UNIQUE (token_hash);

--
-- Name: handovers_owed handovers_owed_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.handovers_owed
    ADD CONSTRAINT handovers_owed_pkey PRIMARY KEY (id);

--
-- Name: idempotency_keys idempotency_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (principal, method, route, key);

--
-- Name: intents intents_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.intents
    ADD CONSTRAINT intents_pkey PRIMARY KEY (id);

--
-- Name: intents intents_reservation_kind_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.intents
    ADD CONSTRAINT intents_reservation_kind_key UNIQUE (reservation_id, kind);

--
-- Name: list_cursor_key list_cursor_key_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.list_cursor_key
    ADD CONSTRAINT list_cursor_key_pkey PRIMARY KEY (id);

--
-- Name: outbox outbox_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outbox
    ADD CONSTRAINT outbox_pkey PRIMARY KEY (id);

--
-- Name: outbox_stalled_subjects outbox_stalled_subjects_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outbox_stalled_subjects
    ADD CONSTRAINT outbox_stalled_subjects_pkey PRIMARY KEY (topic, subject_id);

--
-- Name: pool_members pool_members_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pool_members
    ADD CONSTRAINT pool_members_pkey PRIMARY KEY (pool_id, resource_id);

--
-- Name: pool_members pool_members_position_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pool_members
    ADD CONSTRAINT pool_members_position_key UNIQUE (pool_id, "position");

--
-- Name: pools pools_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pools
    ADD CONSTRAINT pools_pkey PRIMARY KEY (id);

--
-- Name: principals principals_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.principals
    ADD CONSTRAINT principals_pkey PRIMARY KEY (owner);

--
-- Name: reservations reservations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.reservations
    ADD CONSTRAINT reservations_pkey PRIMARY KEY (id);

--
-- Name: reservations reservations_row_valid; Type: CHECK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE public.reservations
    ADD CONSTRAINT reservations_row_valid CHECK (public.reservation_row_valid(reservations.*));

--
-- Name: reservations reservations_single_unit_buffers_apart; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.reservations
    ADD CONSTRAINT reservations_single_unit_buffers_apart EXCLUDE USING gist (resource_id WITH =, buffered WITH &&) WHERE (((resource_capacity = 1) AND ((status)::text = ANY (ARRAY['HELD'::text, 'CONFIRMING'::text, 'CONFIRMED'::text]))));

--
-- Name: resource_load resource_load_pieces_apart; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resource_load
    ADD CONSTRAINT resource_load_pieces_apart EXCLUDE USING gist (resource_id WITH =, during WITH &&);

--
-- Name: resource_load resource_load_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resource_load
    ADD CONSTRAINT resource_load_pkey PRIMARY KEY (resource_id, during);

--
-- Name: resources resources_id_capacity_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resources
    ADD CONSTRAINT resources_id_capacity_key UNIQUE (id, capacity);

--
-- Name: resources resources_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resources
    ADD CONSTRAINT resources_pkey PRIMARY KEY (id);

--
-- Name: seat_polls seat_polls_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.seat_polls
    ADD CONSTRAINT seat_polls_pkey PRIMARY KEY (resource_id);

--
-- Name: series_occurrences series_occurrences_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.series_occurrences
    ADD CONSTRAINT series_occurrences_pkey PRIMARY KEY (series_id, "position");

--
-- Name: series series_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.series
    ADD CONSTRAINT series_pkey PRIMARY KEY (id);

--
-- Name: upstream_breakers upstream_breakers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.upstream_breakers
    ADD CONSTRAINT upstream_breakers_pkey PRIMARY KEY (name);

--
-- Name: upstream_views upstream_views_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.upstream_views
    ADD CONSTRAINT upstream_views_pkey PRIMARY KEY (upstream_ref, window_start, window_end);

--
-- Name: waitlist_entries waitlist_entries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.waitlist_entries
    ADD CONSTRAINT waitlist_entries_pkey PRIMARY KEY (id);

--
-- Name: webhook_deliveries webhook_deliveries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (event_id, endpoint_id);

--
-- Name: webhook_delivery_attempts webhook_delivery_attempts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_delivery_attempts
    ADD CONSTRAINT webhook_delivery_attempts_pkey PRIMARY KEY (id);

--
-- Name: webhook_endpoints webhook_endpoints_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_endpoints
    ADD CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (id);

--
-- Name: webhook_events webhook_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_events
    ADD CONSTRAINT webhook_events_pkey PRIMARY KEY (id);

--
-- Name: webhook_resends webhook_resends_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_resends
    ADD CONSTRAINT webhook_resends_pkey PRIMARY KEY (endpoint_id, event_id);

--
-- Name: calendar_feeds_resource_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX calendar_feeds_resource_idx ON public.calendar_feeds USING btree (resource_id) WHERE (resource_id IS NOT NULL);

--
-- Name: handovers_owed_resource_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX handovers_owed_resource_idx ON public.handovers_owed USING btree (resource_id);

--
-- Name: idempotency_keys_expires_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idempotency_keys_expires_idx ON public.idempotency_keys USING btree (expires_at);

--
-- Name: intents_one_wait_per_entry; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX intents_one_wait_per_entry ON public.intents USING btree (waitlist_entry_id) WHERE (waitlist_entry_id IS NOT NULL);

--
-- Name: intents_one_write_per_seat; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX intents_one_write_per_seat ON public.intents USING btree (upstream_ref) WHERE (state = 'RESERVING'::text);

--
-- Name: intents_pending_cancel_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX intents_pending_cancel_idx ON public.intents USING btree (upstream_ref, created_at) WHERE ((kind = 'cancel'::text) AND (state = ANY (ARRAY['REQUESTED'::text, 'RESERVING'::text])));

--
-- Name: intents_requested_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX intents_requested_idx ON public.intents USING btree (not_before) WHERE (state = 'REQUESTED'::text);

--
-- Name: intents_reserving_lease_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX intents_reserving_lease_idx ON public.intents USING btree (locked_until) WHERE (state = 'RESERVING'::text);

--
-- Name: intents_waiting_for_seat_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX intents_waiting_for_seat_idx ON public.intents USING btree (waitlist_entry_id) WHERE (state = 'WAITING_FOR_SEAT'::text);

--
-- Name: outbox_published_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_published_idx ON public.outbox USING btree (published_at) WHERE (published_at IS NOT NULL);

--
-- Name: outbox_unpublished_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_unpublished_idx ON public.outbox USING btree (topic, seq) WHERE (published_at IS NULL);

--
-- Name: pools_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX pools_created_idx ON public.pools USING btree (created_at, id);

--
-- Name: reservations_active_period_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reservations_active_period_idx ON public.reservations USING gist (resource_id, period) WHERE ((status)::text = ANY (ARRAY['HELD'::text, 'CONFIRMING'::text, 'CONFIRMED'::text]));

--
-- Name: reservations_booking_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reservations_booking_idx ON public.reservations USING btree (booking_id, item) WHERE (booking_id IS NOT NULL);

--
-- Name: reservations_cancelled_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reservations_cancelled_idx ON public.reservations USING btree (resource_id, updated_at) WHERE ((status)::text = 'CANCELLED'::text);

--
-- Name: reservations_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reservations_created_idx ON public.reservations USING btree (created_at, id);

--
-- Name: reservations_held_expiry_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reservations_held_expiry_idx ON public.reservations USING btree (expires_at) WHERE ((status)::text = 'HELD'::text);

--
-- Name: reservations_kept_wider_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reservations_kept_wider_idx ON public.reservations USING gist (resource_id, buffered) WHERE (((buffered <> period) IS TRUE) AND ((status)::text = ANY (ARRAY['HELD'::text, 'CONFIRMING'::text, 'CONFIRMED'::text])));

--
-- Name: reservations_owner_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reservations_owner_created_idx ON public.reservations USING btree (owner, created_at, id);

--
-- Name: reservations_owner_held_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reservations_owner_held_idx ON public.reservations USING btree (owner, expires_at) WHERE ((status)::text = 'HELD'::text);

--
-- Name: reservations_resource_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reservations_resource_created_idx ON public.reservations USING btree (resource_id, created_at, id);

--
-- Name: reservations_resource_held_expiry_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reservations_resource_held_expiry_idx ON public.reservations USING btree (resource_id, expires_at) WHERE (((status)::text = 'HELD'::text) AND (resource_capacity IS DISTINCT FROM 1));

--
-- Name: reservations_series_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reservations_series_idx ON public.reservations USING btree (series_id, starts_at) WHERE (series_id IS NOT NULL);

--
-- Name: resources_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX resources_created_idx ON public.resources USING btree (created_at, id);

--
-- Name: seat_polls_due_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX seat_polls_due_idx ON public.seat_polls USING btree (next_poll_at);

--
-- Name: waitlist_entries_one_per_range_key; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX waitlist_entries_one_per_range_key ON public.waitlist_entries USING btree (resource_id, owner, starts_at, ends_at) WHERE (status = ANY (ARRAY['WAITING'::text, 'OFFERED'::text]));

--
-- Name: waitlist_entries_owner_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX waitlist_entries_owner_created_idx ON public.waitlist_entries USING btree (owner, created_at DESC, id DESC);

--
-- Name: waitlist_entries_reservation_key; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX waitlist_entries_reservation_key ON public.waitlist_entries USING btree (reservation_id) WHERE (reservation_id IS NOT NULL);

--
-- Name: waitlist_entries_resource_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX waitlist_entries_resource_seq_idx ON public.waitlist_entries USING btree (resource_id, seq);

--
-- Name: waitlist_entries_waiting_end_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX waitlist_entries_waiting_end_idx ON public.waitlist_entries USING btree (ends_at) WHERE (status = 'WAITING'::text);

--
-- Name: waitlist_entries_waiting_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX waitlist_entries_waiting_idx ON public.waitlist_entries USING btree (resource_id, seq) WHERE (status = 'WAITING'::text);

--
-- Name: webhook_deliveries_delivered_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_delivered_idx ON public.webhook_deliveries USING btree (delivered_at);

--
-- Name: webhook_deliveries_endpoint_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_endpoint_idx ON public.webhook_deliveries USING btree (endpoint_id);

--
-- Name: webhook_delivery_attempts_attempted_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_delivery_attempts_attempted_idx ON public.webhook_delivery_attempts USING btree (attempted_at);

--
-- Name: webhook_delivery_attempts_endpoint_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_delivery_attempts_endpoint_idx ON public.webhook_delivery_attempts USING btree (endpoint_id, attempted_at, id);

--
-- Name: webhook_delivery_attempts_event_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_delivery_attempts_event_idx ON public.webhook_delivery_attempts USING btree (event_id, endpoint_id);

--
-- Name: webhook_endpoints_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_endpoints_created_idx ON public.webhook_endpoints USING btree (created_at DESC, id DESC) WHERE (deleted_at IS NULL);

--
-- Name: webhook_events_received_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_events_received_idx ON public.webhook_events USING btree (received_at);

--
-- Name: webhook_resends_event_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_resends_event_idx ON public.webhook_resends USING btree (event_id);

--
-- Name: webhook_resends_requested_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_resends_requested_idx ON public.webhook_resends USING btree (requested_at);

--
-- Name: reservations_kept_wider_stats; Type: STATISTICS; Schema: public; Owner: -
--

CREATE STATISTICS public.reservations_kept_wider_stats ON (buffered <> period) FROM public.reservations;

--
-- Name: reservations reservations_booking_lapse; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER reservations_booking_lapse AFTER UPDATE OF status ON public.reservations FOR EACH ROW WHEN ((((old.status)::text = 'HELD'::text) AND ((new.status)::text = 'EXPIRED'::text) AND (new.booking_id IS NOT NULL) AND (pg_trigger_depth() = 0))) EXECUTE FUNCTION public.reservation_booking_lapse();

--
-- Name: reservations reservations_buffered_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER reservations_buffered_insert BEFORE INSERT ON public.reservations FOR EACH ROW WHEN ((new.buffered IS NULL)) EXECUTE FUNCTION public.reservations_set_buffered();

--
-- Name: reservations reservations_buffered_move; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER reservations_buffered_move BEFORE UPDATE OF starts_at, ends_at, buffered ON public.reservations FOR EACH ROW EXECUTE FUNCTION public.reservations_set_buffered();

--
-- Name: reservations reservations_load_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER reservations_load_delete AFTER DELETE ON public.reservations FOR EACH ROW WHEN ((((old.status)::text = ANY (ARRAY['HELD'::text, 'CONFIRMING'::text, 'CONFIRMED'::text])) AND (old.resource_capacity IS DISTINCT FROM 1))) EXECUTE FUNCTION public.reservation_load_follow();

--
-- Name: reservations reservations_load_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER reservations_load_insert AFTER INSERT ON public.reservations FOR EACH ROW WHEN ((((new.status)::text = ANY (ARRAY['HELD'::text, 'CONFIRMING'::text, 'CONFIRMED'::text])) AND (new.resource_capacity IS DISTINCT FROM 1))) EXECUTE FUNCTION public.reservation_load_follow();

--
-- Name: reservations reservations_load_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER reservations_load_update AFTER UPDATE OF status, starts_at, ends_at, quantity, resource_id, resource_capacity ON public.reservations FOR EACH ROW WHEN ((((((old.status)::text = ANY (ARRAY['HELD'::text, 'CONFIRMING'::text, 'CONFIRMED'::text])) AND (old.resource_capacity IS DISTINCT FROM 1)) IS DISTINCT FROM (((new.status)::text = ANY (ARRAY['HELD'::text, 'CONFIRMING'::text, 'CONFIRMED'::text])) AND (new.resource_capacity IS DISTINCT FROM 1))) OR (((new.status)::text = ANY (ARRAY['HELD'::text, 'CONFIRMING'::text, 'CONFIRMED'::text])) AND (new.resource_capacity IS DISTINCT FROM 1) AND ((((old.resource_id IS DISTINCT FROM new.resource_id) OR (old.starts_at IS DISTINCT FROM new.starts_at)) OR (old.ends_at IS DISTINCT FROM new.ends_at)) OR (old.quantity IS DISTINCT FROM new.quantity))))) EXECUTE FUNCTION public.reservation_load_follow();

--
-- Name: resources resources_rules_version; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER resources_rules_version BEFORE UPDATE OF time_zone, schedule, buffer_before_minutes, buffer_after_minutes, min_notice_minutes, max_advance_days, slot_minutes, booking_limits ON public.resources FOR EACH ROW WHEN (((((((((old.time_zone IS DISTINCT FROM new.time_zone) OR (old.schedule IS DISTINCT FROM new.schedule)) OR (old.buffer_before_minutes IS DISTINCT FROM new.buffer_before_minutes)) OR (old.buffer_after_minutes IS DISTINCT FROM new.buffer_after_minutes)) OR (old.min_notice_minutes IS DISTINCT FROM new.min_notice_minutes)) OR (old.max_advance_days IS DISTINCT FROM new.max_advance_days)) OR (old.slot_minutes IS DISTINCT FROM new.slot_minutes)) OR (old.booking_limits IS DISTINCT FROM new.booking_limits))) EXECUTE FUNCTION public.resources_rules_version();

--
-- Name: approvals approvals_reservation_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approvals
    ADD CONSTRAINT approvals_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES public.reservations(id);

--
-- Name: approvals approvals_waitlist_entry_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approvals
    ADD CONSTRAINT approvals_waitlist_entry_fkey FOREIGN KEY (waitlist_entry_id) REFERENCES public.waitlist_entries(id);

--
-- Name: calendar_feeds calendar_feeds_resource_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.calendar_feeds
    ADD CONSTRAINT calendar_feeds_resource_fkey FOREIGN KEY (resource_id) REFERENCES public.resources(id);

--
-- Name: intents intents_reservation_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.intents
    ADD CONSTRAINT intents_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES public.reservations(id) DEFERRABLE;

--
-- Name: intents intents_waitlist_entry_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.intents
    ADD CONSTRAINT intents_waitlist_entry_fkey FOREIGN KEY (waitlist_entry_id) REFERENCES public.waitlist_entries(id);

--
-- Name: pool_members pool_members_pool_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pool_members
    ADD CONSTRAINT pool_members_pool_fkey FOREIGN KEY (pool_id) REFERENCES public.pools(id) ON DELETE CASCADE;

--
-- Name: pool_members pool_members_resource_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pool_members
    ADD CONSTRAINT pool_members_resource_fkey FOREIGN KEY (resource_id) REFERENCES public.resources(id);

--
-- Name: reservations reservations_resource_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.reservations
    ADD CONSTRAINT reservations_resource_fkey FOREIGN KEY (resource_id, resource_capacity) REFERENCES public.resources(id, capacity) ON UPDATE CASCADE;

--
-- Name: seat_polls seat_polls_resource_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.seat_polls
    ADD CONSTRAINT seat_polls_resource_fkey FOREIGN KEY (resource_id) REFERENCES public.resources(id);

--
-- Name: series_occurrences series_occurrences_series_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.series_occurrences
    ADD CONSTRAINT series_occurrences_series_fkey FOREIGN KEY (series_id) REFERENCES public.series(id) ON DELETE CASCADE;

--
-- Name: series series_resource_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.series
    ADD CONSTRAINT series_resource_fkey FOREIGN KEY (resource_id) REFERENCES public.resources(id);

--
-- Name: waitlist_entries waitlist_entries_reservation_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.waitlist_entries
    ADD CONSTRAINT waitlist_entries_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES public.reservations(id);

--
-- Name: waitlist_entries waitlist_entries_resource_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.waitlist_entries
    ADD CONSTRAINT waitlist_entries_resource_fkey FOREIGN KEY (resource_id) REFERENCES public.resources(id);

--
-- Name: webhook_deliveries webhook_deliveries_endpoint_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_endpoint_fkey FOREIGN KEY (endpoint_id) REFERENCES public.webhook_endpoints(id);

--
-- Name: webhook_delivery_attempts webhook_delivery_attempts_endpoint_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_delivery_attempts
    ADD CONSTRAINT webhook_delivery_attempts_endpoint_fkey FOREIGN KEY (endpoint_id) REFERENCES public.webhook_endpoints(id);

--
-- Name: webhook_delivery_attempts webhook_delivery_attempts_event_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_delivery_attempts
    ADD CONSTRAINT webhook_delivery_attempts_event_fkey FOREIGN KEY (event_id) REFERENCES public.webhook_events(id);

--
-- Name: webhook_endpoints webhook_endpoints_resource_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_endpoints
    ADD CONSTRAINT webhook_endpoints_resource_fkey FOREIGN KEY (resource_id) REFERENCES public.resources(id);

--
-- Name: webhook_resends webhook_resends_endpoint_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_resends
    ADD CONSTRAINT webhook_resends_endpoint_fkey FOREIGN KEY (endpoint_id) REFERENCES public.webhook_endpoints(id);

--
-- Name: webhook_resends webhook_resends_event_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_resends
    ADD CONSTRAINT webhook_resends_event_fkey FOREIGN KEY (event_id) REFERENCES public.webhook_events(id) ON DELETE CASCADE;

--
-- PostgreSQL database dump complete
--

