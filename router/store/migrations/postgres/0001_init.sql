-- jobrouter schema v1 (PostgreSQL): the SQLite schema in PostgreSQL types. Times are UTC epoch
-- seconds (DOUBLE PRECISION) and JSON is TEXT, exactly as in SQLite, so `rows.py` reads both.
CREATE TABLE jobs (
    id                TEXT PRIMARY KEY,
    owner             TEXT NOT NULL,
    idempotency_key   TEXT NOT NULL,
    fingerprint       TEXT NOT NULL,
    task              TEXT NOT NULL,
    input             TEXT NOT NULL,
    params            TEXT NOT NULL,
    state             TEXT NOT NULL,
    version           INTEGER NOT NULL DEFAULT 1,
    winner_attempt_id TEXT,
    result            TEXT,
    error             TEXT,
    created_at        DOUBLE PRECISION NOT NULL,
    updated_at        DOUBLE PRECISION NOT NULL,
    deadline_at       DOUBLE PRECISION,
    next_run_at       DOUBLE PRECISION NOT NULL,
    claimed_by        TEXT,
    claim_until       DOUBLE PRECISION,
    event_seq         INTEGER NOT NULL DEFAULT 0,
    UNIQUE (owner, idempotency_key)
);
CREATE INDEX jobs_runnable ON jobs (next_run_at) WHERE state IN ('queued', 'running');
CREATE INDEX jobs_finished ON jobs (updated_at) WHERE state IN ('succeeded', 'failed', 'cancelled');

CREATE TABLE attempts (
    id                TEXT PRIMARY KEY,
    job_id            TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq               INTEGER NOT NULL,
    provider          TEXT NOT NULL,
    model             TEXT,
    state             TEXT NOT NULL,
    error_kind        TEXT,
    error             TEXT,
    output            TEXT,
    started_at        DOUBLE PRECISION NOT NULL,
    finished_at       DOUBLE PRECISION,
    latency_ms        DOUBLE PRECISION,
    prompt_tokens     BIGINT,
    completion_tokens BIGINT,
    cost_usd          DOUBLE PRECISION,
    worker            TEXT,
    lease_until       DOUBLE PRECISION,
    UNIQUE (job_id, seq)
);
CREATE INDEX attempts_leased ON attempts (lease_until) WHERE state = 'started';
-- Renewing leases looks attempts up by worker; SQLite scans, PostgreSQL should not have to.
CREATE INDEX attempts_worker ON attempts (worker) WHERE state = 'started';
CREATE INDEX jobs_claimed_by ON jobs (claimed_by) WHERE claimed_by IS NOT NULL;

CREATE TABLE job_events (
    job_id    TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    job_state TEXT NOT NULL,
    data      TEXT NOT NULL,
    at        DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (job_id, seq)
);

-- I8: one completion event per job, written in the transaction of the terminal change.
CREATE TABLE outbox (
    id              TEXT PRIMARY KEY,
    job_id          TEXT NOT NULL UNIQUE,
    owner           TEXT NOT NULL,
    kind            TEXT NOT NULL,
    payload         TEXT NOT NULL,
    created_at      DOUBLE PRECISION NOT NULL,
    next_attempt_at DOUBLE PRECISION NOT NULL,
    tries           INTEGER NOT NULL DEFAULT 0,
    delivered_at    DOUBLE PRECISION,
    last_error      TEXT
);
CREATE INDEX outbox_pending ON outbox (next_attempt_at) WHERE delivered_at IS NULL;

CREATE TABLE certifications (
    provider             TEXT NOT NULL,
    contract             TEXT NOT NULL,
    provider_fingerprint TEXT NOT NULL,
    contract_fingerprint TEXT NOT NULL,
    passed               INTEGER NOT NULL,
    record               TEXT NOT NULL,
    certified_at         DOUBLE PRECISION NOT NULL,
    expires_at           DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (provider, contract)
);

CREATE TABLE circuits (
    provider    TEXT PRIMARY KEY,
    state       TEXT NOT NULL,
    failures    INTEGER NOT NULL DEFAULT 0,
    opened_at   DOUBLE PRECISION,
    probe_until DOUBLE PRECISION,
    updated_at  DOUBLE PRECISION NOT NULL
);

-- Wake-ups across processes (delivered at commit; identical payloads of one transaction are
-- folded into one by PostgreSQL): every appended event names its job on `jobrouter_events`,
-- and a job that becomes free for any worker (inserted unclaimed, or its claim released while
-- it still has work) is announced on `jobrouter_jobs`.
CREATE FUNCTION jobrouter_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('jobrouter_events', NEW.job_id);
    RETURN NULL;
END;
$$;
CREATE TRIGGER job_events_notify AFTER INSERT ON job_events
    FOR EACH ROW EXECUTE FUNCTION jobrouter_notify_event();

CREATE FUNCTION jobrouter_notify_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('jobrouter_jobs', NEW.id);
    RETURN NULL;
END;
$$;
CREATE TRIGGER jobs_notify_inserted AFTER INSERT ON jobs
    FOR EACH ROW WHEN (NEW.claimed_by IS NULL)
    EXECUTE FUNCTION jobrouter_notify_job();
CREATE TRIGGER jobs_notify_released AFTER UPDATE OF claimed_by ON jobs
    FOR EACH ROW WHEN (NEW.claimed_by IS NULL AND OLD.claimed_by IS NOT NULL
                       AND NEW.state IN ('queued', 'running'))
    EXECUTE FUNCTION jobrouter_notify_job();
