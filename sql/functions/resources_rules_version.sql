-- A resource's `rules_version` counts the changes of its calendar rules and booking
-- limits, whoever
-- writes them: a hold judged by rules read before its statement compares the number
-- under the resource's lock, and a mismatch sends it to the general path.
CREATE OR REPLACE FUNCTION resources_rules_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.rules_version := OLD.rules_version + 1;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER resources_rules_version BEFORE UPDATE OF time_zone, schedule, buffer_before_minutes,
    buffer_after_minutes, min_notice_minutes, max_advance_days, slot_minutes, booking_limits ON resources
    FOR EACH ROW WHEN ((OLD.time_zone, OLD.schedule, OLD.buffer_before_minutes, OLD.buffer_after_minutes,
                        OLD.min_notice_minutes, OLD.max_advance_days, OLD.slot_minutes, OLD.booking_limits)
                       IS DISTINCT FROM
                       (NEW.time_zone, NEW.schedule, NEW.buffer_before_minutes, NEW.buffer_after_minutes,
                        NEW.min_notice_minutes, NEW.max_advance_days, NEW.slot_minutes, NEW.booking_limits))
    EXECUTE FUNCTION resources_rules_version();
