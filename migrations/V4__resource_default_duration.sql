-- The length a booking page offers first for a resource (`default_duration_minutes`,
-- minutes; NULL: the grid's step, or an hour without a grid). A hint for clients, not a
-- rule: no booking is judged by it, so it is no calendar rule and changing it leaves
-- rules_version alone.
ALTER TABLE resources
    ADD COLUMN default_duration_minutes integer,
    ADD CONSTRAINT resources_default_duration_range
        CHECK (default_duration_minutes IS NULL OR default_duration_minutes BETWEEN 1 AND 1440);
