-- jobrouter schema v6 (SQLite): indexes of the job listing (router/listing.py). Pages are
-- newest first by the time-ordered id; an owner's list and a state's list (the needs-attention
-- queue) seek their own index instead of walking every job.
CREATE INDEX jobs_by_owner ON jobs (owner, id);
CREATE INDEX jobs_by_state ON jobs (state, id);
