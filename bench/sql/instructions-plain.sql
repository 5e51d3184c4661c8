DO $$
BEGIN
    FOR i IN 0 .. :N - 1 LOOP
        INSERT INTO plain (v, at) VALUES ('owner-' || i, now());
        COMMIT;
    END LOOP;
END $$;
