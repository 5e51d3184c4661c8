-- One place in the queue per principal and range: joining again for the same resource,
-- start and end while an entry still waits or is offered answers that entry (see
-- booking::join_waitlist). The index makes it a rule of the database, so that two
-- concurrent joins cannot both insert, whatever the code above it does.

-- Duplicates made before this rule: the first place stays (an offered entry before a
-- waiting one, else the earliest), the later waiting ones are cancelled. Two offered
-- duplicates cannot be settled here; the index then fails and says which.
UPDATE waitlist_entries w
SET status = 'CANCELLED', updated_at = now()
WHERE w.status = 'WAITING'
  AND EXISTS (
      SELECT 1 FROM waitlist_entries o
      WHERE o.resource_id = w.resource_id AND o.owner = w.owner
        AND o.starts_at = w.starts_at AND o.ends_at = w.ends_at
        AND o.id <> w.id
        AND (o.status = 'OFFERED' OR (o.status = 'WAITING' AND o.seq < w.seq)));

CREATE UNIQUE INDEX waitlist_entries_one_per_range_key
    ON waitlist_entries (resource_id, owner, starts_at, ends_at)
    WHERE status IN ('WAITING', 'OFFERED');
