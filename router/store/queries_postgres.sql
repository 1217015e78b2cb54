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
      AND owner IN (SELECT json_array_elements_text(CAST(:owners AS json)))
    ORDER BY next_attempt_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED)
RETURNING *

-- Retention (see queries.sql): the same statements, reading the JSON-array lists with
-- json_array_elements_text.

-- name: count_purgeable
SELECT COUNT(*) AS n,
       COALESCE(SUM(CASE WHEN EXISTS (SELECT 1 FROM outbox p
                                      WHERE p.job_id = j.id AND p.delivered_at IS NULL)
                         THEN 1 ELSE 0 END), 0) AS parked
FROM jobs j
WHERE j.state IN ('succeeded', 'failed', 'cancelled') AND j.updated_at < :cutoff
  AND NOT EXISTS (SELECT 1 FROM outbox o
                  WHERE o.job_id = j.id AND o.delivered_at IS NULL
                    AND (o.owner IN (SELECT json_array_elements_text(CAST(:owners AS json)))
                         OR o.tries > 0 OR o.claimed_by IS NOT NULL OR :drop_parked = 0))
  AND NOT EXISTS (SELECT 1 FROM outbox_dead d WHERE d.job_id = j.id)

-- name: count_kept_undelivered
SELECT COUNT(*) AS n FROM jobs j
WHERE j.state IN ('succeeded', 'failed', 'cancelled') AND j.updated_at < :cutoff
  AND (EXISTS (SELECT 1 FROM outbox o
               WHERE o.job_id = j.id AND o.delivered_at IS NULL
                 AND (o.owner IN (SELECT json_array_elements_text(CAST(:owners AS json)))
                         OR o.tries > 0 OR o.claimed_by IS NOT NULL OR :drop_parked = 0))
       OR EXISTS (SELECT 1 FROM outbox_dead d WHERE d.job_id = j.id))

-- name: purge_jobs
DELETE FROM jobs WHERE id IN (
    SELECT j.id FROM jobs j
    WHERE j.state IN ('succeeded', 'failed', 'cancelled') AND j.updated_at < :cutoff
      AND NOT EXISTS (SELECT 1 FROM outbox o
                      WHERE o.job_id = j.id AND o.delivered_at IS NULL
                        AND (o.owner IN (SELECT json_array_elements_text(CAST(:owners AS json)))
                         OR o.tries > 0 OR o.claimed_by IS NOT NULL OR :drop_parked = 0))
      AND NOT EXISTS (SELECT 1 FROM outbox_dead d WHERE d.job_id = j.id)
    ORDER BY j.updated_at
    LIMIT :limit)
RETURNING id

-- name: purge_outbox
DELETE FROM outbox
WHERE job_id IN (SELECT json_array_elements_text(CAST(:ids AS json)))
RETURNING delivered_at

-- name: renew_claims
UPDATE jobs SET claim_until = :claim_until
WHERE claimed_by = :worker AND state IN ('queued', 'running')
  AND id IN (SELECT json_array_elements_text(CAST(:ids AS json)))

-- name: renew_attempt_leases
UPDATE attempts SET lease_until = :lease_until
WHERE worker = :worker AND state = 'started'
  AND job_id IN (SELECT json_array_elements_text(CAST(:ids AS json)))

-- name: list_jobs_states
AND state IN (SELECT json_array_elements_text(CAST(:states AS json)))
