-- The principal's lock and what it has held: the row of `p_owner` in `principals`
-- locked `FOR NO KEY UPDATE` (written first when it is not there yet), then the count
-- of the principal's active holds (held, expiring after `p_now`) and the earliest of
-- their expiries, when a place frees. A booking of several counts once (its lead row,
-- item 0: its rows share their status and expiry).
--
-- The lock order's first level: taken before any resource lock, by every path that
-- makes a hold at its owner's request while the limit is on. The count is a statement
-- after the lock's: its snapshot includes every hold committed by the principal's
-- concurrent requests, which waited for this lock or were waited on by it.
CREATE OR REPLACE FUNCTION principal_holds(p_owner text, p_now timestamptz, OUT active bigint,
                                           OUT frees_at timestamptz)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM principals p WHERE p.owner = p_owner FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        -- The principal's first hold. A row inserted here is as good as locked: nobody
        -- else sees it before this transaction ends, and a concurrent first's insert
        -- waits for that end and then locks the row. A row a concurrent first
        -- committed meanwhile is locked here.
        INSERT INTO principals (owner) VALUES (p_owner) ON CONFLICT ON CONSTRAINT principals_pkey DO NOTHING;
        IF NOT FOUND THEN
            PERFORM FROM principals p WHERE p.owner = p_owner FOR NO KEY UPDATE;
        END IF;
    END IF;
    SELECT count(*) FILTER (WHERE coalesce(r.item, 0) = 0), min(r.expires_at)
    INTO active, frees_at
    FROM reservations r
    WHERE r.owner = p_owner AND r.status = 'HELD' AND r.expires_at > p_now;
END
$$;
