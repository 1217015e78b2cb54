-- jobrouter schema v12 (PostgreSQL): reads that wait on the server (router/store/server_waits.py).
--
-- A signal between processes through PostgreSQL costs the receiving side a transaction: a
-- notification read (every LISTENing backend reads each notifying transaction in one of its
-- own) or a read. A read that waits on the server costs ONE transaction however long it
-- waits: each function below looks again every `step_s` seconds and returns as soon as it
-- finds something, or after `wait_s`. Both are VOLATILE: under READ COMMITTED each statement
-- inside takes a fresh snapshot, so a look sees every commit made before it.

-- The jobs among `ids` (a JSON array) in one of `states` (a JSON array), once at least one of
-- them is; none after `wait_s`. `Router.wait`'s one read for the open waits of a process.
CREATE FUNCTION jobrouter_await_settled(
    ids TEXT, states TEXT, wait_s DOUBLE PRECISION, step_s DOUBLE PRECISION
) RETURNS SETOF jobs LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    wanted TEXT[] := ARRAY(SELECT json_array_elements_text(ids::json));
    settled TEXT[] := ARRAY(SELECT json_array_elements_text(states::json));
    began TIMESTAMPTZ := clock_timestamp();
BEGIN
    LOOP
        RETURN QUERY SELECT * FROM jobs WHERE id = ANY (wanted) AND state = ANY (settled);
        IF FOUND OR clock_timestamp() >= began + make_interval(secs => wait_s) THEN
            RETURN;
        END IF;
        PERFORM pg_sleep(step_s);
    END LOOP;
END;
$$;

-- Wait until some job may be claimed (the conditions of the `claim_runnable` query, the time
-- being `client_now`, the client's clock, plus the time waited), then LOCK one such row and
-- return true; false after `wait_s`. Called first in a worker's claiming transaction: the
-- claim that follows takes the locked row (a transaction's own lock does not make SKIP LOCKED
-- skip it), and another worker's wait skips it, so two waiting workers do not both wake for
-- one job.
CREATE FUNCTION jobrouter_await_runnable(
    client_now DOUBLE PRECISION, wait_s DOUBLE PRECISION, step_s DOUBLE PRECISION
) RETURNS BOOLEAN LANGUAGE plpgsql VOLATILE AS $$
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
            RETURN TRUE;
        END IF;
        waited := extract(epoch FROM clock_timestamp() - began);
        IF waited >= wait_s THEN
            RETURN FALSE;
        END IF;
        PERFORM pg_sleep(least(step_s, wait_s - waited));
    END LOOP;
END;
$$;
