-- jobrouter schema v16 (SQLite): nothing to change. PostgreSQL's v16 keeps the leader's lease
-- in a table; on SQLite the single process is its own leader. Kept so both dialects number
-- their migrations alike.
SELECT 1;
