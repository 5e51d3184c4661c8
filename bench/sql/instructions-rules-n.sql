DO $$
DECLARE
    ids uuid[] := ARRAY(SELECT id FROM bench_rules_n_ids ORDER BY n);
    r record;
    base timestamptz := '2027-01-01T00:00:00Z';
BEGIN
    FOR i IN 0 .. :N - 1 LOOP
        SELECT * INTO r FROM reservation_hold(
            gen_random_uuid(), ids[i % 200 + 1], 'owner-' || (i % 50),
            base + make_interval(hours => i / 200 + :OFF), base + make_interval(hours => i / 200 + :OFF + 1),
            1, false, now(), '{}'::jsonb, gen_random_uuid(), p_rules_version => 0);
        IF r.outcome <> 'reserved' THEN RAISE EXCEPTION 'outcome %', r.outcome; END IF;
        COMMIT;
    END LOOP;
END $$;
