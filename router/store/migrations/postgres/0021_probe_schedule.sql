-- jobrouter schema v21 (postgres): the golden probes' schedule, durable and shared (issue 27). One
-- row per provider: when its next probe is due and how many it was sent (its turn through its
-- certified contracts and their stable cases). A leader sends a probe only after moving
-- next_at on by one interval in a conditional UPDATE (router/store/certifications.py,
-- claim_probe), so the fleet's cap holds across leader changes and two leaders at once, and a
-- new leader goes on with the turns where the last one stopped.
CREATE TABLE probe_schedule (
    provider TEXT PRIMARY KEY,
    next_at  DOUBLE PRECISION NOT NULL,   -- seconds since the epoch: no probe before
    turn     INTEGER NOT NULL  -- probes sent so far: which contract and case comes next
);
