-- jobrouter schema v17 (postgres): every answered attempt is evidence (issue 27).
--
-- live_verdicts: one row per answered attempt of a task with a contract, written in the
-- transaction that ends the attempt (what the router judged of the answer: JSON, schema,
-- checks; the prompt count when it could be compared), or one per golden probe the leader
-- made (its answer against the case's expectations). The leader folds them, oldest first,
-- into live_watch and deletes them in the same transaction: each verdict counts once.
-- live_watch: per provider x contract, the sequential rule's state, the counts since the last
-- certification or reinstatement, and a suspension with its evidence. A new certification of
-- the pair deletes its row (a fresh watch); `jobrouter contracts reinstate` clears the
-- suspension and keeps who and why.
CREATE TABLE live_verdicts (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    attempt_id    TEXT NOT NULL,
    provider      TEXT NOT NULL,
    contract      TEXT NOT NULL,
    source        TEXT NOT NULL,         -- live (a job of an owner) or probe (a golden case)
    failed        INTEGER NOT NULL,      -- 1: the answer broke the contract
    failure       TEXT,                  -- which check, and how, when it did
    rendering_off INTEGER,               -- 1 out of tolerance, 0 within, NULL not compared
    prompt_tokens INTEGER,               -- what the provider reported it read
    prompt_chars  INTEGER,               -- what was sent: the messages' characters
    at            DOUBLE PRECISION NOT NULL
);

CREATE TABLE live_watch (
    provider          TEXT NOT NULL,
    contract          TEXT NOT NULL,
    state             TEXT NOT NULL,     -- the rule's state (jobrouter.drift.Watch, JSON)
    answered          INTEGER NOT NULL,
    failed            INTEGER NOT NULL,
    rendering_checked INTEGER NOT NULL,
    rendering_off     INTEGER NOT NULL,
    recent_failures   TEXT NOT NULL,     -- JSON: the last failed attempts (id, failure)
    suspended_at      DOUBLE PRECISION,
    suspension        TEXT,              -- JSON: the rule that fired, counts, sample attempts
    reinstated_at     DOUBLE PRECISION,
    reinstated_by     TEXT,
    reinstate_reason  TEXT,
    updated_at        DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (provider, contract)
);
