-- Named queries of the store. One dialect for both backends: `:name` parameters (the
-- PostgreSQL connector rewrites them to $n); times are epoch seconds; JSON travels as text.

-- name: insert_job
-- A job is born queued, at version 1, its `job.queued` event counted (event_seq 1) and written
-- by its creator in the same transaction (router/store/jobs.py); a first attempt started with
-- it moves it as every start does (start_jobs).
INSERT INTO jobs (id, owner, idempotency_key, fingerprint, task, input, params, state, version,
                  created_at, updated_at, deadline_at, next_run_at, claimed_by, claim_until, event_seq)
VALUES (:id, :owner, :idempotency_key, :fingerprint, :task, :input, :params, 'queued', 1,
        :now, :now, :deadline_at, :now, :claimed_by, :claim_until, 1)
ON CONFLICT (owner, idempotency_key) DO NOTHING
RETURNING *

-- name: get_job
SELECT * FROM jobs WHERE id = :id

-- name: settled_jobs
-- Which of the jobs :ids (a JSON array) are in one of :states (a JSON array): one read for
-- all the open waits of a process (router/store/waits.py).
SELECT * FROM jobs
WHERE id IN ({json_list(:ids)}) AND state IN ({json_list(:states)})

-- name: find_job
SELECT * FROM jobs WHERE owner = :owner AND idempotency_key = :idempotency_key

-- name: bump_event_seq
UPDATE jobs SET event_seq = event_seq + :n WHERE id = :id RETURNING event_seq, state

-- name: list_events
SELECT * FROM job_events WHERE job_id = :job_id AND seq > :after ORDER BY seq

-- name: list_attempts
SELECT * FROM attempts WHERE job_id = :job_id ORDER BY seq

-- name: get_attempt
SELECT * FROM attempts WHERE id = :id

-- name: insert_attempt
-- Every attempt started (router/store/starts.py): :rows is a JSON array of
-- {id, job_id, provider, model, worker, lease_until}, one statement however many. Each seq one
-- more than its job's last; the jobs are distinct and locked by the transaction.
INSERT INTO attempts (id, job_id, seq, provider, model, state, started_at, worker, lease_until)
SELECT json_extract(r.value, '$.id'), json_extract(r.value, '$.job_id'),
       (SELECT COALESCE(MAX(a.seq), 0) + 1 FROM attempts a
        WHERE a.job_id = json_extract(r.value, '$.job_id')),
       json_extract(r.value, '$.provider'), json_extract(r.value, '$.model'), 'started', :now,
       json_extract(r.value, '$.worker'), json_extract(r.value, '$.lease_until')
FROM json_each(:rows) AS r
RETURNING *

-- name: start_jobs
-- The one spelling of a job's move queued -> running (an attempt started): each at its version
-- (the optimistic lock of update_job_state), its event_seq counting the n events its start
-- appends: :rows is [{id, version, n}].
UPDATE jobs SET state = 'running', error = NULL, error_detail = NULL, version = jobs.version + 1,
                updated_at = :now, next_run_at = :now, event_seq = jobs.event_seq + r.n
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.version') AS version,
             json_extract(value, '$.n') AS n
      FROM json_each(:rows)) AS r
WHERE jobs.id = r.id AND jobs.version = r.version AND jobs.winner_attempt_id IS NULL
RETURNING *

-- name: insert_job_events
-- Events of one job or several (transitions.insert_events_of_jobs), numbered by their
-- writer: :rows is [{job_id, seq, kind, job_state, data}] (data: the event's JSON text).
INSERT INTO job_events (job_id, seq, kind, job_state, data, at)
SELECT json_extract(value, '$.job_id'), json_extract(value, '$.seq'),
       json_extract(value, '$.kind'), json_extract(value, '$.job_state'),
       json_extract(value, '$.data'), :at
FROM json_each(:rows)

-- name: update_job_state
-- The optimistic lock of DESIGN.md: zero rows means someone else changed the job first.
-- `:events`: the events the move appends are numbered here (event_seq as bump_event_seq
-- would move it), one statement fewer than a separate bump.
UPDATE jobs SET state = :state, error = :error, error_detail = :error_detail,
                version = version + 1, updated_at = :now, next_run_at = :next_run_at,
                event_seq = event_seq + :events
WHERE id = :id AND version = :version AND winner_attempt_id IS NULL
RETURNING *

-- name: finish_job_cas
-- `:events` numbered here, as in update_job_state. A succeeded job carries no error: what an
-- earlier attempt or an `unknown` left there (a job resolved succeeded) no longer holds.
UPDATE jobs SET state = 'succeeded', result = :result, winner_attempt_id = :attempt_id,
                error = NULL, error_detail = NULL,
                version = version + 1, updated_at = :now, claimed_by = NULL, claim_until = NULL,
                event_seq = event_seq + :events
WHERE id = :id AND version = :version AND winner_attempt_id IS NULL
RETURNING *

-- name: finish_attempt
-- :verdict, :verdict_at: an answer's live verdict (router/store/live_watch.py), kept with the
-- end that judged it; an end without one (a resolution, a sweep) leaves any earlier one as is.
-- `held`: whether the attempt still holds a budget reservation, so the end settles it with no
-- statement of its own when it holds none (router/store/spend.py, settle_in).
UPDATE attempts SET state = :state, error_kind = :error_kind, error = :error,
                    error_detail = :error_detail, output = :output,
                    finished_at = :now, latency_ms = :latency_ms, model = COALESCE(:model, model),
                    prompt_tokens = :prompt_tokens, completion_tokens = :completion_tokens,
                    cost_usd = :cost_usd, cost_source = :cost_source,
                    cost_unknown = :cost_unknown, lease_until = NULL,
                    verdict = COALESCE(:verdict, verdict),
                    verdict_at = COALESCE(:verdict_at, verdict_at)
WHERE id = :id AND state = :from_state
RETURNING *, EXISTS (SELECT 1 FROM budget_holds h
                     WHERE h.attempt_id = attempts.id AND h.settled = 0) AS held

-- name: keep_late_verdict
-- An answer that arrived after its attempt was swept to `unknown` (an exclusive task's unusable
-- answer keeps it unknown, so its end is not written again): its verdict only, once.
UPDATE attempts SET verdict = :verdict, verdict_at = :verdict_at
WHERE id = :id AND verdict IS NULL

-- name: record_resolution
-- Who resolved an `unknown` attempt, and what they checked: in the resolution's transaction.
UPDATE attempts SET resolved_by = :by, resolution_note = :note WHERE id = :id
RETURNING *

-- name: open_attempts_of_job
SELECT * FROM attempts WHERE job_id = :job_id AND state IN ('started', 'unknown') ORDER BY seq

-- name: claim_job
UPDATE jobs SET claimed_by = :worker, claim_until = :claim_until
WHERE id = :id AND (claimed_by IS NULL OR claim_until < :now OR claimed_by = :worker)
RETURNING *

-- name: claim_runnable
-- A worker takes up to :limit due jobs nobody holds (or whose holder stopped renewing).
UPDATE jobs SET claimed_by = :worker, claim_until = :claim_until
WHERE id IN (SELECT id FROM jobs
             WHERE state IN ('queued', 'running') AND next_run_at <= :now
               AND (claimed_by IS NULL OR claim_until < :now)
             ORDER BY next_run_at
             LIMIT :limit)
RETURNING *

-- name: release_claim
UPDATE jobs SET claimed_by = NULL, claim_until = NULL, next_run_at = :next_run_at
WHERE id = :id AND claimed_by = :worker

-- name: renew_claims
-- Only the jobs the worker has in hand (:ids): a job it claimed but lost (a submit cancelled
-- mid-commit, a driver that crashed) lets its claim expire, so a poller picks it up again.
UPDATE jobs SET claim_until = :claim_until
WHERE claimed_by = :worker AND state IN ('queued', 'running')
  AND id IN ({json_list(:ids)})

-- name: renew_attempt_leases
-- Likewise only attempts of jobs in hand: an attempt nobody is calling expires to unknown (I7).
UPDATE attempts SET lease_until = :lease_until
WHERE worker = :worker AND state = 'started' AND job_id IN ({json_list(:ids)})

-- name: expired_attempts
SELECT * FROM attempts WHERE state = 'started' AND lease_until < :now ORDER BY lease_until LIMIT :limit

-- name: insert_outbox
INSERT INTO outbox (id, job_id, owner, kind, payload, created_at, next_attempt_at)
VALUES (:id, :job_id, :owner, :kind, :payload, :now, :now)

-- name: upsert_certification
INSERT INTO certifications (provider, contract, provider_fingerprint, contract_fingerprint,
                            passed, record, certified_at, expires_at)
VALUES (:provider, :contract, :provider_fingerprint, :contract_fingerprint, :passed, :record,
        :certified_at, :expires_at)
ON CONFLICT (provider, contract) DO UPDATE SET
    provider_fingerprint = excluded.provider_fingerprint,
    contract_fingerprint = excluded.contract_fingerprint,
    passed = excluded.passed, record = excluded.record,
    certified_at = excluded.certified_at, expires_at = excluded.expires_at

-- name: list_certifications
SELECT * FROM certifications ORDER BY contract, provider

-- name: lock_job
-- SQLite's BEGIN IMMEDIATE already holds the write lock; PostgreSQL overrides with FOR UPDATE.
SELECT * FROM jobs WHERE id = :id

-- name: lock_job_of_attempt
SELECT * FROM jobs WHERE id = (SELECT job_id FROM attempts WHERE id = :attempt_id)

-- name: clear_claim
UPDATE jobs SET claimed_by = NULL, claim_until = NULL, next_run_at = :next_run_at WHERE id = :id

-- name: list_circuits
SELECT * FROM circuits

-- name: circuit_failure
INSERT INTO circuits (provider, state, failures, opened_at, probe_until, updated_at)
VALUES (:provider, CASE WHEN 1 >= :threshold THEN 'open' ELSE 'closed' END, 1,
        -- the cast: PostgreSQL would type a parameter seen only inside CASE ... ELSE NULL as text
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

-- name: circuit_success
UPDATE circuits SET state = 'closed', failures = 0, opened_at = NULL, probe_until = NULL,
                    updated_at = :now
WHERE provider = :provider
RETURNING *

-- name: claim_probe
-- Exactly one process gets the probe: the UPDATE's WHERE is re-checked under the row lock.
UPDATE circuits SET state = 'half_open', probe_until = :now + :probe_s, updated_at = :now
WHERE provider = :provider
  AND ((state = 'open' AND opened_at + :cooldown_s <= :now)
       OR (state = 'half_open' AND probe_until < :now))
RETURNING *

-- name: insert_token
INSERT INTO api_tokens (id, token_hash, owner, operator, created_at, expires_at)
VALUES (:id, :token_hash, :owner, :operator, :now, :expires_at)

-- name: find_token
-- Revoked and expired ones too: the 401 says which (the caller holds the token, so this tells
-- nobody anything new).
SELECT * FROM api_tokens WHERE token_hash = :token_hash

-- name: get_token
-- By id: an open event stream asks every heartbeat whether its token still holds.
SELECT * FROM api_tokens WHERE id = :id

-- name: list_tokens
SELECT id, owner, operator, created_at, revoked_at, expires_at FROM api_tokens
ORDER BY created_at, id

-- name: prove_write
-- /health/ready: one real row write, committed, proves the database takes writes.
INSERT INTO readiness (id, checked_at) VALUES (1, :now)
ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at

-- name: revoke_token
UPDATE api_tokens SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL

-- name: applied_migrations
SELECT version FROM schema_migrations ORDER BY version

-- name: count_open_jobs
-- Queue depth for /metrics: queued and running jobs by state (jobs_by_state on SQLite, the
-- jobs_runnable partial index on PostgreSQL).
SELECT state, COUNT(*) AS n FROM jobs WHERE state IN ('queued', 'running') GROUP BY state

-- ---- outbox delivery and dead letters (router/store/outbox.py) -------------------------------
-- Lists travel as one JSON-array text parameter (:owners, :ids): `{json_list(:owners)}` is
-- written out per dialect by the query loader (connector.in_dialect; json_each on SQLite,
-- json_array_elements_text on PostgreSQL), so the same statement serves both backends.

-- name: claim_outbox
-- Due, undelivered events of the owners with a webhook, claimed for :worker until :claim_until;
-- an expired claim (its process died mid-send) is taken over. SQLite's write lock makes the
-- select-and-update one step; PostgreSQL overrides with FOR UPDATE SKIP LOCKED.
UPDATE outbox SET claimed_by = :worker, claim_until = :claim_until
WHERE id IN (
    SELECT id FROM outbox
    WHERE delivered_at IS NULL AND next_attempt_at <= :now
      AND (claim_until IS NULL OR claim_until < :now)
      AND owner IN ({json_list(:owners)})
    ORDER BY next_attempt_at
    LIMIT :limit)
RETURNING *

-- name: outbox_delivered
-- Whoever holds the claim now: the receiver has the event, which is all that counts.
UPDATE outbox SET delivered_at = :now, tries = tries + 1, last_error = NULL, claimed_by = NULL,
                  claim_until = NULL
WHERE id = :id AND delivered_at IS NULL

-- name: outbox_retry
UPDATE outbox SET tries = tries + 1, last_error = :error, next_attempt_at = :next_attempt_at,
                  claimed_by = NULL, claim_until = NULL
WHERE id = :id AND claimed_by = :worker AND delivered_at IS NULL

-- name: take_claimed_outbox
DELETE FROM outbox WHERE id = :id AND claimed_by = :worker AND delivered_at IS NULL RETURNING *

-- name: release_outbox_claims
UPDATE outbox SET claimed_by = NULL, claim_until = NULL
WHERE claimed_by = :worker AND delivered_at IS NULL

-- name: insert_dead
INSERT INTO outbox_dead (id, job_id, owner, kind, payload, created_at, tries, last_error, dead_at)
VALUES (:id, :job_id, :owner, :kind, :payload, :created_at, :tries, :last_error, :now)

-- name: take_dead
DELETE FROM outbox_dead WHERE id = :id RETURNING *

-- name: take_dead_batch
DELETE FROM outbox_dead
WHERE id IN (SELECT id FROM outbox_dead ORDER BY dead_at LIMIT :limit)
RETURNING *

-- name: insert_replayed
-- A replayed dead letter is a pending event again, due now, with a fresh try count.
INSERT INTO outbox (id, job_id, owner, kind, payload, created_at, next_attempt_at, tries,
                    last_error)
VALUES (:id, :job_id, :owner, :kind, :payload, :created_at, :now, 0, :last_error)

-- name: get_outbox_event
SELECT * FROM outbox WHERE id = :id

-- name: outbox_pending_by_owner
SELECT owner, COUNT(*) AS pending, SUM(CASE WHEN tries > 0 THEN 1 ELSE 0 END) AS retrying,
       MIN(created_at) AS oldest, MIN(next_attempt_at) AS next_attempt_at
FROM outbox WHERE delivered_at IS NULL
GROUP BY owner ORDER BY owner

-- name: outbox_dead_by_owner
SELECT owner, COUNT(*) AS dead FROM outbox_dead GROUP BY owner ORDER BY owner

-- name: list_dead
SELECT * FROM outbox_dead ORDER BY dead_at DESC, id LIMIT :limit

-- ---- retention (router/store/outbox.py, `jobrouter purge`) ----------------------------------
-- The state list is JobState's terminal set (states.py; a unit test holds them equal), spelled
-- out so PostgreSQL's jobs_finished partial index applies (SQLite walks jobs_by_state). A
-- terminal job older than :cutoff is kept while its completion event may still be owed: an
-- undelivered row of an owner in :owners (the owners with a `[webhooks.<owner>]` section, a
-- JSON-array text), an undelivered row that has
-- been tried or is claimed (whatever the configuration says now: a webhook removed from it does
-- not make a tried event droppable), a dead letter, or (unless :drop_parked = 1, the explicit
-- `--drop-parked`) any undelivered row. Otherwise it is purgeable, and its outbox row goes with
-- it: delivered, or parked (never tried, of an owner without a webhook).

-- name: count_purgeable
-- n: purgeable jobs; parked: of those, how many have a parked event that goes with them.
SELECT COUNT(*) AS n,
       COALESCE(SUM(CASE WHEN EXISTS (SELECT 1 FROM outbox p
                                      WHERE p.job_id = j.id AND p.delivered_at IS NULL)
                         THEN 1 ELSE 0 END), 0) AS parked
FROM jobs j
WHERE j.state IN ('succeeded', 'failed', 'cancelled') AND j.updated_at < :cutoff
  AND NOT EXISTS (SELECT 1 FROM outbox o
                  WHERE o.job_id = j.id AND o.delivered_at IS NULL
                    AND (o.owner IN ({json_list(:owners)})
                         OR o.tries > 0 OR o.claimed_by IS NOT NULL OR :drop_parked = 0))
  AND NOT EXISTS (SELECT 1 FROM outbox_dead d WHERE d.job_id = j.id)

-- name: count_kept_undelivered
SELECT COUNT(*) AS n FROM jobs j
WHERE j.state IN ('succeeded', 'failed', 'cancelled') AND j.updated_at < :cutoff
  AND (EXISTS (SELECT 1 FROM outbox o
               WHERE o.job_id = j.id AND o.delivered_at IS NULL
                 AND (o.owner IN ({json_list(:owners)})
                         OR o.tries > 0 OR o.claimed_by IS NOT NULL OR :drop_parked = 0))
       OR EXISTS (SELECT 1 FROM outbox_dead d WHERE d.job_id = j.id))

-- name: purge_jobs
-- Attempts and events go with their job (ON DELETE CASCADE); the outbox row by purge_outbox.
DELETE FROM jobs WHERE id IN (
    SELECT j.id FROM jobs j
    WHERE j.state IN ('succeeded', 'failed', 'cancelled') AND j.updated_at < :cutoff
      AND NOT EXISTS (SELECT 1 FROM outbox o
                      WHERE o.job_id = j.id AND o.delivered_at IS NULL
                        AND (o.owner IN ({json_list(:owners)})
                         OR o.tries > 0 OR o.claimed_by IS NOT NULL OR :drop_parked = 0))
      AND NOT EXISTS (SELECT 1 FROM outbox_dead d WHERE d.job_id = j.id)
    ORDER BY j.updated_at
    LIMIT :limit)
RETURNING id

-- name: purge_outbox
-- Every outbox row of the purged jobs, delivered or parked (delivered_at NULL: a parked one).
DELETE FROM outbox WHERE job_id IN ({json_list(:ids)}) RETURNING delivered_at

-- Listing (router/listing.py): `{where}` is filled with the `list_jobs_*` fragments of the
-- filters in use, so each combination is its own statement with its own plan; newest first,
-- keyset pages on the time-ordered id (jobs_by_owner, jobs_by_state, jobs_by_task,
-- jobs_by_owner_task or the primary key).

-- name: list_jobs
SELECT * FROM jobs WHERE 1 = 1 {where} ORDER BY id DESC LIMIT :limit

-- name: count_jobs_by_state
SELECT state, COUNT(*) AS n FROM jobs WHERE 1 = 1 {where} GROUP BY state

-- name: list_jobs_cursor
AND id < :cursor

-- name: list_jobs_owner
AND owner = :owner

-- name: list_jobs_state
AND state = :state

-- name: list_jobs_states
AND state IN ({json_list(:states)})

-- name: list_jobs_task
AND task = :task

-- name: list_jobs_key
-- With an owner, the unique (owner, idempotency_key) index finds the one job; without (an
-- operator's search over every owner) no index leads with the key: the jobs are walked.
AND idempotency_key = :idempotency_key

-- name: list_jobs_provider
-- A provider with few attempts (router/store/listing.py decides): its job ids come from
-- attempts_by_provider (migration 0010), in id order; no walk of every job.
AND id IN (SELECT a.job_id FROM attempts a WHERE a.provider = :provider)

-- name: list_jobs_provider_common
-- A provider with many attempts: walk the jobs newest first and check each one's attempts (a
-- page finds its jobs at once; the id list above would be read whole for every page).
AND EXISTS (SELECT 1 FROM attempts a WHERE a.job_id = jobs.id AND a.provider = :provider)

-- name: provider_attempts_upto
-- Whether a provider is rare: its attempts counted down attempts_by_provider, up to :upto.
SELECT COUNT(*) AS n FROM (SELECT 1 FROM attempts WHERE provider = :provider LIMIT :upto) AS x

-- name: list_jobs_after
AND id >= :id_floor AND created_at >= :created_after

-- name: list_jobs_before
AND id < :id_ceiling AND created_at < :created_before

-- name: insert_probe_verdict
-- A golden probe's verdict (router/probes.py): it has no attempt to carry it.
INSERT INTO probe_verdicts (attempt_id, provider, contract, source, failed, failure,
                            rendering_off, prompt_tokens, prompt_chars, at)
VALUES (:attempt_id, :provider, :contract, 'probe', :failed, :failure, NULL, NULL, NULL, :now)

-- name: pending_attempt_verdicts
-- The live verdicts not folded yet, oldest first: the partial index attempts_unfolded, in
-- its order (a tie of two times folds in either order).
SELECT id, provider, verdict, verdict_at FROM attempts WHERE verdict_at IS NOT NULL
ORDER BY verdict_at LIMIT :limit

-- name: pending_probe_verdicts
SELECT * FROM probe_verdicts ORDER BY id LIMIT :limit

-- name: consume_attempt_verdicts
-- Folded: off the partial index (the verdict stays on its attempt). The count tells the fold
-- whether another took them first.
UPDATE attempts SET verdict_at = NULL
WHERE id IN ({json_list(:ids)}) AND verdict_at IS NOT NULL

-- name: consume_probe_verdicts
-- The ids as text: one spelling for both dialects' JSON lists (the table holds few rows).
DELETE FROM probe_verdicts WHERE CAST(id AS TEXT) IN ({json_list(:ids)})

-- name: list_live_watch
SELECT * FROM live_watch ORDER BY contract, provider

-- name: lock_live_watch
-- The fold's read, in its transaction (SQLite's BEGIN IMMEDIATE holds the write lock already).
SELECT * FROM live_watch ORDER BY contract, provider

-- name: upsert_live_watch
INSERT INTO live_watch (provider, contract, state, answered, failed, rendering_checked,
                        rendering_off, recent_failures, suspended_at, suspension, reinstated_at,
                        reinstated_by, reinstate_reason, updated_at)
VALUES (:provider, :contract, :state, :answered, :failed, :rendering_checked, :rendering_off,
        :recent_failures, :suspended_at, :suspension, :reinstated_at, :reinstated_by,
        :reinstate_reason, :now)
ON CONFLICT (provider, contract) DO UPDATE SET
    state = excluded.state, answered = excluded.answered, failed = excluded.failed,
    rendering_checked = excluded.rendering_checked, rendering_off = excluded.rendering_off,
    recent_failures = excluded.recent_failures, suspended_at = excluded.suspended_at,
    suspension = excluded.suspension, reinstated_at = excluded.reinstated_at,
    reinstated_by = excluded.reinstated_by, reinstate_reason = excluded.reinstate_reason,
    updated_at = excluded.updated_at

-- name: insert_live_watch_point
INSERT INTO live_watch_points (provider, contract, at, answered, failed, large, small, baseline,
                               suspended)
VALUES (:provider, :contract, :at, :answered, :failed, :large, :small, :baseline, :suspended)

-- name: trim_live_watch_points
-- The pair's newest :keep points stay; the (:keep + 1)th newest and every older one go.
DELETE FROM live_watch_points
WHERE provider = :provider AND contract = :contract AND id <= (
    SELECT id FROM live_watch_points WHERE provider = :provider AND contract = :contract
    ORDER BY id DESC LIMIT 1 OFFSET :keep)

-- name: list_live_watch_points
SELECT * FROM live_watch_points ORDER BY contract, provider, id

-- name: delete_live_watch
DELETE FROM live_watch WHERE provider = :provider AND contract = :contract

-- name: delete_live_watch_points
-- A fresh watch (a new certification, a reinstatement) draws a fresh chart: the points kept
-- were drawn by the watch before it, against what was certified or counted then.
DELETE FROM live_watch_points WHERE provider = :provider AND contract = :contract

-- name: drop_attempt_verdicts_of_pair
-- Before a fresh watch (a new certification, a reinstatement): answers not folded yet speak of
-- what came before, and are not folded at all. A fold that counted them meanwhile finds them
-- gone and writes nothing; on PostgreSQL this UPDATE waits for a fold in flight (its rows
-- locked), and the watch's DELETE after it sees the fold's row.
-- `provider || ''` keeps the planner off attempts_by_provider (every attempt the provider ever
-- made), where a planner without statistics (SQLite's always, PostgreSQL's on a young table)
-- would go, for the few unfolded rows of attempts_unfolded.
UPDATE attempts SET verdict_at = NULL
WHERE verdict_at IS NOT NULL AND provider || '' = :provider
  AND json_extract(verdict, '$.contract') = :contract

-- name: delete_probe_verdicts_of_pair
DELETE FROM probe_verdicts WHERE provider = :provider AND contract = :contract

-- name: schedule_probe
-- A provider seen with something to probe for the first time: its first probe is due one interval
-- on, not at once (a fleet that starts, or a leader elected, does not probe at its election).
INSERT INTO probe_schedule (provider, next_at, turn)
VALUES (:provider, CAST(:now AS DOUBLE PRECISION) + CAST(:interval AS DOUBLE PRECISION), 0)
ON CONFLICT (provider) DO NOTHING

-- name: claim_probe_turn
-- The cap's one decision: the probe is this leader's only if it moves next_at on from a time
-- already past; a second leader (or a second round) finds it moved and sends nothing.
UPDATE probe_schedule
SET next_at = CAST(:now AS DOUBLE PRECISION) + CAST(:interval AS DOUBLE PRECISION), turn = turn + 1
WHERE provider = :provider AND next_at <= :now
RETURNING turn - 1 AS turn

-- name: list_suspensions
SELECT provider, contract, suspended_at, suspension FROM live_watch
WHERE suspended_at IS NOT NULL ORDER BY contract, provider

-- name: reinstate_watch
-- An operator's word against the rule's: a fresh watch, the counts from now, who and why kept.
UPDATE live_watch SET suspended_at = NULL, suspension = NULL, state = '', answered = 0,
    failed = 0, rendering_checked = 0, rendering_off = 0, recent_failures = '[]',
    reinstated_at = :now, reinstated_by = :by, reinstate_reason = :reason, updated_at = :now
WHERE provider = :provider AND contract = :contract AND suspended_at IS NOT NULL

-- ---- the budget ledger (router/store/spend.py) -------------------------------------------------

-- name: open_budget_period
INSERT INTO budget_spend (budget, period_start) VALUES (:budget, :period_start)
ON CONFLICT (budget, period_start) DO NOTHING

-- name: charge_budget
-- The check and the charge in one statement: no row when the charge would cross a cap (caps
-- are never NULL: an uncapped side passes +infinity). On PostgreSQL a concurrent charge waits
-- on the row lock and the WHERE is evaluated again on the row it committed.
UPDATE budget_spend
SET charged_usd = charged_usd + :usd, charged_tokens = charged_tokens + :tokens,
    reserved_usd = reserved_usd + :usd, reserved_tokens = reserved_tokens + :tokens
WHERE budget = :budget AND period_start = :period_start
  AND charged_usd + :usd <= :usd_cap AND charged_tokens + :tokens <= :token_cap
RETURNING charged_usd, charged_tokens

-- name: charge_budget_window
-- A rolling budget's check and charge in one statement: the charge goes into the bucket row
-- of now (`period_start`), and is refused when the sum of the buckets from the window's first
-- (`window_from`) on would cross a cap. On: a bucket ahead of this moment (a router whose
-- clock runs ahead charged it) counts too, so every window holds the cap whatever order the
-- charges came in. Run only while holding the budget's anchor row (`lock_budget_period` at
-- period_start -1, spend.ANCHOR): every charge of the budget takes it first, so this
-- statement's snapshot, taken after that lock, sees every charge committed before it,
-- whichever bucket it went to.
UPDATE budget_spend
SET charged_usd = charged_usd + :usd, charged_tokens = charged_tokens + :tokens,
    reserved_usd = reserved_usd + :usd, reserved_tokens = reserved_tokens + :tokens
WHERE budget = :budget AND period_start = :period_start
  AND (SELECT SUM(w.charged_usd) FROM budget_spend w
       WHERE w.budget = :budget AND w.period_start >= :window_from) + :usd <= :usd_cap
  AND (SELECT CAST(SUM(w.charged_tokens) AS BIGINT) FROM budget_spend w
       WHERE w.budget = :budget AND w.period_start >= :window_from) + :tokens <= :token_cap
RETURNING charged_usd, charged_tokens

-- name: budget_window_charged
-- What a rolling budget has charged from its window's first bucket on, as its check counts it.
SELECT COALESCE(SUM(charged_usd), 0) AS charged_usd,
       CAST(COALESCE(SUM(charged_tokens), 0) AS BIGINT) AS charged_tokens
FROM budget_spend
WHERE budget = :budget AND period_start >= :window_from

-- name: lock_budget_period
-- Takes the counter row's lock and changes nothing: a claim starting several jobs locks every
-- budget row it will charge in name order first (router/store/starts.py).
UPDATE budget_spend SET charged_usd = charged_usd
WHERE budget = :budget AND period_start = :period_start

-- name: budget_charged
SELECT charged_usd, charged_tokens FROM budget_spend
WHERE budget = :budget AND period_start = :period_start

-- name: uncharge_budget
-- Takes back a charge this transaction made (another budget of the same reservation refused).
UPDATE budget_spend
SET charged_usd = charged_usd - :usd, charged_tokens = charged_tokens - :tokens,
    reserved_usd = reserved_usd - :usd, reserved_tokens = reserved_tokens - :tokens
WHERE budget = :budget AND period_start = :period_start

-- name: insert_budget_hold
INSERT INTO budget_holds (attempt_id, budget, period_start, usd, tokens)
VALUES (:attempt_id, :budget, :period_start, :usd, :tokens)

-- name: open_holds_of_attempt
SELECT * FROM budget_holds WHERE attempt_id = :attempt_id AND settled = 0 ORDER BY budget

-- name: settle_budget
-- A reservation becomes the actual cost: the charge moves from the reservation to the actual.
UPDATE budget_spend
SET charged_usd = charged_usd - :reserved_usd + :usd,
    charged_tokens = charged_tokens - :reserved_tokens + :tokens,
    actual_usd = actual_usd + :usd, actual_tokens = actual_tokens + :tokens
WHERE budget = :budget AND period_start = :period_start

-- name: settle_hold
UPDATE budget_holds SET settled = 1 WHERE attempt_id = :attempt_id AND budget = :budget

-- name: budget_periods
-- A rolling budget's anchor row (period_start -1: the lock its charges take) holds no spend.
SELECT * FROM budget_spend WHERE period_start >= 0 ORDER BY budget, period_start

-- Spend report (router/store/spend_reads.py): the attempts started in [:since, :until),
-- summed per owner, task, provider and UTC day (days since the epoch: CAST truncates, and
-- started_at > 0), through attempts_by_started (migration 0022); only :owner's jobs unless
-- it is NULL (the range drives the plan: the owner only filters what it found). `cost_usd`
-- sums the known costs only (SUM skips NULL: NULL when none is known, never 0 for unknown);
-- `cost_unknown` counts the attempts whose cost is unknown.

-- name: spend_by_day
SELECT j.owner AS owner, j.task AS task, a.provider AS provider,
       CAST(a.started_at / 86400 AS INTEGER) AS day,
       COUNT(*) AS attempts,
       SUM(a.cost_usd) AS cost_usd,
       CAST(SUM(COALESCE(a.prompt_tokens, 0) + COALESCE(a.completion_tokens, 0)) AS BIGINT)
           AS tokens,
       SUM(CASE WHEN a.cost_unknown IS NOT NULL THEN 1 ELSE 0 END) AS cost_unknown
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE a.started_at >= :since AND a.started_at < :until
  AND (CAST(:owner AS TEXT) IS NULL OR j.owner = :owner)
GROUP BY j.owner, j.task, a.provider, CAST(a.started_at / 86400 AS INTEGER)
