-- The active bookings whose kept range is wider than their own (`buffered` widened by
-- the buffers in force when each was made): on a resource whose buffers are zero now,
-- only these can keep more than their period. A hold with calendar rules and a slots
-- read look for them here instead of reading every booking near the range, so that
-- their cost on a big event does not grow with the bookings already on it. Partial: a
-- booking without buffers, the common case, adds no entry.
--
-- Written `(buffered <> period) IS TRUE`, in the index and in the statements that use
-- it, with statistics of the expression: the planner then knows such bookings are rare
-- (a plain `<>` between two columns it takes for true of nearly every row, and it would
-- scan the table expecting to meet one at once).
CREATE INDEX reservations_kept_wider_idx ON reservations USING gist (resource_id, buffered)
    WHERE (buffered <> period) IS TRUE AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED');
CREATE STATISTICS reservations_kept_wider_stats ON ((buffered <> period)) FROM reservations;
