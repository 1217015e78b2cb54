-- jobrouter schema v19 (PostgreSQL): spend you can trust (issue 29). An attempt's cost keeps
-- where its price came from (`cost_source`: 'config', a provider's configured price, or
-- 'litellm_map', litellm's cost map as shipped) and, when the cost is unknown (`cost_usd` NULL), why
-- (`cost_unknown`: no price for the model, no usage reported): an unknown cost is never 0.
-- Rows finished before keep NULL in both: their cost_usd was litellm's, its source not kept.
ALTER TABLE attempts ADD COLUMN cost_source TEXT;
ALTER TABLE attempts ADD COLUMN cost_unknown TEXT;
-- The budget ledger (router/store/spend.py): one counter row per budget and period, updated by
-- a conditional UPDATE (the row lock makes the check and the charge one step on PostgreSQL;
-- SQLite has one writer). `charged_*` is what the cap is held against: open reservations plus
-- settled actuals; `reserved_*` every reservation made in the period, `actual_*` what the
-- settled ones cost.
CREATE TABLE budget_spend (
    budget          TEXT NOT NULL,
    period_start    DOUBLE PRECISION NOT NULL,
    charged_usd     DOUBLE PRECISION NOT NULL DEFAULT 0,
    charged_tokens  BIGINT NOT NULL DEFAULT 0,
    reserved_usd    DOUBLE PRECISION NOT NULL DEFAULT 0,
    reserved_tokens BIGINT NOT NULL DEFAULT 0,
    actual_usd      DOUBLE PRECISION NOT NULL DEFAULT 0,
    actual_tokens   BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (budget, period_start)
);
-- What one attempt holds of each budget that covers it, until it is settled.
CREATE TABLE budget_holds (
    attempt_id     TEXT NOT NULL,
    budget         TEXT NOT NULL,
    period_start   DOUBLE PRECISION NOT NULL,
    usd            DOUBLE PRECISION NOT NULL,
    tokens         BIGINT NOT NULL,
    settled        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (attempt_id, budget)
);
