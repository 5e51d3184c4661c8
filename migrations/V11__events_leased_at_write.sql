-- A hold that the function publishing its events makes leases its event to that
-- function as it writes it, and returns it: the function publishes it and marks it,
-- with no claim (docs/design.md, "Leased at write"). The hold takes the lease as one more
-- argument (a fresh database has no function yet: the migration step applies it after
-- the migrations), and its row carries the event's payload.
DROP FUNCTION IF EXISTS reservation_hold(uuid, uuid, text, timestamptz, timestamptz, integer, boolean, timestamptz,
                                         jsonb, uuid, text, text, text, text, bytea, timestamptz, text, smallint,
                                         jsonb, bytea, bigint, integer);
ALTER TYPE reservation_hold_result ADD ATTRIBUTE event jsonb;
