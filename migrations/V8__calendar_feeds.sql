-- Calendar feeds: iCalendar (RFC 5545) URLs that a calendar application reads without
-- a principal. The URL's token is the only key, so only its SHA-256 is stored: a
-- copy of the table opens no feed. A feed shows one resource's bookings (made by an
-- admin) or its owner's own bookings (`resource_id` NULL). Revoking deletes the row;
-- rotating replaces the hash, and the old URL stops at once.
CREATE TABLE calendar_feeds (
    id          uuid        NOT NULL,
    token_hash  bytea       NOT NULL,
    owner       text        NOT NULL,
    resource_id uuid,
    created_at  timestamptz NOT NULL,
    rotated_at  timestamptz,
    CONSTRAINT calendar_feeds_pkey PRIMARY KEY (id),
    CONSTRAINT calendar_feeds_token_hash_key UNIQUE (token_hash),
    CONSTRAINT calendar_feeds_token_hash_sha256 CHECK (octet_length(token_hash) = 32),
    CONSTRAINT calendar_feeds_resource_fkey FOREIGN KEY (resource_id) REFERENCES resources (id)
);

-- The resources' foreign key, checked when a resource row is deleted.
CREATE INDEX calendar_feeds_resource_idx ON calendar_feeds (resource_id) WHERE resource_id IS NOT NULL;

-- A resource feed's cancelled bookings, kept in the feed as STATUS:CANCELLED for a while
-- after they were cancelled. Partial: a hold or a confirm writes no entry here, only a
-- cancel does.
CREATE INDEX reservations_cancelled_idx ON reservations (resource_id, updated_at) WHERE status = 'CANCELLED';
