-- jobrouter schema v15 (PostgreSQL): every resolution is a record (issue 30). An operator's
-- resolution of an `unknown` attempt keeps who resolved it (`token:ID` over HTTP and in the
-- console, `user:NAME` from the CLI) and the note saying what was checked, on the attempt,
-- whatever the outcome; the attempt's finished_at is when. Rows resolved before keep NULL: the
-- note of a failed or cancelled one is still their `error`; who resolved them was not kept.
ALTER TABLE attempts ADD COLUMN resolved_by TEXT;
ALTER TABLE attempts ADD COLUMN resolution_note TEXT;
