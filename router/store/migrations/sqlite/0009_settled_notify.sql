-- jobrouter schema v9 (SQLite): nothing to change. PostgreSQL's v9 announces settled jobs on
-- a channel of their own (LISTEN/NOTIFY); SQLite has no notifications (other processes' changes
-- are seen by polling). Kept so both dialects number their migrations alike.
SELECT 1;
