-- What a reservation event carries (the outbox payload), with the reservation's
-- metadata, the principal who acted (null: the service) and the booking's `items`:
-- `p_items` as reservation_items reads them for a reservation that may be a booking of
-- several, or NULL for one known to be a booking of its one resource (a hold made now),
-- whose one item is built here. The caller that knows saves the items' lookup, a
-- PL/pgSQL call with a query: about a tenth of a hold's instructions.
-- STABLE, as jsonb_build_object is (a timestamp's text follows the session's settings):
-- a function declared less volatile than its body is never inlined, and this one is
-- inlined into every statement that writes an event.
CREATE OR REPLACE FUNCTION reservation_event(
    p_id uuid, p_resource_id uuid, p_owner text, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_status text, p_source text, p_failure_reason text, p_metadata jsonb, p_acted_by text, p_items jsonb
) RETURNS jsonb LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object('reservation_id', p_id, 'resource_id', p_resource_id, 'owner', p_owner,
                              'start', p_start, 'end', p_end, 'quantity', p_quantity, 'status', p_status,
                              'source', p_source, 'failure_reason', p_failure_reason,
                              'metadata', p_metadata, 'acted_by', p_acted_by,
                              'items', coalesce(p_items, jsonb_build_array(jsonb_build_object(
                                  'resource_id', p_resource_id, 'pool_id', NULL, 'quantity', p_quantity))))
$$;
