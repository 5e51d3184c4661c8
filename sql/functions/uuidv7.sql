-- Time-ordered ids (UUID version 7), the outbox's default: each insert lands on the
-- right edge of the primary key index instead of a random page, so a write touches few
-- index pages and, after a checkpoint, logs few full page images. PostgreSQL 15 has no
-- uuidv7(); this is the RFC 9562 layout: 48 bits of Unix milliseconds, then the version
-- and variant bits, then random bits.
CREATE OR REPLACE FUNCTION uuidv7() RETURNS uuid LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(
        set_bit(
            set_bit(
                overlay(uuid_send(gen_random_uuid())
                        PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                        FROM 1 FOR 6),
                52, 1),
            53, 1),
        'hex')::uuid
$$;
