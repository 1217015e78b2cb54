-- jobrouter schema v13 (PostgreSQL): `jobrouter_await_runnable` returns the time it found a
-- job at, not just that it found one.
--
-- Its wait decides on the client's clock at its start plus the time waited; the claim that
-- followed read the client's clock again. A clock stepped back during the wait (NTP) made the
-- claim's conditions stricter than the wait's: the job found stayed locked but unclaimed,
-- and the worker waited again at once. The claim now runs at the time returned here (or the
-- client's clock, if later). Routers of v12 ignore the value: they keep working meanwhile.
DROP FUNCTION jobrouter_await_runnable(DOUBLE PRECISION, DOUBLE PRECISION, DOUBLE PRECISION);

-- Wait until some job may be claimed (the conditions of the `claim_runnable` query, the time
-- being `client_now`, the client's clock, plus the time waited), then LOCK one such row and
-- return that time; NULL after `wait_s`. Called first in a worker's claiming transaction: the
-- claim that follows takes the locked row (a transaction's own lock does not make SKIP LOCKED
-- skip it), and another worker's wait skips it, so two waiting workers do not both wake for
-- one job.
CREATE FUNCTION jobrouter_await_runnable(
    client_now DOUBLE PRECISION, wait_s DOUBLE PRECISION, step_s DOUBLE PRECISION
) RETURNS DOUBLE PRECISION LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    began TIMESTAMPTZ := clock_timestamp();
    waited DOUBLE PRECISION := 0;
BEGIN
    LOOP
        PERFORM 1 FROM jobs
        WHERE state IN ('queued', 'running') AND next_run_at <= client_now + waited
          AND (claimed_by IS NULL OR claim_until < client_now + waited)
        LIMIT 1
        FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
            RETURN client_now + waited;
        END IF;
        waited := extract(epoch FROM clock_timestamp() - began);
        IF waited >= wait_s THEN
            RETURN NULL;
        END IF;
        PERFORM pg_sleep(least(step_s, wait_s - waited));
    END LOOP;
END;
$$;
