-- jobrouter schema v13 (SQLite): nothing to change. PostgreSQL's v13 makes its wait for a
-- runnable job return the time it found one at; SQLite has no such wait. Kept so both
-- dialects number their migrations alike.
SELECT 1;
