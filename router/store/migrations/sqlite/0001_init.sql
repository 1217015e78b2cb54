-- jobrouter schema v1 (SQLite). Times are UTC epoch seconds (REAL); JSON is TEXT.
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
    created_at        REAL NOT NULL,
    updated_at        REAL NOT NULL,
    deadline_at       REAL,
    next_run_at       REAL NOT NULL,
    claimed_by        TEXT,
    claim_until       REAL,
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
    started_at        REAL NOT NULL,
    finished_at       REAL,
    latency_ms        REAL,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    cost_usd          REAL,
    worker            TEXT,
    lease_until       REAL,
    UNIQUE (job_id, seq)
);
CREATE INDEX attempts_leased ON attempts (lease_until) WHERE state = 'started';

CREATE TABLE job_events (
    job_id    TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    job_state TEXT NOT NULL,
    data      TEXT NOT NULL,
    at        REAL NOT NULL,
    PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;

-- I8: one completion event per job, written in the transaction of the terminal change.
CREATE TABLE outbox (
    id              TEXT PRIMARY KEY,
    job_id          TEXT NOT NULL UNIQUE,
    owner           TEXT NOT NULL,
    kind            TEXT NOT NULL,
    payload         TEXT NOT NULL,
    created_at      REAL NOT NULL,
    next_attempt_at REAL NOT NULL,
    tries           INTEGER NOT NULL DEFAULT 0,
    delivered_at    REAL,
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
    certified_at         REAL NOT NULL,
    expires_at           REAL NOT NULL,
    PRIMARY KEY (provider, contract)
);

CREATE TABLE circuits (
    provider    TEXT PRIMARY KEY,
    state       TEXT NOT NULL,
    failures    INTEGER NOT NULL DEFAULT 0,
    opened_at   REAL,
    probe_until REAL,
    updated_at  REAL NOT NULL
);
