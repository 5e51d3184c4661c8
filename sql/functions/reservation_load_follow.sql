-- Keeps the load timeline (`resource_load`, migrations/V14) exact on every write of a
-- reservation, whatever path wrote it: a booking counts (active, and not on a
-- capacity-1 resource) or not before and after the write, and its quantity over its
-- period leaves the pieces it counted in and joins the pieces it counts in now.
--
-- Raising a load happens under the resource's lock: every path that raises one holds
-- it (the lock order), and this takes it again (`FOR NO KEY UPDATE`, a no-op for a
-- holder) so that two raises never split one piece side by side. Raising splits the
-- pieces at the booking's start and end, adds the quantity to every piece of the
-- period and fills the gaps between them with pieces of the quantity alone.
--
-- Lowering a load needs no resource lock (a sibling of a booking of several is written
-- down from another item's resource): the booking's boundaries are pieces' boundaries
-- already, so it subtracts from the pieces of its period, under their row locks. A
-- raise in flight may split one of them meanwhile; the half it inserts is not in the
-- statement's snapshot, so the subtraction repeats, with a fresh snapshot, over what it
-- has not covered yet, until the pieces it changed tile the period.
CREATE OR REPLACE FUNCTION reservation_load_follow() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE TRIGGER reservations_load_insert AFTER INSERT ON reservations
    FOR EACH ROW WHEN (NEW.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND NEW.resource_capacity IS DISTINCT FROM 1)
    EXECUTE FUNCTION reservation_load_follow();
CREATE OR REPLACE TRIGGER reservations_load_update AFTER UPDATE OF status, starts_at, ends_at, quantity, resource_id,
                                                                   resource_capacity ON reservations
    FOR EACH ROW WHEN (
        (OLD.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND OLD.resource_capacity IS DISTINCT FROM 1)
            IS DISTINCT FROM (NEW.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND NEW.resource_capacity IS DISTINCT FROM 1)
        OR (NEW.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND NEW.resource_capacity IS DISTINCT FROM 1
            AND (OLD.resource_id, OLD.starts_at, OLD.ends_at, OLD.quantity)
                IS DISTINCT FROM (NEW.resource_id, NEW.starts_at, NEW.ends_at, NEW.quantity)))
    EXECUTE FUNCTION reservation_load_follow();
CREATE OR REPLACE TRIGGER reservations_load_delete AFTER DELETE ON reservations
    FOR EACH ROW WHEN (OLD.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND OLD.resource_capacity IS DISTINCT FROM 1)
    EXECUTE FUNCTION reservation_load_follow();
