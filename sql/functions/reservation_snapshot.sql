-- The reservation a keyed hold answered with, as stored for its replay
-- (`idempotency_keys.response_reservation`): the columns of the table, so that
-- `jsonb_populate_record(NULL::reservations, ...)` reads it back.
CREATE OR REPLACE FUNCTION reservation_snapshot(
    p_id uuid, p_resource_id uuid, p_owner text, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_status text, p_expires_at timestamptz, p_failure_reason text, p_source text, p_created_at timestamptz,
    p_updated_at timestamptz, p_metadata jsonb, p_acted_by text
) RETURNS jsonb LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object('id', p_id, 'resource_id', p_resource_id, 'owner', p_owner, 'starts_at', p_start,
                              'ends_at', p_end, 'quantity', p_quantity, 'status', p_status,
                              'expires_at', p_expires_at, 'failure_reason', p_failure_reason, 'source', p_source,
                              'created_at', p_created_at, 'updated_at', p_updated_at, 'metadata', p_metadata,
                              'acted_by', p_acted_by)
$$;
