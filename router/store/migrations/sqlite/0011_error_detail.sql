-- jobrouter schema v11 (SQLite): raw provider detail is operator-only (issue 14).
-- `error` becomes the summary anyone who may see the job is shown (our own words, made by
-- router/disclosure.py from the error kind, the provider's alias and the HTTP status) and
-- `error_detail` keeps the raw text behind it (a provider's words, scrubbed): operators only.
-- Rows written before hold a provider's text in `error`: it moves to `error_detail`, and the
-- summary is made from what the row itself says (the HTTP status was not kept: it is left out).
-- The events, outbox rows and dead letters of those rows carry the summary instead. Rows whose
-- text was our own (cancelled, resolved, lost, unknown jobs) keep it as their summary.
ALTER TABLE jobs ADD COLUMN error_detail TEXT;
ALTER TABLE attempts ADD COLUMN error_detail TEXT;

UPDATE attempts SET error_detail = error, error = CASE error_kind
        WHEN 'not_sent' THEN 'provider ' || provider || ' did not act on the request (it refused it unprocessed, or it was not reached)'
        WHEN 'rejected' THEN 'provider ' || provider || ' answered with an error or an unusable answer and may have acted'
        ELSE 'no answer came back from provider ' || provider || ': the request may have run'
    END
WHERE error_kind IN ('not_sent', 'rejected', 'unknown') AND error IS NOT NULL;

UPDATE jobs SET error_detail = error,
    error = 'no provider produced a usable answer (each attempt says how it ended)'
WHERE state = 'failed' AND error IS NOT NULL;

UPDATE job_events SET data = json_set(data, '$.error', CASE json_extract(data, '$.error_kind')
        WHEN 'not_sent' THEN 'provider ' || json_extract(data, '$.provider') || ' did not act on the request (it refused it unprocessed, or it was not reached)'
        WHEN 'rejected' THEN 'provider ' || json_extract(data, '$.provider') || ' answered with an error or an unusable answer and may have acted'
        ELSE 'no answer came back from provider ' || json_extract(data, '$.provider') || ': the request may have run'
    END)
WHERE kind LIKE 'attempt.%' AND json_extract(data, '$.error') IS NOT NULL
  AND json_extract(data, '$.error_kind') IN ('not_sent', 'rejected', 'unknown');

UPDATE job_events
SET data = json_set(data, '$.error', 'no provider produced a usable answer (each attempt says how it ended)')
WHERE kind = 'job.failed' AND json_extract(data, '$.error') IS NOT NULL;

UPDATE outbox
SET payload = json_set(payload, '$.error', 'no provider produced a usable answer (each attempt says how it ended)')
WHERE kind = 'job.failed' AND json_extract(payload, '$.error') IS NOT NULL;

UPDATE outbox_dead
SET payload = json_set(payload, '$.error', 'no provider produced a usable answer (each attempt says how it ended)')
WHERE kind = 'job.failed' AND json_extract(payload, '$.error') IS NOT NULL;
