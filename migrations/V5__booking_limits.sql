-- How many live bookings and holds one principal may have on a resource per window: a
-- JSON array of {"max", "window", "rolling_minutes"} (NULL: none). Limits are judged
-- under the resource's lock, on the general path: they count among the rules, so the
-- one-statement hold serves a resource with limits only at the rules' version its
-- caller judged by, and its caller sends every such hold to the general path.
ALTER TABLE resources
    ADD COLUMN booking_limits jsonb,
    ADD CONSTRAINT resources_booking_limits_array
        CHECK (booking_limits IS NULL OR jsonb_typeof(booking_limits) = 'array');

ALTER TABLE resources DROP COLUMN has_calendar_rules;
-- Whether any rule constrains a booking (the time zone alone does not).
ALTER TABLE resources ADD COLUMN has_calendar_rules boolean GENERATED ALWAYS AS (
    schedule IS NOT NULL OR buffer_before_minutes > 0 OR buffer_after_minutes > 0 OR min_notice_minutes > 0
    OR max_advance_days IS NOT NULL OR slot_minutes IS NOT NULL OR booking_limits IS NOT NULL) STORED;
