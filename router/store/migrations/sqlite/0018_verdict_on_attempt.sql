-- jobrouter schema v18 (sqlite): a live verdict is kept on its attempt (issue 27's cost).
--
-- An answered attempt's verdict (what the router judged of the answer: contract, failed,
-- failure, rendering_off, prompt_tokens, prompt_chars; JSON) is written by the UPDATE that
-- ends the attempt, which runs anyway: no row of its own, one statement fewer a job.
-- verdict_at: when it was written, NULL once the leader folded it (or for an attempt without
-- one); the partial index holds only the verdicts not folded yet, the fold's whole read.
-- The golden probes' verdicts have no attempt: they keep their table, renamed for what it now
-- holds. Live verdicts not folded yet move onto their attempts (one whose attempt was purged
-- with its job has nothing left to hang on and is dropped).
ALTER TABLE attempts ADD COLUMN verdict TEXT;
ALTER TABLE attempts ADD COLUMN verdict_at REAL;
CREATE INDEX attempts_unfolded ON attempts (verdict_at) WHERE verdict_at IS NOT NULL;
UPDATE attempts SET verdict_at = v.at,
    verdict = json_object('contract', v.contract, 'failed', json(CASE WHEN v.failed THEN 'true' ELSE 'false' END),
                          'failure', v.failure,
                          'rendering_off', json(CASE v.rendering_off WHEN 1 THEN 'true' WHEN 0 THEN 'false' ELSE 'null' END),
                          'prompt_tokens', v.prompt_tokens, 'prompt_chars', v.prompt_chars)
FROM live_verdicts AS v
WHERE v.source = 'live' AND v.attempt_id = attempts.id;
DELETE FROM live_verdicts WHERE source = 'live';
ALTER TABLE live_verdicts RENAME TO probe_verdicts;

-- Two indexes no statement of the SQLite store walks (issue 28; `python -m tests.bench.plans`
-- lists each query's plan): SQLite keeps no statistics, and its planner takes jobs_by_state
-- for the claim of runnable jobs, the queue depth and the retention purge alike. Each cost
-- every job its upkeep all the same (jobs_runnable an entry at the insert and its removal at
-- the finish, jobs_finished an entry at the finish). PostgreSQL, which plans by statistics
-- and walks both, keeps them.
DROP INDEX jobs_runnable;
DROP INDEX jobs_finished;
