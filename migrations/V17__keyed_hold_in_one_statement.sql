-- A hold with an Idempotency-Key in one statement, in autocommit (issue 13): the key's
-- claim, the hold and the stored answer commit together, in one round trip.
--
-- Before, a keyed hold opened a transaction for the guard of V6: BEGIN, the claim, the
-- hold, the stored answer, COMMIT (five round trips, one commit). The answer was the
-- API's JSON of the row, rendered after the hold returned, so it could not be written by
-- the statement that made the row. Now the statement stores what the answer is made
-- from: a refusal's answer does not depend on what the statement finds, so the caller
-- renders it before and passes it in; a hold's answer is the reservation as the hold
-- returned it, stored as a snapshot (`response_reservation`), from which a replay renders
-- the same bytes with the same code as the first answer.
--
-- The order keeps what V6 gets from PostgreSQL: the key is claimed first, by V6's own
-- `idempotency_claim`, so a concurrent duplicate waits on the primary key (at most
-- `p_wait`, then lock_not_available, and the guard polls without a connection) and
-- replays the original's answer once it commits; an original that dies takes its
-- claim with it.
-- An outcome the hold leaves to the general path (upstream resources, calendar rules,
-- lapsed holds, and the refusals that are errors: not found, archived, too many)
-- deletes the claim again and writes nothing else; the guard then runs the request in
-- a transaction, as before.
ALTER TABLE idempotency_keys
    ADD COLUMN response_reservation jsonb,
    DROP CONSTRAINT idempotency_keys_completed_has_response,
    ADD CONSTRAINT idempotency_keys_completed_has_response CHECK (
        state <> 'completed'
        OR (response_status IS NOT NULL AND (response_body IS NOT NULL OR response_reservation IS NOT NULL)));

CREATE FUNCTION reservation_hold_keyed(
    p_principal text, p_method text, p_route text, p_key text, p_fingerprint bytea, p_locked_until timestamptz,
    p_retain_until timestamptz, p_wait text, p_refused_status smallint, p_refused_headers jsonb,
    p_refused_body bytea,
    p_id uuid, p_resource uuid, p_owner text, p_start timestamptz, p_end timestamptz, p_quantity integer,
    p_confirm boolean, p_now timestamptz, p_metadata jsonb
) RETURNS TABLE (
    outcome text, capacity integer, id uuid, resource_id uuid, owner text,
    starts_at timestamptz, ends_at timestamptz, quantity integer, status text, expires_at timestamptz,
    failure_reason text, source text, created_at timestamptz, updated_at timestamptz, metadata jsonb,
    acted_by text
) LANGUAGE plpgsql AS $$
DECLARE
    h record;
BEGIN
    -- The guard's own claim (V6), with its bounded wait for a concurrent original.
    IF NOT idempotency_claim(p_principal, p_method, p_route, p_key, p_fingerprint, gen_random_uuid(),
                             p_locked_until, p_now, p_retain_until, p_wait) THEN
        -- A committed row: an answer to replay, another request's key, or a live claim
        -- of the older scheme. Nothing was written; the guard reads it.
        outcome := 'key_taken';
        RETURN NEXT;
        RETURN;
    END IF;

    SELECT * INTO h FROM reservation_hold(p_id, p_resource, p_owner, p_start, p_end, p_quantity, p_confirm, p_now,
                                          p_metadata);
    IF h.outcome = 'reserved' THEN
        UPDATE idempotency_keys k
        SET state = 'completed', response_status = 201, response_reservation = to_jsonb(h), locked_until = p_now
        WHERE k.principal = p_principal AND k.method = p_method AND k.route = p_route AND k.key = p_key;
    ELSIF h.outcome = 'unavailable' THEN
        UPDATE idempotency_keys k
        SET state = 'completed', response_status = p_refused_status, response_headers = p_refused_headers,
            response_body = p_refused_body, locked_until = p_now
        WHERE k.principal = p_principal AND k.method = p_method AND k.route = p_route AND k.key = p_key;
    ELSE
        -- Nothing to keep: the claim goes, and the commit need not wait for the disk.
        DELETE FROM idempotency_keys k
        WHERE k.principal = p_principal AND k.method = p_method AND k.route = p_route AND k.key = p_key;
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    outcome := h.outcome;
    capacity := h.capacity;
    id := h.id;
    resource_id := h.resource_id;
    owner := h.owner;
    starts_at := h.starts_at;
    ends_at := h.ends_at;
    quantity := h.quantity;
    status := h.status;
    expires_at := h.expires_at;
    failure_reason := h.failure_reason;
    source := h.source;
    created_at := h.created_at;
    updated_at := h.updated_at;
    metadata := h.metadata;
    acted_by := h.acted_by;
    RETURN NEXT;
END
$$;
