-- PostgreSQL overrides of queries.sql; everything not named here is shared.
--
-- Races and why they are safe under READ COMMITTED:
-- - insert_job: ON CONFLICT DO NOTHING waits for a concurrent insert of the same key to commit
--   and then inserts nothing, so `RETURNING *` yields no row and the loser reads the winner's job.
-- - claim_job: an UPDATE that finds the row locked waits, then re-evaluates its WHERE on the new
--   row version; the second claimer sees `claimed_by` set and updates nothing. The shared text
--   is therefore already race-free and is not overridden.
-- - finish_job_cas / update_job_state run after lock_job below, in the same transaction.

-- name: lock_job
-- The row lock that makes read-check-write on a job (the compare-and-swap of I2) race-free
-- across processes: a second transaction waits here until the first commits, then reads the
-- version the first one wrote.
SELECT * FROM jobs WHERE id = :id FOR UPDATE

-- name: lock_job_of_attempt
SELECT * FROM jobs WHERE id = (SELECT job_id FROM attempts WHERE id = :attempt_id) FOR UPDATE

-- name: claim_runnable
-- SKIP LOCKED: two workers woken by the same notification take different jobs instead of
-- queueing on the same rows; the row lock is held from the inner SELECT to the UPDATE, so the
-- claim conditions still hold when it is written.
UPDATE jobs SET claimed_by = :worker, claim_until = :claim_until
WHERE id IN (SELECT id FROM jobs
             WHERE state IN ('queued', 'running') AND next_run_at <= :now
               AND (claimed_by IS NULL OR claim_until < :now)
             ORDER BY next_run_at
             LIMIT :limit
             FOR UPDATE SKIP LOCKED)
RETURNING *

-- name: claim_outbox
-- SKIP LOCKED: a second deliverer passes over the rows the first is claiming instead of waiting
-- for them; the claim columns then keep those rows its own until delivered or expired.
UPDATE outbox SET claimed_by = :worker, claim_until = :claim_until
WHERE id IN (
    SELECT id FROM outbox
    WHERE delivered_at IS NULL AND next_attempt_at <= :now
      AND (claim_until IS NULL OR claim_until < :now)
      AND owner IN ({json_list(:owners)})
    ORDER BY next_attempt_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED)
RETURNING *

-- name: await_settled
-- `settled_jobs` waiting on the server (migration 0012, router/store/server_waits.py): the
-- jobs among :ids in one of :states, once at least one is; none after :wait_s seconds.
SELECT * FROM jobrouter_await_settled(:ids, :states, :wait_s, :step_s)

-- name: await_runnable
-- First in a worker's claiming transaction (migrations 0012, 0013): waits up to :wait_s
-- seconds for a job `claim_runnable` may take and locks it for this transaction; `found_at`:
-- the time (:now plus the time waited) it found it at, NULL if none.
SELECT jobrouter_await_runnable(:now, :wait_s, :step_s) AS found_at

-- name: insert_attempt
-- As queries.sql's, the JSON rows read by json_to_recordset.
INSERT INTO attempts (id, job_id, seq, provider, model, state, started_at, worker, lease_until)
SELECT r.id, r.job_id,
       (SELECT COALESCE(MAX(a.seq), 0) + 1 FROM attempts a WHERE a.job_id = r.job_id),
       r.provider, r.model, 'started', CAST(:now AS DOUBLE PRECISION), r.worker, r.lease_until
FROM json_to_recordset(CAST(:rows AS json))
     AS r(id TEXT, job_id TEXT, provider TEXT, model TEXT, worker TEXT,
          lease_until DOUBLE PRECISION)
RETURNING *

-- name: start_jobs
UPDATE jobs SET state = 'running', error = NULL, error_detail = NULL, version = jobs.version + 1,
                updated_at = :now, next_run_at = :now, event_seq = jobs.event_seq + r.n
FROM json_to_recordset(CAST(:rows AS json)) AS r(id TEXT, version BIGINT, n BIGINT)
WHERE jobs.id = r.id AND jobs.version = r.version AND jobs.winner_attempt_id IS NULL
RETURNING jobs.*

-- name: insert_job_events
INSERT INTO job_events (job_id, seq, kind, job_state, data, at)
SELECT r.job_id, r.seq, r.kind, r.job_state, r.data, CAST(:at AS DOUBLE PRECISION)
FROM json_to_recordset(CAST(:rows AS json))
     AS r(job_id TEXT, seq BIGINT, kind TEXT, job_state TEXT, data TEXT)

-- name: lock_live_watch
-- The fold's read, in its transaction: an operator's reinstatement (an UPDATE of a row) waits
-- for the fold, or the fold for it; neither overwrites the other.
SELECT * FROM live_watch ORDER BY contract, provider FOR UPDATE

-- name: drop_attempt_verdicts_of_pair
-- As queries.sql's, the verdict's contract read by PostgreSQL's JSON operator.
UPDATE attempts SET verdict_at = NULL
WHERE verdict_at IS NOT NULL AND provider || '' = :provider
  AND CAST(verdict AS json) ->> 'contract' = :contract

-- name: spend_by_day
-- The shared statement but for the day: PostgreSQL's CAST to an integer rounds (an attempt
-- started at 12:00 UTC or later would count for the next day), so it floors first.
SELECT j.owner AS owner, j.task AS task, a.provider AS provider,
       CAST(floor(a.started_at / 86400) AS BIGINT) AS day,
       COUNT(*) AS attempts,
       SUM(a.cost_usd) AS cost_usd,
       CAST(SUM(COALESCE(a.prompt_tokens, 0) + COALESCE(a.completion_tokens, 0)) AS BIGINT)
           AS tokens,
       SUM(CASE WHEN a.cost_unknown IS NOT NULL THEN 1 ELSE 0 END) AS cost_unknown
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE a.started_at >= :since AND a.started_at < :until
  AND (CAST(:owner AS TEXT) IS NULL OR j.owner = :owner)
GROUP BY j.owner, j.task, a.provider, CAST(floor(a.started_at / 86400) AS BIGINT)
