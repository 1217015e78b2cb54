-- jobrouter schema v14 (SQLite): nothing to change. PostgreSQL's v14 keeps who follows which
-- notifications in a table; SQLite has no notifications. Kept so both dialects number their
-- migrations alike.
SELECT 1;
