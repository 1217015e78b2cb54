-- Named queries of router/store/leader_lock.py: the leader's advisory lock and its lease
-- (migration 0016), PostgreSQL only. They run on the lock's own asyncpg connection, so their
-- parameters are asyncpg's ($1...), except `lock_holder`, read through the pool.

-- name: try_lock
SELECT pg_try_advisory_lock($1)

-- name: take_lease
-- Only the session that holds the advisory lock runs this: whoever held the lease before has
-- lost its session (or had it ended by end_expired_holder), so the lease is taken whatever its
-- expiry, with the next term. $1 holder, $2 lease seconds.
INSERT INTO jobrouter_leader_lease (id, holder, term, pid, expires_at)
VALUES (1, $1, 1, pg_backend_pid(), clock_timestamp() + make_interval(secs => $2))
ON CONFLICT (id) DO UPDATE
SET holder = EXCLUDED.holder, term = jobrouter_leader_lease.term + 1, pid = EXCLUDED.pid,
    expires_at = EXCLUDED.expires_at
RETURNING term

-- name: renew_lease
-- The leader's heartbeat and the fence before each periodic run: no row when the term moved
-- on, the lease expired (a follower may be taking it), or this is not the session that took it.
-- $1 holder, $2 term, $3 lease seconds.
UPDATE jobrouter_leader_lease
SET expires_at = clock_timestamp() + make_interval(secs => $3)
WHERE id = 1 AND holder = $1 AND term = $2 AND pid = pg_backend_pid()
  AND expires_at > clock_timestamp()
RETURNING term

-- name: end_expired_holder
-- A follower that found the lock taken: when the lease expired, the session that holds the
-- lock is renewing no lease, so it is ended, waiting up to $2 ms for it to go, so the lock is
-- free for the next try. Either it is the lease's own session (a leader frozen or stalled while
-- its TCP session lives), or the lease names another (a candidate that got the lock and
-- stalled before it took the lease, after its predecessor's session ended): that one only once
-- the lease has been expired for $3 seconds, longer than a candidate's try may take, so a
-- candidate taking the lease this instant is left alone. $1 the lock key.
-- No row: the lease is live, or the holder is a candidate within that grace.
SELECT l.holder, l.term, k.pid, k.pid = l.pid AS named,
       pg_terminate_backend(k.pid, $2) AS ended
FROM jobrouter_leader_lease l
JOIN pg_locks k ON k.locktype = 'advisory' AND k.granted AND k.classid = 0 AND k.objid = $1
  AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
WHERE l.id = 1 AND k.pid <> pg_backend_pid() AND l.expires_at < clock_timestamp()
  AND (k.pid = l.pid OR l.expires_at < clock_timestamp() - make_interval(secs => $3))

-- name: lease_left
-- Seconds until the lease expires (negative: expired), for a follower to try again then.
SELECT EXTRACT(EPOCH FROM expires_at - clock_timestamp())::float8 FROM jobrouter_leader_lease
WHERE id = 1

-- name: lock_holder
-- Who holds the lock now, by its session's application_name (`jobrouter-leader:<worker id>`).
SELECT a.application_name AS app FROM pg_locks l
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0
  AND l.objid = :key AND l.database =
      (SELECT oid FROM pg_database WHERE datname = current_database())
