DO $$
DECLARE
    ids uuid[] := ARRAY(SELECT id FROM :IDS ORDER BY n);
    r record;
    base timestamptz := '2027-01-01T00:00:00Z';
BEGIN
    FOR i IN 0 .. :N - 1 LOOP
        SELECT * INTO r FROM reservation_hold(
            gen_random_uuid(), ids[:RESOURCE], 'owner-' || (i % 50),
            base + make_interval(hours => :HOUR), base + make_interval(hours => :HOUR + 1),
            1, false, now(), '{}'::jsonb, gen_random_uuid():ARGS);
        IF r.outcome NOT IN (:OUTCOMES) THEN RAISE EXCEPTION 'outcome %', r.outcome; END IF;
        COMMIT;
    END LOOP;
END $$;
