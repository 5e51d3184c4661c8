DO $$
DECLARE
    ids uuid[] := ARRAY(SELECT id FROM bench_ids ORDER BY n);
    r record;
    base timestamptz := '2027-01-01T00:00:00Z';
BEGIN
    FOR i IN 0 .. :N - 1 LOOP
        SELECT * INTO r FROM reservation_hold_items(
            ARRAY[gen_random_uuid(), gen_random_uuid()], ARRAY[ids[i % 100 + 1], ids[i % 100 + 101]],
            ARRAY[false, false], ARRAY[1, 1], 'owner-' || (i % 50),
            base + make_interval(hours => i / 100 + :OFF), base + make_interval(hours => i / 100 + :OFF + 1),
            false, now(), '{}'::jsonb, gen_random_uuid());
        IF r.outcome <> 'reserved' THEN RAISE EXCEPTION 'outcome %', r.outcome; END IF;
        COMMIT;
    END LOOP;
END $$;
