-- What a reservation event carries (the outbox payload), with the reservation's
-- metadata, the principal who acted (null: the service) and the booking's `items`
-- (reservation_items). STABLE, as
-- jsonb_build_object is (a timestamp's text follows the session's settings): a
-- function declared less volatile than its body is never inlined, and this one is
-- inlined into every statement that writes an event.
CREATE OR REPLACE FUNCTION reservation_event(
    p_id uuid, p_resource_id uuid, p_owner text, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_status text, p_source text, p_failure_reason text, p_metadata jsonb, p_acted_by text
) RETURNS jsonb LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object('reservation_id', p_id, 'resource_id', p_resource_id, 'owner', p_owner,
                              'start', p_start, 'end', p_end, 'quantity', p_quantity, 'status', p_status,
                              'source', p_source, 'failure_reason', p_failure_reason,
                              'metadata', p_metadata, 'acted_by', p_acted_by,
                              'items', reservation_items(p_id, p_resource_id, p_quantity))
$$;
