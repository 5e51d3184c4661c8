-- Recurring series: one request (`POST /v1/series`) for a first occurrence and a
-- recurrence rule, each occurrence a reservation of its own made by the same hold
-- paths as any other, so every calendar rule and booking limit judges each one.
--
-- `series` keeps what was asked (the rule, the zone it was expanded in, the mode);
-- `series_occurrences` keeps every occurrence the rule gave, held or not: an
-- occurrence that was not held has no reservation, only the problem that refused it,
-- which `GET /v1/series/{id}` answers as it was first answered.
CREATE TABLE series (
    id          uuid        NOT NULL,
    owner       text        NOT NULL,
    -- The resource whose time zone the rule was expanded in (for items: the first
    -- item's resource, or its pool's first member).
    resource_id uuid        NOT NULL,
    time_zone   text        NOT NULL,
    recurrence  text        NOT NULL,
    mode        text        NOT NULL,
    created_at  timestamptz NOT NULL,
    CONSTRAINT series_pkey PRIMARY KEY (id),
    CONSTRAINT series_resource_fkey FOREIGN KEY (resource_id) REFERENCES resources (id),
    CONSTRAINT series_mode_known CHECK (mode IN ('all_or_nothing', 'skip_conflicts'))
);

CREATE TABLE series_occurrences (
    series_id      uuid        NOT NULL,
    -- The occurrence's place in the series, from 0.
    position       integer     NOT NULL,
    starts_at      timestamptz NOT NULL,
    ends_at        timestamptz NOT NULL,
    -- The reservation made for it (a booking of several: its lead row); NULL when the
    -- occurrence was not held, and then `problem` says why.
    reservation_id uuid,
    problem        jsonb,
    CONSTRAINT series_occurrences_pkey PRIMARY KEY (series_id, position),
    CONSTRAINT series_occurrences_series_fkey FOREIGN KEY (series_id) REFERENCES series (id) ON DELETE CASCADE,
    CONSTRAINT series_occurrences_held_or_why CHECK ((reservation_id IS NULL) <> (problem IS NULL))
);

-- Every row of an occurrence names its series (every item of a booking of several
-- too), so that a scoped confirm, cancel or move finds its siblings by index. No
-- foreign key, for the reason V2 gives for booking_id: the series is inserted in the
-- transaction that tags its rows, and a key would queue a check for every reservation
-- inserted, those of no series too.
ALTER TABLE reservations ADD COLUMN series_id uuid;
CREATE INDEX reservations_series_idx ON reservations (series_id, starts_at) WHERE series_id IS NOT NULL;
