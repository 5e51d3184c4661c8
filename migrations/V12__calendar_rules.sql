-- Calendar rules on resources (issue 11): a time zone, weekly opening hours with dated
-- exceptions, buffers around each booking, a minimum notice, a maximum advance and a
-- grid for starts. The rules are judged by the application under the resource lock
-- (shared/src/domain/calendar.rs); here their shapes and ranges are checked, and the
-- one-round-trip hold of V7/V9 leaves every resource with a rule to the general path.
--
-- * time_zone: an IANA name, checked against the tz database the service compiles in
--   (chrono-tz); PostgreSQL's own copy may differ in version, so it is not asked.
-- * schedule: NULL is always open; else {"weekly": {...}, "exceptions": [...]}, its
--   inner shape checked by the application (hours as "HH:MM" pairs).

ALTER TABLE resources
    ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC',
    ADD COLUMN schedule jsonb,
    ADD COLUMN buffer_before_minutes integer NOT NULL DEFAULT 0,
    ADD COLUMN buffer_after_minutes integer NOT NULL DEFAULT 0,
    ADD COLUMN min_notice_minutes integer NOT NULL DEFAULT 0,
    ADD COLUMN max_advance_days integer,
    ADD COLUMN slot_minutes integer,
    ADD CONSTRAINT resources_time_zone_length CHECK (char_length(time_zone) BETWEEN 1 AND 64),
    ADD CONSTRAINT resources_schedule_shape CHECK (
        schedule IS NULL OR (jsonb_typeof(schedule) = 'object'
                             AND jsonb_typeof(schedule -> 'weekly') = 'object'
                             AND jsonb_typeof(schedule -> 'exceptions') = 'array')),
    ADD CONSTRAINT resources_buffers_range CHECK (
        buffer_before_minutes BETWEEN 0 AND 1440 AND buffer_after_minutes BETWEEN 0 AND 1440),
    ADD CONSTRAINT resources_min_notice_range CHECK (min_notice_minutes BETWEEN 0 AND 525600),
    ADD CONSTRAINT resources_max_advance_range CHECK (max_advance_days IS NULL OR max_advance_days BETWEEN 1 AND 3660),
    ADD CONSTRAINT resources_slot_minutes_range CHECK (slot_minutes IS NULL OR slot_minutes BETWEEN 1 AND 1440);

-- Whether any rule constrains a booking (the time zone alone does not): such a
-- resource takes the general path, where the rules are read under the lock.
ALTER TABLE resources ADD COLUMN has_calendar_rules boolean GENERATED ALWAYS AS (
    schedule IS NOT NULL OR buffer_before_minutes > 0 OR buffer_after_minutes > 0 OR min_notice_minutes > 0
    OR max_advance_days IS NOT NULL OR slot_minutes IS NOT NULL) STORED;

-- Buffers in the database. Each reservation stores the range it keeps for itself,
-- `buffered`: its period widened by the resource's buffers as they were when the row
-- was written or last moved (a trigger reads them; the writers hold the resource lock,
-- under which the rules are read too). Later changes of the buffers leave it as it is.
-- For capacity 1 the exclusion constraint here keeps the buffered ranges of the
-- active bookings apart; it is stronger than V1's on `period` (a buffered range holds
-- its period), which stays as it was.
ALTER TABLE reservations ADD COLUMN buffered tstzrange;
UPDATE reservations SET buffered = period;
ALTER TABLE reservations ALTER COLUMN buffered SET NOT NULL;

CREATE FUNCTION reservations_set_buffered() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER reservations_buffered BEFORE INSERT OR UPDATE OF starts_at, ends_at, buffered ON reservations
    FOR EACH ROW EXECUTE FUNCTION reservations_set_buffered();

ALTER TABLE reservations ADD CONSTRAINT reservations_single_unit_buffers_apart EXCLUDE USING gist
    (resource_id WITH =, buffered WITH &&)
    WHERE (resource_capacity = 1 AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED'));

-- The hold of V9, which sends a resource with calendar rules to the general path: once
-- at the look, and again under the lock, because a rule may have been set between
-- the two (the general path then judges it under the same lock).
DROP FUNCTION reservation_hold(uuid, uuid, text, timestamptz, timestamptz, integer, boolean, timestamptz, jsonb);
CREATE FUNCTION reservation_hold(
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
    load record;
    row record;
    won boolean := false;
BEGIN
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
    IF res.has_calendar_rules THEN
        outcome := 'general';
        RETURN NEXT;
        RETURN;
    END IF;
    load := reservation_load(p_resource, p_start, p_end, p_now);
    IF res.authority <> 'local' OR load.lapsed THEN
        outcome := 'general';
        RETURN NEXT;
        RETURN;
    END IF;
    -- Taken at this instant by live claims: refused without a lock or a write.
    IF load.peak + p_quantity > res.capacity THEN
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
    capacity := res.capacity;
    IF p_quantity > res.capacity THEN
        outcome := 'too_many';
        RETURN NEXT;
        RETURN;
    END IF;
    IF res.has_calendar_rules THEN
        outcome := 'general';
        RETURN NEXT;
        RETURN;
    END IF;
    -- A booking made while the resource had buffers keeps them (below) after they
    -- were cleared; where one meets this range, the general path judges it, rather
    -- than the exclusion constraint refusing the insert as an error.
    IF res.capacity = 1 AND EXISTS (
        SELECT 1 FROM reservations r
        WHERE r.resource_id = p_resource AND r.resource_capacity = 1
          AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
          AND r.buffered && tstzrange(p_start, p_end, '[)') AND r.buffered <> r.period) THEN
        outcome := 'general';
        RETURN NEXT;
        RETURN;
    END IF;
    FOR row IN
        SELECT * FROM reservation_insert_if_fits(
            p_id, p_resource, res.capacity, p_owner, p_start, p_end, p_quantity,
            CASE WHEN p_confirm THEN 'CONFIRMED' ELSE 'HELD' END,
            CASE WHEN p_confirm THEN NULL ELSE p_now + make_interval(secs => res.hold_ttl_seconds) END,
            NULL, 'request', p_now, p_metadata, p_owner)
    LOOP
        outcome := CASE WHEN row.inserted THEN 'reserved' ELSE 'expired' END;
        won := won OR row.inserted;
        id := row.id; resource_id := row.resource_id; owner := row.owner; starts_at := row.starts_at;
        ends_at := row.ends_at; quantity := row.quantity; status := row.status; expires_at := row.expires_at;
        failure_reason := row.failure_reason; source := row.source; created_at := row.created_at;
        updated_at := row.updated_at; metadata := row.metadata; acted_by := row.acted_by;
        RETURN NEXT;
    END LOOP;
    IF NOT won THEN
        -- Lost under the lock: see V9.
        PERFORM set_config('synchronous_commit', 'off', true);
        outcome := 'unavailable';
        id := NULL; resource_id := NULL; owner := NULL; starts_at := NULL; ends_at := NULL;
        quantity := NULL; status := NULL; expires_at := NULL; failure_reason := NULL; source := NULL;
        created_at := NULL; updated_at := NULL; metadata := NULL; acted_by := NULL;
        RETURN NEXT;
    END IF;
END
$$;

