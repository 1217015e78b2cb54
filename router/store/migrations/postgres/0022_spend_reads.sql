-- jobrouter schema v22 (postgres): the spend report (issue 29, router/store/spend_reads.py) reads
-- the attempts started in a time range; without this index it walks every attempt ever made.
CREATE INDEX attempts_by_started ON attempts (started_at);
