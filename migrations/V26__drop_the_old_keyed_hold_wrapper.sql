-- The keyed hold's old entry point goes (issue 13).
--
-- V22 made `reservation_hold` take the key's arguments and kept
-- `reservation_hold_keyed` as a wrapper around it for code deployed before V22. Code
-- since V22 calls `reservation_hold` alone, and V23 had to follow a deploy of the
-- functions (see the README's "Deploy"), so no code that calls the wrapper runs
-- against a database that reaches this migration.
DROP FUNCTION reservation_hold_keyed(text, text, text, text, bytea, timestamptz, timestamptz, text, smallint, jsonb,
                                     bytea, uuid, uuid, text, timestamptz, timestamptz, integer, boolean,
                                     timestamptz, jsonb);
