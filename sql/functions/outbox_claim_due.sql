-- Claims up to `p_limit` due events of `p_topic` for a relay, leased until `p_lease`,
-- at most one per subject: each subject's first due event in the window of the
-- `p_window` oldest, unless another relay's lease or claim holds it, in which case the
-- subject waits. So relays may run side by side and still send a subject's events one
-- after another, in order of writing. The subjects a refused event stalls
-- (`outbox_stalled_subjects`) wait too. The candidates are locked by primary key, and
-- the claimed events come back in order of writing.
--
-- The window must be read from `outbox_unpublished_idx` in order of `seq`, stopping
-- after `p_window` entries: then a claim costs about its window whatever the backlog,
-- and the index scan marks the dead entries published events leave at the front, so
-- the next claim skips them. Without statistics on the table (a database nothing has
-- analyzed yet), the planner prefers a bitmap scan, which reads every entry of the
-- index, sorts, and marks nothing dead: each claim then costs more with every event
-- published since the last vacuum. The function's settings leave the planner only the
-- ordered scan.
--
-- Writers commit a subject's events in order of `seq` (they hold the subject's row
-- lock), so a window that sees an event sees its subject's earlier ones.
CREATE OR REPLACE FUNCTION outbox_claim_due(p_topic text, p_now timestamptz, p_limit integer, p_window integer,
                                            p_lease timestamptz)
RETURNS TABLE (id uuid, kind text, subject_id uuid, payload jsonb, created_at timestamptz, attempts integer)
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET enable_seqscan = off
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH due AS MATERIALIZED (
        SELECT o.id, o.subject_id, o.seq, o.claimed_until FROM outbox o
        WHERE o.topic = p_topic AND o.published_at IS NULL AND o.next_attempt_at <= p_now
          AND NOT EXISTS (SELECT 1 FROM outbox_stalled_subjects s
                          WHERE s.topic = o.topic AND s.subject_id = o.subject_id AND s.head_seq < o.seq)
        ORDER BY o.seq LIMIT p_window),
    heads AS MATERIALIZED (
        SELECT DISTINCT ON (d.subject_id) d.id, d.claimed_until FROM due d ORDER BY d.subject_id, d.seq),
    claimable AS (
        SELECT o.id FROM outbox o
        WHERE o.id = ANY (ARRAY(SELECT h.id FROM heads h WHERE h.claimed_until IS NULL OR h.claimed_until <= p_now))
          AND o.published_at IS NULL AND (o.claimed_until IS NULL OR o.claimed_until <= p_now)
        LIMIT p_limit FOR NO KEY UPDATE SKIP LOCKED),
    claimed AS (
        UPDATE outbox o SET claimed_until = p_lease FROM claimable c WHERE o.id = c.id
        RETURNING o.id, o.seq, o.kind, o.subject_id, o.payload, o.created_at, o.attempts)
    SELECT c.id, c.kind::text, c.subject_id, c.payload, c.created_at, c.attempts FROM claimed c ORDER BY c.seq;
END
$$;
