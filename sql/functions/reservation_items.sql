-- A booking's items as its documents and events show them: for a booking of several,
-- every item's resource, the pool it was picked from and its quantity, in request order
-- (its rows name the booking, `p_id`, in booking_id); otherwise the one resource.
-- PL/pgSQL, so that its query is planned once per connection: a SQL function with a
-- sub-select is never inlined, and is planned again on every call of the statement
-- that calls it (every event and every read of a reservation).
CREATE OR REPLACE FUNCTION reservation_items(p_id uuid, p_resource_id uuid, p_quantity integer)
RETURNS jsonb LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN coalesce(
        (SELECT jsonb_agg(jsonb_build_object('resource_id', i.resource_id, 'pool_id', i.pool_id,
                                             'quantity', i.quantity) ORDER BY i.item)
         FROM reservations i WHERE i.booking_id = p_id),
        jsonb_build_array(jsonb_build_object('resource_id', p_resource_id, 'pool_id', NULL, 'quantity', p_quantity)));
END
$$;
