-- The lists (GET /v1/reservations, GET /v1/resources, GET /v1/resources/{id}/waitlist):
-- one index per way a client walks them, and the key that signs their cursors.
--
-- Reservations and resources are listed newest first, by (created_at, id), and paged
-- by a keyset on that pair: `(created_at, id) < (cursor)` is an index condition, so a
-- page deep in a list costs what the first page costs (no OFFSET). The indexes are
-- ascending; PostgreSQL walks them backwards for newest first. A filter beyond the
-- index's leading columns (status, the window, the other of owner and resource) is
-- checked on the rows the index hands over.

-- The caller's own list, and an admin's list of one owner.
CREATE INDEX reservations_owner_created_idx ON reservations (owner, created_at, id);
-- An admin's list of one resource (without an owner).
CREATE INDEX reservations_resource_created_idx ON reservations (resource_id, created_at, id);
-- An admin's list of everyone's.
CREATE INDEX reservations_created_idx ON reservations (created_at, id);

-- The resources' archive flag: another change (V9) adds it too, with the same statement,
-- so whichever runs second changes nothing.
ALTER TABLE resources ADD COLUMN IF NOT EXISTS archived_at timestamptz;
CREATE INDEX resources_created_idx ON resources (created_at, id);

-- A resource's whole queue (every status) in FIFO order, paged by sequence.
CREATE INDEX waitlist_entries_resource_seq_idx ON waitlist_entries (resource_id, seq);

-- The key of the cursors' MAC (HMAC-SHA256): made once here, from the server's random
-- source, so a deploy needs no secret of its own; every process reads it once and keeps
-- it. Replacing the row invalidates every cursor given out (each process picks the new
-- key up when it starts).
CREATE TABLE list_cursor_key (
    id         smallint    NOT NULL DEFAULT 1,
    secret     bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT list_cursor_key_pkey PRIMARY KEY (id),
    CONSTRAINT list_cursor_key_one_row CHECK (id = 1),
    CONSTRAINT list_cursor_key_secret_length CHECK (octet_length(secret) = 32)
);
-- Two version-4 UUIDs: 244 random bits.
INSERT INTO list_cursor_key (secret) VALUES (uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));
