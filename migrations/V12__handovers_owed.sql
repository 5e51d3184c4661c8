-- Capacity freed on a resource by a transaction that does not hold its lock: a booking
-- of several written down whole because one of its items lapsed on another resource
-- (reservation_booking_lapse). The hand-over to that resource's waitlist needs its
-- lock, so the range is recorded here and the sweep offers it (sweep::expire_lapsed).
-- No foreign key to resources: its check would lock the resource row (FOR KEY SHARE)
-- from a transaction that holds another resource's lock, which the lock order forbids;
-- the sweep's claim joins the resources that exist.
CREATE TABLE handovers_owed (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    resource_id uuid NOT NULL,
    starts_at   timestamptz NOT NULL,
    ends_at     timestamptz NOT NULL,
    owed_at     timestamptz NOT NULL
);
CREATE INDEX handovers_owed_resource_idx ON handovers_owed (resource_id);
