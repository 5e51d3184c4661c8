-- Bookings of several items, and pools to pick an item from.
--
-- A booking of several items is one reservation row per item, every row naming the
-- booking's lead row (the first item, whose id is the booking's id) in booking_id, in
-- request order by item. A booking of one resource keeps booking_id NULL. Every
-- capacity guarantee stays per row and per resource; the rows of a booking share their
-- status and expiry, and only the lead row's changes are events. booking_id has no
-- foreign key: only the hold of a booking of several writes it, in the transaction
-- that inserts the lead, and a key would queue a check for every reservation
-- inserted, the single ones too.
CREATE TABLE pools (
    id         uuid        NOT NULL,
    name       text        NOT NULL,
    -- How a pool item picks its member: fewest live bookings near the range, or the
    -- members' order.
    strategy   text        NOT NULL,
    created_by text        NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT pools_pkey PRIMARY KEY (id),
    CONSTRAINT pools_name_length CHECK (char_length(name) BETWEEN 1 AND 200),
    CONSTRAINT pools_strategy_known CHECK (strategy IN ('least_booked', 'ordered'))
);
CREATE INDEX pools_created_idx ON pools (created_at, id);

CREATE TABLE pool_members (
    pool_id     uuid    NOT NULL,
    resource_id uuid    NOT NULL,
    -- The member's place in the pool's order, from 0.
    position    integer NOT NULL,
    CONSTRAINT pool_members_pkey PRIMARY KEY (pool_id, resource_id),
    CONSTRAINT pool_members_position_key UNIQUE (pool_id, position),
    CONSTRAINT pool_members_pool_fkey FOREIGN KEY (pool_id) REFERENCES pools (id) ON DELETE CASCADE,
    CONSTRAINT pool_members_resource_fkey FOREIGN KEY (resource_id) REFERENCES resources (id)
);

ALTER TABLE reservations
    ADD COLUMN booking_id uuid,
    ADD COLUMN item       smallint,
    -- The pool the item was picked from; kept after the pool is deleted, as history.
    ADD COLUMN pool_id    uuid,
    ADD CONSTRAINT reservations_item_of_booking CHECK ((booking_id IS NULL) = (item IS NULL)),
    ADD CONSTRAINT reservations_pool_in_booking CHECK (pool_id IS NULL OR booking_id IS NOT NULL);
CREATE INDEX reservations_booking_idx ON reservations (booking_id, item) WHERE booking_id IS NOT NULL;

-- The conditional insert takes the row's booking, item and pool (a fresh database has
-- no function yet: the migration step applies them after the migrations).
DROP FUNCTION IF EXISTS reservation_insert_if_fits(uuid, uuid, integer, text, timestamptz, timestamptz, integer, text,
                                         timestamptz, text, text, timestamptz, jsonb, text);
