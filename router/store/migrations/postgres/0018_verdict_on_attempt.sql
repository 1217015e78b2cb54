-- jobrouter schema v18 (postgres): a live verdict is kept on its attempt (issue 27's cost).
--
-- An answered attempt's verdict (what the router judged of the answer: contract, failed,
-- failure, rendering_off, prompt_tokens, prompt_chars; JSON text) is written by the UPDATE
-- that ends the attempt, which runs anyway: no row of its own, one statement fewer a job.
-- verdict_at: when it was written, NULL once the leader folded it (or for an attempt without
-- one); the partial index holds only the verdicts not folded yet, the fold's whole read.
-- The golden probes' verdicts have no attempt: they keep their table, renamed for what it now
-- holds. Live verdicts not folded yet move onto their attempts (one whose attempt was purged
-- with its job has nothing left to hang on and is dropped).
ALTER TABLE attempts ADD COLUMN verdict TEXT;
ALTER TABLE attempts ADD COLUMN verdict_at DOUBLE PRECISION;
CREATE INDEX attempts_unfolded ON attempts (verdict_at) WHERE verdict_at IS NOT NULL;
UPDATE attempts SET verdict_at = v.at,
    verdict = json_build_object('contract', v.contract, 'failed', v.failed = 1,
                                'failure', v.failure, 'rendering_off', v.rendering_off = 1,
                                'prompt_tokens', v.prompt_tokens,
                                'prompt_chars', v.prompt_chars)::text
FROM live_verdicts AS v
WHERE v.source = 'live' AND v.attempt_id = attempts.id;
DELETE FROM live_verdicts WHERE source = 'live';
ALTER TABLE live_verdicts RENAME TO probe_verdicts;

-- (SQLite's 0018 also drops jobs_runnable and jobs_finished, which its planner never walks;
-- PostgreSQL's does, for the claim of runnable jobs and the retention purge: kept here.)
