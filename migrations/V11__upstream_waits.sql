-- Waiting for an upstream seat (seed 000's wait_for_library_seat). Joining the
-- waitlist of an upstream resource with auto_book records what the user consented to
-- (an approval naming the entry) and a wait intent in WAITING_FOR_SEAT. The poller
-- reads the seat through the shared cache, with a per-seat backoff (seat_polls); when
-- the upstream shows the seat free, the first waiter in FIFO order goes to RESERVING
-- under the same one-write-per-seat index and lease as a confirm. A lost race puts it
-- back to WAITING_FOR_SEAT, its entry keeping its place.

ALTER TABLE waitlist_entries ADD COLUMN auto_book boolean NOT NULL DEFAULT false;
-- The waiter left while a write of theirs was in flight: the write settles first, then
-- the wait ends (and a booking it won is cancelled through a cancel intent).
ALTER TABLE waitlist_entries ADD COLUMN leave_requested_at timestamptz;

-- The consent of a wait names its entry; a confirm's names its reservation.
ALTER TABLE approvals ALTER COLUMN reservation_id DROP NOT NULL;
ALTER TABLE approvals ADD COLUMN waitlist_entry_id uuid;
ALTER TABLE approvals ADD CONSTRAINT approvals_waitlist_entry_fkey
    FOREIGN KEY (waitlist_entry_id) REFERENCES waitlist_entries (id);
ALTER TABLE approvals DROP CONSTRAINT approvals_action_known;
ALTER TABLE approvals ADD CONSTRAINT approvals_action_known CHECK (action IN ('confirm', 'wait_for_seat'));
ALTER TABLE approvals ADD CONSTRAINT approvals_names_its_subject CHECK (
    (action = 'confirm' AND reservation_id IS NOT NULL)
    OR (action = 'wait_for_seat' AND waitlist_entry_id IS NOT NULL));

-- A wait intent belongs to its entry; each attempt to book the seat is a reservation of
-- its own (CONFIRMING while the write is in flight), which the intent names from the
-- moment it goes to RESERVING.
ALTER TABLE intents ALTER COLUMN reservation_id DROP NOT NULL;
ALTER TABLE intents ADD COLUMN waitlist_entry_id uuid;
ALTER TABLE intents ADD CONSTRAINT intents_waitlist_entry_fkey
    FOREIGN KEY (waitlist_entry_id) REFERENCES waitlist_entries (id);
CREATE UNIQUE INDEX intents_one_wait_per_entry ON intents (waitlist_entry_id) WHERE waitlist_entry_id IS NOT NULL;
ALTER TABLE intents DROP CONSTRAINT intents_kind_known;
ALTER TABLE intents ADD CONSTRAINT intents_kind_known CHECK (kind IN ('reserve', 'cancel', 'wait'));
ALTER TABLE intents DROP CONSTRAINT intents_state_known;
ALTER TABLE intents ADD CONSTRAINT intents_state_known CHECK (state IN
    ('REQUESTED', 'WAITING_FOR_SEAT', 'RESERVING', 'SUCCEEDED', 'FAILED_RACE', 'FAILED_AUTH', 'FAILED_UPSTREAM',
     'CANCELLED'));
ALTER TABLE intents ADD CONSTRAINT intents_wait_names_entry CHECK ((kind = 'wait') = (waitlist_entry_id IS NOT NULL));
-- Only a wait that never reached the write has no reservation.
ALTER TABLE intents ADD CONSTRAINT intents_write_names_reservation CHECK (
    reservation_id IS NOT NULL OR (kind = 'wait' AND state IN ('WAITING_FOR_SEAT', 'CANCELLED')));
ALTER TABLE intents ADD CONSTRAINT intents_only_waits_wait CHECK (
    kind = 'wait' OR state NOT IN ('WAITING_FOR_SEAT', 'CANCELLED'));
-- The claim of a wait names the reservation it is about to insert, in the same
-- transaction: the intent row is locked before any reservation row (the lock order),
-- so the reference is checked at commit.
ALTER TABLE intents ALTER CONSTRAINT intents_reservation_fkey DEFERRABLE INITIALLY IMMEDIATE;
CREATE INDEX intents_waiting_for_seat_idx ON intents (waitlist_entry_id) WHERE state = 'WAITING_FOR_SEAT';

-- When each upstream seat with waiters is read next. One row per seat, however many
-- wait, so that the backoff and the reads are the seat's, not each waiter's. Last in
-- the lock order: only ever locked after the resource and what follows it, or alone.
CREATE TABLE seat_polls (
    resource_id  uuid        NOT NULL,
    next_poll_at timestamptz NOT NULL,
    -- Polls in a row that found the seat taken: the backoff doubles with each.
    idle_polls   integer     NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL,
    CONSTRAINT seat_polls_pkey PRIMARY KEY (resource_id),
    CONSTRAINT seat_polls_resource_fkey FOREIGN KEY (resource_id) REFERENCES resources (id),
    CONSTRAINT seat_polls_idle_polls_non_negative CHECK (idle_polls >= 0)
);
CREATE INDEX seat_polls_due_idx ON seat_polls (next_poll_at);
