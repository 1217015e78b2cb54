-- jobrouter schema v10 (SQLite): the listing's task and provider filters seek an
-- index instead of walking every job (a task or provider that matches little walked all
-- of them: seconds on 10^6 jobs). Newest first by id within each, so a page needs no sort.
CREATE INDEX jobs_by_task ON jobs (task, id);
CREATE INDEX jobs_by_owner_task ON jobs (owner, task, id);
-- The provider filter reads the jobs a provider ran from here (queries.sql: list_jobs_provider).
CREATE INDEX attempts_by_provider ON attempts (provider, job_id);
