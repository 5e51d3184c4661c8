-- The service-wide limit of active holds per principal (MAX_ACTIVE_HOLDS_PER_PRINCIPAL).
--
-- A principal's holds on different resources take different resource locks, so the
-- count of their active holds is exact only under a lock of the principal's own: a row
-- here, written the first time the principal holds with the limit on and locked
-- (`FOR NO KEY UPDATE`, by `principal_holds`) before any resource lock, on every path
-- that makes a hold at its owner's request. A row lock, not an advisory lock: the
-- service runs behind a transaction-mode pooler.
CREATE TABLE principals (
    owner text NOT NULL,
    CONSTRAINT principals_pkey PRIMARY KEY (owner)
);

-- A principal's held rows, by expiry: what the limit counts (the active ones, expiring
-- after now). Partial: confirmed and ended rows are never counted.
CREATE INDEX reservations_owner_held_idx ON reservations (owner, expires_at) WHERE status = 'HELD';

-- The holds take the limit as one more argument (a fresh database has no function yet:
-- the migration step applies them after the migrations).
DROP FUNCTION IF EXISTS reservation_hold(uuid, uuid, text, timestamptz, timestamptz, integer, boolean, timestamptz,
                                         jsonb, uuid, text, text, text, text, bytea, timestamptz, text, smallint,
                                         jsonb, bytea, bigint);
DROP FUNCTION IF EXISTS reservation_hold_items(uuid[], uuid[], boolean[], integer[], text, timestamptz, timestamptz,
                                               boolean, timestamptz, jsonb, uuid);
