-- The active bookings whose kept range is wider than their own (`buffered` widened by
-- the buffers in force when each was made): on a resource whose buffers are zero now,
-- only these can keep more than their period. A hold with calendar rules and a slots
-- read look for them here instead of reading every booking near the range, so that
-- their cost on a big event does not grow with the bookings already on it. Partial: a
-- booking without buffers, the common case, adds no entry.
CREATE INDEX reservations_kept_wider_idx ON reservations USING gist (resource_id, buffered)
    WHERE buffered <> period AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED');
