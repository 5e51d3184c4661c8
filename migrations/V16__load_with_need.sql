-- reservation_load takes the quantity its caller wants to fit (p_need), so that a
-- capacity-N range the load timeline leaves room for is not searched for lapsed holds.
-- The new signature is sql/functions/reservation_load.sql's; the old one goes.
DROP FUNCTION IF EXISTS reservation_load(uuid, timestamptz, timestamptz, timestamptz, uuid);
