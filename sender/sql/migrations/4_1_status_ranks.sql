-- Version 4: the rank order of the statuses is written once, as one list (sender_status_ranks), that the rank
-- guard and every function reads; tests/sender/test_schema.py holds the Python enums to it. Versions 1 and 2
-- each wrote the order into sender_rank's CASE, and the guard's "handed over" was a bare 4.
--
-- The list compares text, not sender_status: a database upgraded from version 1 adds the feedback statuses in
-- this same transaction (migration 2), and new enum values cannot be used before it commits.

CREATE FUNCTION sender_status_ranks() RETURNS TABLE (status text, rank integer) LANGUAGE sql IMMUTABLE AS $$
    VALUES ('queued', 0), ('retry', 0), ('sending', 1), ('failed', 2), ('cancelled', 2), ('suppressed', 2),
           ('unconfirmed', 3), ('sent', 4), ('delivered', 5), ('replied', 6), ('bounced', 7), ('unsubscribed', 8),
           ('complained', 9)
$$;

CREATE OR REPLACE FUNCTION sender_rank(s sender_status) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT rank FROM sender_status_ranks() WHERE status = s::text
$$;

CREATE OR REPLACE FUNCTION sender_guarded_status(p_old sender_status, p_new sender_status) RETURNS sender_status
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN sender_rank(p_old) >= sender_rank('sent') AND sender_rank(p_new) < sender_rank(p_old)
                THEN p_old ELSE p_new END
$$;
