-- jobrouter schema v9 (PostgreSQL): notifications only where someone listens, and a channel
-- for settled jobs.
--
-- Every NOTIFY wakes EVERY backend LISTENing in the database, whatever its channels, and each
-- reads the notification queue in a transaction of its own (measured: 100 NOTIFYs to one idle
-- listener, 200 commits on the server). With one notification per event, each write of a job
-- cost one more transaction per listening process. So:
-- - a job that settles (succeeded, failed, cancelled, unknown) is announced on
--   `jobrouter_settled`, with its row: `Router.wait` needs nothing else;
-- - a process's LISTEN connection names what it follows in its application_name
--   (`jobrouter-listen:events,runnable,settled`, see router/store/postgres.py), and each
--   trigger notifies only when some connected process follows that kind. A worker fleet whose
--   submitters only wait then hears one notification when a job is free and one when it
--   settles, not one per event.
CREATE FUNCTION jobrouter_followed(what TEXT) RETURNS BOOLEAN LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                   WHERE datname = current_database()
                     AND application_name LIKE 'jobrouter-listen:%'
                     AND what = ANY (string_to_array(substr(application_name, 18), ',')))
$$;

CREATE OR REPLACE FUNCTION jobrouter_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF jobrouter_followed('events') THEN
        PERFORM pg_notify('jobrouter_events', NEW.job_id);
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION jobrouter_notify_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF jobrouter_followed('runnable') THEN
        PERFORM pg_notify('jobrouter_jobs', NEW.id);
    END IF;
    RETURN NULL;
END;
$$;

-- The settled job's whole row travels with its notification when it fits (a payload must stay
-- under 8000 bytes): the waiter then needs no read, which would be one more transaction.
CREATE FUNCTION jobrouter_notify_settled() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    payload TEXT;
BEGIN
    IF jobrouter_followed('settled') THEN
        payload := row_to_json(NEW)::text;
        IF octet_length(payload) > 7900 THEN
            payload := NEW.id;
        END IF;
        PERFORM pg_notify('jobrouter_settled', payload);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER jobs_notify_settled AFTER UPDATE OF state ON jobs
    FOR EACH ROW WHEN (NEW.state IN ('succeeded', 'failed', 'cancelled', 'unknown')
                       AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION jobrouter_notify_settled();
