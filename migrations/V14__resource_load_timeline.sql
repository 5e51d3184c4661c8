-- The load timeline of capacity-N resources (issue 48): a capacity-N hold judges its
-- range by the peak over these pieces instead of over every booking on the range, so
-- its cost does not grow with the bookings already made.
--
-- A piece is one interval between two consecutive boundaries that bookings of the
-- resource have had (a range many bookings share is one piece) and its `load`, the sum
-- of the quantities of the counted bookings over it. Counted: active (HELD, CONFIRMING,
-- CONFIRMED) and not on a capacity-1 resource (`resource_capacity` other than 1; NULL,
-- a settled row detached before a capacity change, counts as the old computation
-- counted it). Lapsed holds count until written down. The trigger
-- `reservations_load_follow` (sql/functions/reservation_load_follow.sql) keeps the
-- pieces exact on every write of a reservation; `resource_load_mismatches()` recomputes
-- them from the bookings. The pieces never overlap and are never merged: a write that
-- lowers a load finds every boundary of its booking still there.
CREATE TABLE resource_load (
    resource_id uuid NOT NULL,
    during tstzrange NOT NULL,
    load bigint NOT NULL,
    CONSTRAINT resource_load_pkey PRIMARY KEY (resource_id, during),
    CONSTRAINT resource_load_pieces_apart EXCLUDE USING gist (resource_id WITH =, during WITH &&),
    CONSTRAINT resource_load_not_negative CHECK (load >= 0),
    CONSTRAINT resource_load_bounded CHECK (NOT lower_inf(during) AND NOT upper_inf(during) AND NOT isempty(during))
);

-- A capacity-N resource's held rows by expiry: whether lapsed holds, not yet written
-- down, meet a range (they count in the pieces until written down), without reading the
-- live ones. Partial: a capacity-1 hold does not pay for it.
CREATE INDEX reservations_resource_held_expiry_idx ON reservations (resource_id, expires_at)
    WHERE status = 'HELD' AND resource_capacity IS DISTINCT FROM 1;

-- The trigger's function is named at creation: declared here as a stub that refuses to
-- run, and replaced by the migration step's functions in the same run. No write can
-- meet the stub in between without failing, so none is left out of the pieces.
CREATE FUNCTION reservation_load_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'reservation_load_follow() is defined by sql/functions/reservation_load_follow.sql, '
                    'which the migration step applies';
END
$$;

LOCK TABLE reservations IN SHARE ROW EXCLUSIVE MODE;

CREATE TRIGGER reservations_load_insert AFTER INSERT ON reservations
    FOR EACH ROW WHEN (NEW.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND NEW.resource_capacity IS DISTINCT FROM 1)
    EXECUTE FUNCTION reservation_load_follow();
CREATE TRIGGER reservations_load_update AFTER UPDATE OF status, starts_at, ends_at, quantity, resource_id,
                                                        resource_capacity ON reservations
    FOR EACH ROW WHEN (
        (OLD.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND OLD.resource_capacity IS DISTINCT FROM 1)
            IS DISTINCT FROM (NEW.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND NEW.resource_capacity IS DISTINCT FROM 1)
        OR (NEW.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND NEW.resource_capacity IS DISTINCT FROM 1
            AND (OLD.resource_id, OLD.starts_at, OLD.ends_at, OLD.quantity)
                IS DISTINCT FROM (NEW.resource_id, NEW.starts_at, NEW.ends_at, NEW.quantity)))
    EXECUTE FUNCTION reservation_load_follow();
CREATE TRIGGER reservations_load_delete AFTER DELETE ON reservations
    FOR EACH ROW WHEN (OLD.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND OLD.resource_capacity IS DISTINCT FROM 1)
    EXECUTE FUNCTION reservation_load_follow();

-- The pieces of the bookings already there.
INSERT INTO resource_load (resource_id, during, load)
WITH counted AS (
    SELECT resource_id, period, quantity FROM reservations
    WHERE status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND resource_capacity IS DISTINCT FROM 1
), bounds AS (
    SELECT resource_id, lower(period) AS at FROM counted
    UNION SELECT resource_id, upper(period) FROM counted
), pieces AS (
    SELECT resource_id, tstzrange(at, lead(at) OVER (PARTITION BY resource_id ORDER BY at), '[)') AS during
    FROM bounds
)
SELECT p.resource_id, p.during, sum(c.quantity)
FROM pieces p JOIN counted c ON c.resource_id = p.resource_id AND c.period && p.during
WHERE NOT upper_inf(p.during)
GROUP BY p.resource_id, p.during;
