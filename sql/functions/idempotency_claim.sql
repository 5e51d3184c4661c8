-- Claims an idempotency key inside the transaction of the request it guards, so a
-- keyed request commits once, with its answer. PostgreSQL itself tells the cases
-- apart: a committed row is an answer (the caller reads it); a concurrent duplicate's
-- insert waits on the primary key until the original commits (its stored answer is
-- replayed) or aborts (the key is free again, as after a crash, and this claim takes
-- it).
--
-- The wait is bounded by `p_wait` (a lock_timeout value such as '10ms'): past it the
-- claim fails with lock_not_available (55P03), and the caller lets the connection go
-- and polls again later, so that a retry waiting for its original holds no connection
-- while it waits. The session's own lock_timeout is restored for the rest of the
-- transaction.
CREATE OR REPLACE FUNCTION idempotency_claim(
    p_principal   text,
    p_method      text,
    p_route       text,
    p_key         text,
    p_fingerprint bytea,
    p_now         timestamptz,
    p_expires_at  timestamptz,
    p_wait        text
) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    session_timeout text := current_setting('lock_timeout');
    claimed boolean;
BEGIN
    PERFORM set_config('lock_timeout', p_wait, true);
    INSERT INTO idempotency_keys (principal, method, route, key, fingerprint, state, created_at, expires_at)
    VALUES (p_principal, p_method, p_route, p_key, p_fingerprint, 'processing', p_now, p_expires_at)
    ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO NOTHING;
    claimed := FOUND;
    PERFORM set_config('lock_timeout', session_timeout, true);
    RETURN claimed;
END
$$;
