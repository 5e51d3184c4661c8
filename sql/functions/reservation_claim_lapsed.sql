-- The sweep's claim: the resource of the oldest lapsed hold (held, past its expiry at
-- p_now, not written down yet) whose row no one else holds, locked FOR NO KEY UPDATE
-- until the caller's transaction ends, for the expiry and the hand-over; NULL when no
-- lapsed hold's resource is free. Concurrent sweeps take different resources (SKIP
-- LOCKED), never wait and never deadlock, and a backlog drains oldest first across
-- resources: holds that lapse meanwhile on a resource drained already wait behind
-- older ones elsewhere.
--
-- The holds are read from reservations_held_expiry_idx in order of expiry, stopping at
-- the first resource it can lock: a claim costs about the holds it passes over, not the
-- whole backlog, and its reads mark the entries of holds written down since (no longer
-- HELD) dead, so the next claim skips them. Without statistics the planner may read
-- the index with a bitmap scan, which reads every entry and marks none: the function's
-- settings leave it only the ordered scan (as outbox_claim_due does).
CREATE OR REPLACE FUNCTION reservation_claim_lapsed(p_now timestamptz) RETURNS uuid
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET enable_seqscan = off
AS $$
DECLARE
    lapsed record;
    claimed uuid;
    tried uuid[] := '{}';
BEGIN
    FOR lapsed IN
        SELECT r.resource_id FROM reservations r
        WHERE r.status = 'HELD' AND r.expires_at <= p_now
        ORDER BY r.expires_at
    LOOP
        CONTINUE WHEN lapsed.resource_id = ANY (tried);
        SELECT res.id INTO claimed FROM resources res WHERE res.id = lapsed.resource_id
        FOR NO KEY UPDATE SKIP LOCKED;
        IF FOUND THEN
            RETURN claimed;
        END IF;
        -- Held by another sweep, or by a path writing its own lapses down: its holds are
        -- passed over once, and the next resource is tried.
        tried := tried || lapsed.resource_id;
    END LOOP;
    RETURN NULL;
END
$$;
