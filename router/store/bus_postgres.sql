-- PostgreSQL's spellings of bus.sql's queries (router/store/bus.py): each replaces the shared
-- query of its name there.

-- name: claim_unpublished
UPDATE outbox SET claimed_by = :worker, claim_until = :claim_until
WHERE id IN (
    SELECT id FROM outbox
    WHERE published_at IS NULL AND delivered_at IS NULL
      AND (claim_until IS NULL OR claim_until < :now)
      AND owner IN ({json_list(:owners)})
    ORDER BY next_attempt_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED)
RETURNING *
