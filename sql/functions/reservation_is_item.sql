-- Whether a reservation row is an item of a booking of several other than its lead:
-- such rows record no events of their own (the lead's event carries every item).
-- Asked of rows a statement is changing: their booking never changes, so the
-- statement's snapshot answers for them.
CREATE OR REPLACE FUNCTION reservation_is_item(p_id uuid) RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT EXISTS (SELECT 1 FROM reservations r WHERE r.id = p_id AND r.booking_id <> r.id)
$$;
