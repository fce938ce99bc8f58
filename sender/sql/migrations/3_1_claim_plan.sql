-- Version 3: claims stay one index step however long the queue is.
--
-- The claim wants the oldest due row: the first entries of sender_emails_due, read in order. On a table whose
-- statistics are stale (a fresh ledger, a bulk enqueue that autovacuum has not analyzed yet) the planner believes
-- the queue holds a handful of rows and reads every due row to sort them instead: each claim then costs the
-- whole queue (1,500 queued rows: 0.73 ms of server CPU per claim instead of 0.23). Sorting is never what a claim
-- wants, so the function plans without it, whatever the statistics say.
CREATE OR REPLACE FUNCTION sender_claim(p_worker text, p_limit integer, p_groups text[]) RETURNS SETOF sender_emails
LANGUAGE plpgsql
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    RETURN QUERY
    UPDATE sender_emails SET status = 'sending', claimed_at = now(), claimed_by = p_worker, updated_at = now()
    WHERE id IN (
        SELECT id FROM sender_emails
        WHERE status IN ('queued', 'retry') AND not_before <= now()
          AND (p_groups IS NULL OR mailbox_group = ANY (p_groups))
        ORDER BY not_before, id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    RETURNING *;
END
$$;
