-- jobrouter schema v16 (PostgreSQL): the leader's lease (issue 31, item 5).
--
-- The advisory lock of router/store/leader_lock.py lives as long as the leader's session, and a
-- session lives as long as its TCP connection: a leader that is frozen (SIGSTOP, a stalled VM)
-- kept it, and nothing ran the periodic work. Now the lock holder also holds this one-row
-- lease and renews it every heartbeat, by the database's clock. A follower that finds the lock
-- taken and the lease expired ends the holder's lock session (`pg_terminate_backend(pid)`),
-- which frees the lock, and takes the lease with the next term. Each periodic run is fenced by
-- the term: a leader whose term moved on, or whose lease expired, runs nothing more.
CREATE TABLE jobrouter_leader_lease (
    id          SMALLINT PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    holder      TEXT NOT NULL,                 -- the leader's worker id
    term        BIGINT NOT NULL,               -- +1 at every election
    pid         INTEGER NOT NULL,              -- the leader's lock session (pg_backend_pid())
    expires_at  TIMESTAMPTZ NOT NULL           -- clock_timestamp() + lease at each renewal
);
