-- scripts/hold-instructions: the resources for the holds, and the table of the
-- baseline's plain inserts. The loops (instructions-plain.sql, and
-- instructions-hold.sql as the script fills it in) are sent to a single-user backend
-- as one line each, so they carry no `--` comments.
INSERT INTO resources (id, name, capacity, authority, hold_ttl_seconds, offer_ttl_seconds, created_by, created_at,
                       updated_at)
SELECT gen_random_uuid(), 'r' || g, 1, 'local', 600, 600, 'bench', now(), now() FROM generate_series(1, 200) g;
CREATE TABLE bench_ids AS SELECT id, row_number() OVER () - 1 AS n FROM resources WHERE NOT has_calendar_rules;
CREATE TABLE plain (id bigserial PRIMARY KEY, v text, at timestamptz);
-- 200 capacity-3 resources without rules, for the capacity-N holds.
INSERT INTO resources (id, name, capacity, authority, hold_ttl_seconds, offer_ttl_seconds, created_by, created_at,
                       updated_at)
SELECT gen_random_uuid(), 'n' || g, 3, 'local', 600, 600, 'bench', now(), now() FROM generate_series(1, 200) g;
CREATE TABLE bench_n_ids AS
    SELECT id, row_number() OVER () - 1 AS n FROM resources WHERE capacity = 3 AND NOT has_calendar_rules;
-- 200 resources with calendar rules of capacity 1 and 200 of capacity 3, as the
-- bench's rules variants have them: Berlin, open every day all day, an hourly grid, a
-- minute's notice, and buffers on every other one. Their holds pass the version the
-- rules were read at (0).
INSERT INTO resources (id, name, capacity, authority, hold_ttl_seconds, offer_ttl_seconds, created_by, created_at,
                       updated_at, time_zone, schedule, min_notice_minutes, slot_minutes, buffer_before_minutes,
                       buffer_after_minutes)
SELECT gen_random_uuid(), 'rules-' || capacity || '-' || g, capacity, 'local', 600, 600, 'bench', now(), now(),
       'Europe/Berlin',
       jsonb_build_object('weekly', jsonb_build_object('mon', '[["00:00", "24:00"]]'::jsonb,
           'tue', '[["00:00", "24:00"]]'::jsonb, 'wed', '[["00:00", "24:00"]]'::jsonb,
           'thu', '[["00:00", "24:00"]]'::jsonb, 'fri', '[["00:00", "24:00"]]'::jsonb,
           'sat', '[["00:00", "24:00"]]'::jsonb, 'sun', '[["00:00", "24:00"]]'::jsonb), 'exceptions', '[]'::jsonb),
       1, 60, (g % 2) * 5, (g % 2) * 5
FROM unnest(ARRAY[1, 3]) capacity, generate_series(1, 200) g;
CREATE TABLE bench_rules_ids AS
    SELECT id, row_number() OVER () - 1 AS n FROM resources WHERE capacity = 1 AND has_calendar_rules;
CREATE TABLE bench_rules_n_ids AS
    SELECT id, row_number() OVER () - 1 AS n FROM resources WHERE capacity = 3 AND has_calendar_rules;
