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

-- name: circuit_failure
-- As in queries.sql, with one cast: PostgreSQL types a parameter that only appears inside
-- CASE ... ELSE NULL as text. (CAST(... AS DOUBLE PRECISION) also works in SQLite, so the
-- shared query could carry it and this override could go.)
INSERT INTO circuits (provider, state, failures, opened_at, probe_until, updated_at)
VALUES (:provider, CASE WHEN 1 >= :threshold THEN 'open' ELSE 'closed' END, 1,
        CASE WHEN 1 >= :threshold THEN CAST(:now AS DOUBLE PRECISION) ELSE NULL END, NULL, :now)
ON CONFLICT (provider) DO UPDATE SET
    failures = circuits.failures + 1,
    state = CASE WHEN circuits.state = 'half_open' OR circuits.failures + 1 >= :threshold
                 THEN 'open' ELSE circuits.state END,
    opened_at = CASE WHEN circuits.state = 'open' THEN circuits.opened_at
                     WHEN circuits.state = 'half_open' OR circuits.failures + 1 >= :threshold
                     THEN :now ELSE circuits.opened_at END,
    probe_until = NULL,
    updated_at = :now
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

-- name: purge_outbox
DELETE FROM outbox
WHERE delivered_at IS NOT NULL
  AND job_id IN (SELECT json_array_elements_text(CAST(:ids AS json)))
