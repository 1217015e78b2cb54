-- jobrouter schema v20 (postgres): the history of a pair's live watch, for the console's chart
-- (issue 27). Each fold that counts a pair's verdicts writes one point in its own transaction:
-- when, the answers it counted and how many broke the contract, the two CUSUM statistics after
-- them (jobrouter.drift.Watch, in 1/SCALE nats), the baseline they were weighed against, and
-- whether this fold suspended the pair. Bounded: the same transaction trims the pair's points
-- to the newest few (router/store/live_watch.py, POINTS_KEPT).
CREATE TABLE live_watch_points (
    id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider  TEXT NOT NULL,
    contract  TEXT NOT NULL,
    at        DOUBLE PRECISION NOT NULL,
    answered  INTEGER NOT NULL,       -- answers this fold counted
    failed    INTEGER NOT NULL,       -- of them, answers that broke the contract
    large     INTEGER NOT NULL,       -- the large-rise CUSUM after the fold
    small     INTEGER NOT NULL,       -- the small-rise CUSUM after the fold
    baseline  DOUBLE PRECISION NOT NULL,            -- the certified baseline (0 when the pair is not certified)
    suspended INTEGER NOT NULL        -- 1: this fold suspended the pair
);
CREATE INDEX live_watch_points_of_pair ON live_watch_points (provider, contract, id);
