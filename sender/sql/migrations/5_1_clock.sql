-- Version 5: the time comes from the caller when it has a clock of its own. Every function that reads the time
-- (a claim's due rows, a retry's not_before, the sweep's "older than") or writes it (claimed, started, accepted,
-- every created_at and updated_at, the rows' history) takes `p_now`, last; NULL, the default, is the database's
-- own now() (and clock_timestamp() for the history), exactly as before. `sender.Ledger(clock=...)` passes it;
-- a person at psql leaves it out.
--
-- A new parameter makes a new function in PostgreSQL, so each one is dropped and created again.

DROP FUNCTION sender_event(bigint, text, text);
DROP FUNCTION sender_enqueue(text, integer, text, text, text, text, timestamptz);
DROP FUNCTION sender_suppress(text, text);
DROP FUNCTION sender_claim(text, integer, text[]);
DROP FUNCTION sender_unclaim(bigint, double precision, text);
DROP FUNCTION sender_begin_attempt(bigint, uuid, text, text, text);
DROP FUNCTION sender_record_sent(bigint, text);
DROP FUNCTION sender_settle(bigint, text, text, double precision, integer);
DROP FUNCTION sender_sweep(double precision);
DROP FUNCTION sender_apply_event(bigint, text, timestamptz, text, text, text);
DROP FUNCTION sender_apply_event_by_message_id(text, text, timestamptz, text, text, text);

-- What follows is word for word the functions of ../schema.sql (tests/sender/test_schema.py compares them).

CREATE FUNCTION sender_event(p_email bigint, p_kind text, p_detail text, p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO sender_events (email_id, at, kind, detail)
    VALUES (p_email, coalesce(p_now, clock_timestamp()), p_kind, coalesce(p_detail, ''))
$$;

-- queued | duplicate | suppressed; a duplicate (lead, step) is refused by the unique constraint.
CREATE FUNCTION sender_enqueue(p_lead text, p_step integer, p_recipient text, p_group text, p_subject text,
                               p_body text, p_not_before timestamptz, p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    new_id bigint;
BEGIN
    IF sender_is_suppressed(p_recipient) THEN
        RETURN 'suppressed';
    END IF;
    INSERT INTO sender_emails (lead, step, recipient, mailbox_group, subject, body, not_before, created_at,
                               updated_at)
    VALUES (p_lead, p_step, lower(p_recipient), p_group, p_subject, p_body, coalesce(p_not_before, now_at), now_at,
            now_at)
    ON CONFLICT (lead, step) DO NOTHING
    RETURNING id INTO new_id;
    IF new_id IS NULL THEN
        RETURN 'duplicate';
    END IF;
    PERFORM sender_event(new_id, 'queued', '', p_now);
    RETURN 'queued';
END
$$;

CREATE FUNCTION sender_suppress(p_address text, p_reason text, p_now timestamptz DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    withdrawn integer;
BEGIN
    INSERT INTO sender_suppressions (address, reason, created_at)
    VALUES (lower(p_address), coalesce(p_reason, ''), now_at)
    ON CONFLICT (address) DO NOTHING;
    WITH hit AS (
        UPDATE sender_emails SET status = 'suppressed', updated_at = now_at
        WHERE recipient = lower(p_address) AND status IN ('queued', 'retry')
        RETURNING id
    )
    SELECT count(*) INTO withdrawn FROM (SELECT sender_event(id, 'suppressed', p_reason, p_now) FROM hit) AS logged;
    RETURN withdrawn;
END
$$;

-- One statement: due rows, oldest first, each claimed by exactly one agent.
-- Its commit does not wait for the disk (synchronous_commit off for this transaction only): a claim lost in a
-- database crash only puts the row back in the queue, and the attempt's start, which must survive, is a durable
-- commit that flushes the claim's WAL with it. PL/pgSQL keeps the statement's plan between calls.
-- The claim wants the oldest due row: the first entries of sender_emails_due, read in order. On a table whose
-- statistics are stale (a fresh ledger, a bulk enqueue that autovacuum has not analyzed yet) the planner believes
-- the queue holds a handful of rows and reads every due row to sort them instead (version 3): sorting is never
-- what a claim wants, so the function plans without it, whatever the statistics say.
CREATE FUNCTION sender_claim(p_worker text, p_limit integer, p_groups text[], p_now timestamptz DEFAULT NULL)
RETURNS SETOF sender_emails
LANGUAGE plpgsql
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    RETURN QUERY
    UPDATE sender_emails SET status = 'sending', claimed_at = now_at, claimed_by = p_worker, updated_at = now_at
    WHERE id IN (
        SELECT id FROM sender_emails
        WHERE status IN ('queued', 'retry') AND not_before <= now_at
          AND (p_groups IS NULL OR mailbox_group = ANY (p_groups))
        ORDER BY not_before, id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    RETURNING *;
END
$$;

-- Give back a claim whose attempt never started (no mailbox free, no lease, agent stopping). Not waiting for the
-- disk, as the claim: if it is lost, the row stays `sending` without an attempt and the sweep requeues it.
CREATE FUNCTION sender_unclaim(p_email bigint, p_delay_s double precision, p_why text,
                               p_now timestamptz DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    UPDATE sender_emails
    SET status = CASE WHEN sender_is_suppressed(recipient) THEN 'suppressed'::sender_status
                      WHEN attempts = 0 THEN 'queued'::sender_status ELSE 'retry'::sender_status END,
        not_before = now_at + make_interval(secs => p_delay_s), claimed_by = NULL, updated_at = now_at
    WHERE id = p_email AND status = 'sending' AND attempt_id IS NULL
    RETURNING * INTO r;
    IF r.id IS NULL THEN
        RETURN false;
    END IF;
    IF p_why <> '' THEN
        PERFORM sender_event(p_email, 'unclaimed', p_why, p_now);
    END IF;
    RETURN true;
END
$$;

-- The last check before the handoff, and the attempt's start, in one call: ok (with the row's fixed
-- Message-ID) | suppressed | lost (the row is no longer ours to send).
CREATE FUNCTION sender_begin_attempt(p_email bigint, p_attempt uuid, p_mailbox text, p_source_ip text,
                                     p_message_id text, p_now timestamptz DEFAULT NULL,
                                     OUT outcome text, OUT message_id text)
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email FOR UPDATE;
    IF r.status <> 'sending' OR r.attempt_id IS NOT NULL THEN
        outcome := 'lost';
        RETURN;
    END IF;
    IF sender_is_suppressed(r.recipient) THEN
        UPDATE sender_emails SET status = 'suppressed', updated_at = now_at WHERE id = p_email;
        PERFORM sender_event(p_email, 'suppressed', 'suppressed before the handoff', p_now);
        outcome := 'suppressed';
        RETURN;
    END IF;
    UPDATE sender_emails
    SET attempt_id = p_attempt, attempt_started_at = now_at, attempts = attempts + 1, mailbox = p_mailbox,
        source_ip = p_source_ip, message_id = coalesce(sender_emails.message_id, p_message_id), updated_at = now_at
    WHERE id = p_email
    RETURNING sender_emails.message_id INTO message_id;
    PERFORM sender_event(p_email, 'attempt',
                         format('attempt %s via %s from %s', r.attempts + 1, p_mailbox, coalesce(p_source_ip, '-')),
                         p_now);
    outcome := 'ok';
END
$$;

-- The server accepted the message: the send-log entry and `sent`, once. True when this call recorded it.
-- The one durable commit of a send is the attempt's start (sender_begin_attempt): it is what keeps a row from
-- ever being sent twice. This commit does not wait for the disk: if a database crash loses it, the row is left
-- `sending` with its attempt started, and the sweep settles it as unconfirmed, never resent, still counted
-- against the mailbox's cap (sends_since counts started attempts): the under-sending side of not knowing.
CREATE FUNCTION sender_record_sent(p_email bigint, p_reply text, p_now timestamptz DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
    logged bigint;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT * INTO r FROM sender_emails WHERE id = p_email FOR UPDATE;
    IF r.attempt_id IS NULL OR r.message_id IS NULL THEN
        RAISE EXCEPTION 'sender_record_sent: row % has no attempt', p_email;
    END IF;
    INSERT INTO sender_send_log (email_id, message_id, mailbox, source_ip, accepted_at, reply)
    VALUES (p_email, r.message_id, r.mailbox, r.source_ip, now_at, coalesce(p_reply, ''))
    ON CONFLICT (email_id) DO NOTHING
    RETURNING email_id INTO logged;
    UPDATE sender_emails SET status = 'sent', last_error = NULL, updated_at = now_at
    WHERE id = p_email AND status <> 'sent';
    IF logged IS NOT NULL THEN
        PERFORM sender_event(p_email, 'sent', coalesce(p_reply, ''), p_now);
    END IF;
    RETURN logged IS NOT NULL;
END
$$;

-- Settle a failed or unknown attempt. p_outcome:
--   retry       a clear retryable failure: back in p_delay_s, unless out of attempts (then failed)
--   reroute     the mailbox's fault (auth, quota, rate): back in p_delay_s, the attempt refunded
--   failed      permanent (content)
--   suppress    the recipient's address is bad: suppress it everywhere
--   unconfirmed we do not know whether it left: never resent
-- The rank guard: nothing here touches a row that is already sent, or settled (ranked above sending).
CREATE FUNCTION sender_settle(p_email bigint, p_outcome text, p_detail text, p_delay_s double precision,
                              p_max_attempts integer, p_now timestamptz DEFAULT NULL) RETURNS sender_status
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
    new_status sender_status;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email FOR UPDATE;
    IF r.id IS NULL THEN
        RAISE EXCEPTION 'sender_settle: no row %', p_email;
    END IF;
    IF r.status = 'sent' OR (r.status <> 'sending' AND sender_rank(r.status) > sender_rank('sending')) THEN
        RETURN r.status;
    END IF;
    IF p_outcome = 'suppress' THEN
        PERFORM sender_suppress(r.recipient, p_detail, p_now);
        new_status := 'suppressed';
    ELSIF p_outcome = 'unconfirmed' THEN
        new_status := 'unconfirmed';
    ELSIF p_outcome = 'failed' THEN
        new_status := 'failed';
    ELSIF p_outcome IN ('retry', 'reroute') THEN
        IF sender_is_suppressed(r.recipient) THEN
            new_status := 'suppressed';
        ELSIF p_outcome = 'retry' AND r.attempts >= p_max_attempts THEN
            new_status := 'failed';
        ELSE
            new_status := 'retry';
        END IF;
    ELSE
        RAISE EXCEPTION 'sender_settle: unknown outcome %', p_outcome;
    END IF;
    UPDATE sender_emails
    SET status = new_status, last_error = p_detail, updated_at = now_at,
        attempts = CASE WHEN p_outcome = 'reroute' AND r.attempt_id IS NOT NULL
                        THEN greatest(attempts - 1, 0) ELSE attempts END,
        -- a retry proves the last attempt did not leave: the next one may start
        attempt_id = CASE WHEN new_status = 'retry' THEN NULL ELSE attempt_id END,
        not_before = CASE WHEN new_status = 'retry' THEN now_at + make_interval(secs => p_delay_s) ELSE not_before END,
        claimed_by = CASE WHEN new_status = 'retry' THEN NULL ELSE claimed_by END
    WHERE id = p_email;
    PERFORM sender_event(p_email, p_outcome, p_detail, p_now);
    RETURN new_status;
END
$$;

-- Rows whose agent died: back to the queue if the attempt never started, else unconfirmed (never resent).
CREATE FUNCTION sender_sweep(p_older_than_s double precision, p_now timestamptz DEFAULT NULL,
                             OUT requeued integer, OUT unconfirmed integer)
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
BEGIN
    WITH stale AS (
        UPDATE sender_emails
        SET status = CASE WHEN sender_is_suppressed(recipient) THEN 'suppressed'::sender_status
                          WHEN attempts = 0 THEN 'queued'::sender_status ELSE 'retry'::sender_status END,
            claimed_by = NULL, updated_at = now_at
        WHERE status = 'sending' AND attempt_id IS NULL
          AND claimed_at < now_at - make_interval(secs => p_older_than_s)
        RETURNING id
    )
    SELECT count(*) INTO requeued
    FROM (SELECT sender_event(id, 'swept', 'requeued: no attempt started', p_now) FROM stale) s;
    WITH stale AS (
        UPDATE sender_emails SET status = 'unconfirmed', updated_at = now_at
        WHERE status = 'sending' AND attempt_id IS NOT NULL
          AND coalesce(attempt_started_at, claimed_at) < now_at - make_interval(secs => p_older_than_s)
          AND NOT EXISTS (SELECT 1 FROM sender_send_log WHERE email_id = sender_emails.id)
        RETURNING id
    )
    SELECT count(*) INTO unconfirmed
    FROM (SELECT sender_event(id, 'swept', 'unconfirmed: the attempt had started; check Sent Items', p_now)
          FROM stale) s;
END
$$;

-- The one function every piece of feedback goes through. Answers:
--   applied   the row's status moved
--   recorded  a new event that changed no status (lower rank, or an event with no status of its own)
--   replay    this (row, event, reference) was already recorded: nothing changed
--   no_row    no such row
CREATE FUNCTION sender_apply_event(p_email bigint, p_event text, p_at timestamptz, p_source text, p_ref text,
                                   p_detail text, p_now timestamptz DEFAULT NULL) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
    target sender_status;
    recorded bigint;
    after sender_status;
BEGIN
    -- A replay is answered from a read, without the row lock: a thousand clicks on one link cost no writes.
    -- (The insert below stays the guard when two first arrivals race.)
    IF EXISTS (SELECT 1 FROM sender_feedback WHERE email_id = p_email AND event = p_event
               AND ref = coalesce(p_ref, '')) THEN
        RETURN 'replay';
    END IF;
    SELECT * INTO r FROM sender_emails WHERE id = p_email FOR UPDATE;
    IF r.id IS NULL THEN
        RETURN 'no_row';
    END IF;
    -- An event named as a status sets it (sent, delivered, replied, bounced, unsubscribed, complained), under the
    -- rank guard; the others (deferred, auto_replied) are recorded only.
    IF EXISTS (SELECT 1 FROM sender_status_ranks() WHERE status = p_event) THEN
        target := p_event::sender_status;
    END IF;
    INSERT INTO sender_feedback (email_id, event, source, ref, mailbox, occurred_at, received_at, detail)
    VALUES (p_email, p_event, p_source, coalesce(p_ref, ''), r.mailbox, coalesce(p_at, now_at), now_at,
            left(coalesce(p_detail, ''), 500))
    ON CONFLICT (email_id, event, ref) DO NOTHING
    RETURNING id INTO recorded;
    IF recorded IS NULL THEN
        RETURN 'replay';
    END IF;
    PERFORM sender_event(p_email, p_event, format('%s: %s', p_source, left(coalesce(p_detail, ''), 300)), p_now);
    -- What the event means beyond the row, whatever the row's status ends as.
    IF p_event IN ('bounced', 'unsubscribed', 'complained') THEN
        PERFORM sender_suppress(r.recipient, p_event || ' (' || p_source || ')', p_now);
    END IF;
    IF p_event = 'replied' THEN  -- stop on reply: the lead's later steps are withdrawn
        UPDATE sender_emails SET status = 'cancelled', updated_at = now_at
        WHERE lead = r.lead AND step > r.step AND status IN ('queued', 'retry');
    END IF;
    IF target IS NULL THEN
        RETURN 'recorded';
    END IF;
    UPDATE sender_emails SET status = target, updated_at = now_at
    WHERE id = p_email AND status IS DISTINCT FROM target
    RETURNING status INTO after;
    IF after IS NOT NULL AND after = target THEN
        RETURN 'applied';
    END IF;
    RETURN 'recorded';
END
$$;

-- The same, naming the row by the Message-ID it was sent with (angle brackets optional).
CREATE FUNCTION sender_apply_event_by_message_id(p_message_id text, p_event text, p_at timestamptz, p_source text,
                                                 p_ref text, p_detail text, p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    found bigint;
BEGIN
    SELECT id INTO found FROM sender_emails
    WHERE message_id = '<' || btrim(p_message_id, '<> ') || '>';
    IF found IS NULL THEN
        RETURN 'no_row';
    END IF;
    RETURN sender_apply_event(found, p_event, p_at, p_source, p_ref, p_detail, p_now);
END
$$;
