-- Cancelling a confirmed booking on an upstream resource releases the seat in the
-- system of record too. The DELETE of the charge is an intent of its own kind: written
-- in the cancel's transaction with its outbox message, executed by the intent worker
-- outside any transaction, and fenced by the same per-seat index as a reserve, so a
-- DELETE and a POST never fly at one seat together. Unlike the POST, the DELETE is
-- idempotent (204, or 404 when already gone), so an unknown outcome is retried.
ALTER TABLE intents ADD COLUMN kind text NOT NULL DEFAULT 'reserve';
ALTER TABLE intents ADD CONSTRAINT intents_kind_known CHECK (kind IN ('reserve', 'cancel'));
ALTER TABLE intents ADD CONSTRAINT intents_cancel_names_charge CHECK (kind <> 'cancel' OR charge_id IS NOT NULL);
-- One intent of each kind per reservation: a second confirm or cancel finds it.
ALTER TABLE intents DROP CONSTRAINT intents_reservation_key;
ALTER TABLE intents ADD CONSTRAINT intents_reservation_kind_key UNIQUE (reservation_id, kind);
-- A reserve waits for an earlier cancel of the same seat (its charge may still block).
CREATE INDEX intents_pending_cancel_idx ON intents (upstream_ref, created_at)
    WHERE kind = 'cancel' AND state IN ('REQUESTED', 'RESERVING');
