-- jobrouter schema v11 (PostgreSQL): raw provider detail is operator-only (issue 14).
-- `error` becomes the summary anyone who may see the job is shown (our own words, made by
-- router/disclosure.py from the error kind, the provider's alias and the HTTP status) and
-- `error_detail` keeps the raw text behind it (a provider's words, scrubbed): operators only.
-- Rows written before hold a provider's text in `error`: it moves to `error_detail`, and the
-- summary is made from what the row itself says (the HTTP status was not kept: it is left out).
-- The events, outbox rows and dead letters of those rows carry the summary instead. Rows whose
-- text was our own (cancelled, resolved, lost, unknown jobs) keep it as their summary.
ALTER TABLE jobs ADD COLUMN error_detail TEXT;
ALTER TABLE attempts ADD COLUMN error_detail TEXT;

CREATE FUNCTION jobrouter_v11_summary(kind TEXT, provider TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE kind
        WHEN 'not_sent' THEN 'provider ' || provider || ' did not act on the request (it refused it unprocessed, or it was not reached)'
        WHEN 'rejected' THEN 'provider ' || provider || ' answered with an error or an unusable answer and may have acted'
        ELSE 'no answer came back from provider ' || provider || ': the request may have run'
    END
$$;

UPDATE attempts SET error_detail = error, error = jobrouter_v11_summary(error_kind, provider)
WHERE error_kind IN ('not_sent', 'rejected', 'unknown') AND error IS NOT NULL;

UPDATE jobs SET error_detail = error,
    error = 'no provider produced a usable answer (each attempt says how it ended)'
WHERE state = 'failed' AND error IS NOT NULL;

-- A stored JSON text may hold a `\u0000` escape, which PostgreSQL's JSON functions refuse (the
-- whole document): it is read with U+FFFD in its place, and each row is rebuilt from its known
-- keys. An attempt's event holds exactly these four (router/store/attempts.py: finish_attempt).
CREATE FUNCTION jobrouter_v11_json(stored TEXT) RETURNS json LANGUAGE sql IMMUTABLE AS $$
    SELECT CAST(replace(stored, '\u0000', '\ufffd') AS json)
$$;
UPDATE job_events SET data = CAST(json_build_object(
        'attempt_id', jobrouter_v11_json(data) -> 'attempt_id',
        'error', jobrouter_v11_summary(jobrouter_v11_json(data) ->> 'error_kind',
                                       jobrouter_v11_json(data) ->> 'provider'),
        'error_kind', jobrouter_v11_json(data) -> 'error_kind',
        'provider', jobrouter_v11_json(data) -> 'provider') AS TEXT)
WHERE kind LIKE 'attempt.%' AND json_typeof(jobrouter_v11_json(data) -> 'error') = 'string'
  AND jobrouter_v11_json(data) ->> 'error_kind' IN ('not_sent', 'rejected', 'unknown');

UPDATE job_events
SET data = CAST(json_build_object('error', CAST('no provider produced a usable answer (each attempt says how it ended)' AS TEXT)) AS TEXT)
WHERE kind = 'job.failed' AND json_typeof(jobrouter_v11_json(data) -> 'error') = 'string';

-- A completion event's payload (router/store/transitions.py: write_outbox), its values copied as they are.
CREATE FUNCTION jobrouter_v11_payload(payload TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE AS $$
    SELECT CAST(json_build_object(
        'error', CAST('no provider produced a usable answer (each attempt says how it ended)' AS TEXT),
        'event', p -> 'event', 'idempotency_key', p -> 'idempotency_key', 'job_id', p -> 'job_id',
        'owner', p -> 'owner', 'result', p -> 'result', 'state', p -> 'state', 'task', p -> 'task',
        'version', p -> 'version') AS TEXT)
    FROM (SELECT jobrouter_v11_json(payload) AS p) AS parsed
$$;

UPDATE outbox SET payload = jobrouter_v11_payload(payload)
WHERE kind = 'job.failed' AND json_typeof(jobrouter_v11_json(payload) -> 'error') = 'string';

UPDATE outbox_dead SET payload = jobrouter_v11_payload(payload)
WHERE kind = 'job.failed' AND json_typeof(jobrouter_v11_json(payload) -> 'error') = 'string';

DROP FUNCTION jobrouter_v11_payload(TEXT);
DROP FUNCTION jobrouter_v11_json(TEXT);
DROP FUNCTION jobrouter_v11_summary(TEXT, TEXT);
