-- jobrouter schema v12 (SQLite): nothing to change. PostgreSQL's v12 adds reads that wait on
-- the server (a waiter's read of settled jobs, a worker's wait for a runnable job); SQLite is
-- one file read in the process, where a read costs no transaction on a server. Kept so both
-- dialects number their migrations alike.
SELECT 1;
