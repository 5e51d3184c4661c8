-- scripts/hold-instructions: 200 capacity-1 resources for the holds, and the table of
-- the baseline's plain inserts. The loops (instructions-*.sql) are sent to a
-- single-user backend as one line each, so they carry no `--` comments.
INSERT INTO resources (id, name, capacity, authority, hold_ttl_seconds, offer_ttl_seconds, created_by, created_at,
                       updated_at)
SELECT gen_random_uuid(), 'r' || g, 1, 'local', 600, 600, 'bench', now(), now() FROM generate_series(1, 200) g;
CREATE TABLE bench_ids AS SELECT id, row_number() OVER () - 1 AS n FROM resources;
CREATE TABLE plain (id bigserial PRIMARY KEY, v text, at timestamptz);
