-- The resource that the fixtures of this directory name (Room 101, capacity 1, id
-- 00000000-0000-0000-0000-000000000001), for invoking them by hand under
-- `cargo lambda watch` (README, "Local runs"). Apply after the migrations:
--   psql "$DATABASE_URL" -f tests/events/seed.sql
-- Running it again changes nothing.
INSERT INTO resources (id, name, capacity, authority, hold_ttl_seconds, offer_ttl_seconds, created_by, created_at,
                       updated_at)
VALUES ('00000000-0000-0000-0000-000000000001', 'Room 101', 1, 'local', 300, 900,
        '00000000-0000-0000-0000-0000000000ad', now(), now())
ON CONFLICT (id) DO NOTHING;
