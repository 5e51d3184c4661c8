-- What an event of a series' occurrence adds to reservation_event's payload: its
-- `series_id`, read by the row's id; `{}` for a reservation of no series, whose
-- events carry no such field. For the statements whose rows do not select series_id
-- (the statements that do add it from the row). A statement that changes the row reads
-- the series as its snapshot has it, which is the row's: a series is named once, when
-- the series is made. SQL, STABLE: inlined where it is called.
CREATE OR REPLACE FUNCTION reservation_series_field(p_id uuid) RETURNS jsonb LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce((SELECT jsonb_strip_nulls(jsonb_build_object('series_id', r.series_id))
                     FROM reservations r WHERE r.id = p_id), '{}'::jsonb)
$$;
