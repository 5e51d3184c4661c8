-- A reservation's kept range (`buffered`): its period widened by the resource's buffers,
-- read from the resource row (the writers hold the resource lock, under which the
-- rules are read too). A writer that knows the buffers passes `buffered` and the
-- insert trigger does not fire; every other insert, and every move, computes it here.
CREATE OR REPLACE FUNCTION reservations_set_buffered() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE TRIGGER reservations_buffered_insert BEFORE INSERT ON reservations
    FOR EACH ROW WHEN (NEW.buffered IS NULL) EXECUTE FUNCTION reservations_set_buffered();
CREATE OR REPLACE TRIGGER reservations_buffered_move BEFORE UPDATE OF starts_at, ends_at, buffered ON reservations
    FOR EACH ROW EXECUTE FUNCTION reservations_set_buffered();
