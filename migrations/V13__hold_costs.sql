-- What a hold costs the database: two of its costs go.
--
-- reservation_event takes the booking's items from its caller (NULL for a reservation
-- known to be a booking of its one resource), so a hold no longer looks them up: the
-- old signature goes, and the migration step applies the new one
-- (sql/functions/reservation_event.sql).
DROP FUNCTION IF EXISTS reservation_event(uuid, uuid, text, timestamptz, timestamptz, integer, text, text, text, jsonb, text);

-- The rules of a booking's item join the row's other rules in the table's one check
-- (reservation_row_valid, which raises under these same names): each check of its own
-- cost every insert and update of a reservation about 15 k instructions.
ALTER TABLE reservations DROP CONSTRAINT reservations_item_of_booking,
                         DROP CONSTRAINT reservations_pool_in_booking;
