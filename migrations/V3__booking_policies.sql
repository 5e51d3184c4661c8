-- Booking policies of a resource: how close to its start an owner may still cancel
-- or move a booking, how often a booking may be moved, and how long a hold may be
-- kept by extending it. NULL: no such rule (and, for max_hold_seconds, no extension:
-- a hold lasts its hold_ttl_seconds).
ALTER TABLE resources
    ADD COLUMN cancel_notice_minutes     integer,
    ADD COLUMN reschedule_notice_minutes integer,
    ADD COLUMN max_reschedules           integer,
    ADD COLUMN max_hold_seconds          integer,
    ADD CONSTRAINT resources_cancel_notice_range
        CHECK (cancel_notice_minutes IS NULL OR cancel_notice_minutes BETWEEN 0 AND 525600),
    ADD CONSTRAINT resources_reschedule_notice_range
        CHECK (reschedule_notice_minutes IS NULL OR reschedule_notice_minutes BETWEEN 0 AND 525600),
    ADD CONSTRAINT resources_max_reschedules_range
        CHECK (max_reschedules IS NULL OR max_reschedules BETWEEN 0 AND 1000),
    ADD CONSTRAINT resources_max_hold_range
        CHECK (max_hold_seconds IS NULL OR max_hold_seconds BETWEEN 1 AND 604800);

-- How many times the booking was moved (its reservation.rescheduled events), for
-- max_reschedules.
ALTER TABLE reservations ADD COLUMN reschedules integer NOT NULL DEFAULT 0;

-- A hold kept longer by its owner.
ALTER DOMAIN outbox_kind DROP CONSTRAINT outbox_kind_known;
ALTER DOMAIN outbox_kind ADD CONSTRAINT outbox_kind_known CHECK (VALUE = ANY ('{reservation.held,reservation.confirmed,reservation.released,reservation.expired,reservation.cancelled,reservation.failed,reservation.rescheduled,reservation.updated,reservation.extended,waitlist.offered,waitlist.offer_expired,waitlist.cancelled,intent.requested}'::text[]));
