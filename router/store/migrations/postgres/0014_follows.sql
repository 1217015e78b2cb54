-- jobrouter schema v14 (PostgreSQL): who follows which notifications, in a table of its own.
--
-- The notifying triggers of v9 ask `jobrouter_followed(kind)` before each pg_notify, once per
-- inserted event and per job that becomes runnable or settles. It read pg_stat_activity:
-- every call builds a row for every backend of the server (pg_stat_get_activity), and it was
-- most of the server's work per job: measured on the benchmark's PostgreSQL run with one worker
-- process at concurrency 64, 3.8 ms of the server's CPU per job with it, 1.0 ms with the
-- function answering a constant (docs/benchmarks.md). Its cost grew with the connections of
-- the fleet, too.
--
-- Now a process that LISTENs writes what its listening connection follows here (its backend
-- pid, the kinds, and until when it vouches for them) and renews the row while it listens;
-- the check is a read of this small table, usually empty. A row outlives a listener that died
-- for at most its TTL (the notifications sent meanwhile are heard by nobody: a cost, not a
-- loss). Routers older than v14 set only their application_name: triggers no longer notify
-- them, and their watchers find changes by polling (Router.watch every 0.25 s) until they are
-- upgraded.
CREATE TABLE jobrouter_follows (
    pid          INTEGER PRIMARY KEY,          -- the listening backend (pg_backend_pid())
    kinds        TEXT NOT NULL,                -- what it follows: "events" (comma-separated)
    alive_until  DOUBLE PRECISION NOT NULL     -- epoch seconds; renewed while it listens
);

CREATE OR REPLACE FUNCTION jobrouter_followed(what TEXT) RETURNS BOOLEAN LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM jobrouter_follows
                   WHERE what = ANY (string_to_array(kinds, ','))
                     AND alive_until > extract(epoch FROM now()))
$$;
