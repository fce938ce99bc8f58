-- Version 7: feedback says how sure it is, and what is forged or does not add up changes nothing.
--   - sender_feedback.verdict: the DMARC result of a mail's From domain in the mailbox provider's own
--     Authentication-Results (pass, fail) or none; sender_apply_event takes it, and a `fail` is recorded (with its
--     verdict, and as `forged` in the row's history) and changes nothing else;
--   - a relay's `sent` never overwrites the agent's `failed` (or `suppressed`, `cancelled`), in either order;
--   - sender_settle's `bounce`: a recipient refused for good at submission (550 5.1.1 at RCPT) is suppressed and
--     counted as a hard bounce of the mailbox.
-- The health counts (one bounce and one complaint per row at most, forged feedback never) are named queries
-- (feedback.sql), not schema.

ALTER TABLE sender_feedback
    ADD COLUMN verdict text NOT NULL DEFAULT 'none' CHECK (verdict IN ('pass', 'none', 'fail'));

DROP FUNCTION sender_apply_event(bigint, text, timestamptz, text, text, text, timestamptz);
DROP FUNCTION sender_apply_event_by_message_id(text, text, timestamptz, text, text, text, timestamptz);

-- The one function every piece of feedback goes through. p_verdict says how sure the source is that the event is
-- what it claims (version 7): for mail, the DMARC result of its From domain in the mailbox provider's own
-- Authentication-Results (`pass`, `fail`, or `none`: no result, no trusted header, or not a mail). Answers:
--   applied   the row's status moved
--   recorded  a new event that changed no status (lower rank, or an event with no status of its own)
--   forged    p_verdict is `fail`: recorded with its verdict and in the row's history, nothing else changed
--   replay    this (row, event, reference) was already recorded: nothing changed
--   no_row    no such row
-- A `sent` never moves a row the agent settled as not handed over (failed, suppressed, cancelled): the agent's
-- own answer from the submission server outranks a relay's report.
CREATE FUNCTION sender_apply_event(p_email bigint, p_event text, p_at timestamptz, p_source text, p_ref text,
                                   p_detail text, p_verdict text DEFAULT 'none', p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    verdict text := coalesce(p_verdict, 'none');
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
    INSERT INTO sender_feedback (email_id, event, source, ref, mailbox, occurred_at, received_at, detail, verdict)
    VALUES (p_email, p_event, p_source, coalesce(p_ref, ''), r.mailbox, coalesce(p_at, now_at), now_at,
            left(coalesce(p_detail, ''), 500), verdict)
    ON CONFLICT (email_id, event, ref) DO NOTHING
    RETURNING id INTO recorded;
    IF recorded IS NULL THEN
        RETURN 'replay';
    END IF;
    IF verdict = 'fail' THEN
        PERFORM sender_event(p_email, 'forged', format('%s %s, DMARC fail: %s', p_source, p_event,
                                                       left(coalesce(p_detail, ''), 300)), p_now);
        RETURN 'forged';
    END IF;
    PERFORM sender_event(p_email, p_event, format('%s%s: %s', p_source,
                                                  CASE WHEN verdict = 'pass' THEN ' (DMARC pass)' ELSE '' END,
                                                  left(coalesce(p_detail, ''), 300)), p_now);
    IF target = 'sent' AND r.status IN ('failed', 'suppressed', 'cancelled') THEN
        target := NULL;
    END IF;
    IF target IS NOT NULL THEN
        UPDATE sender_emails SET status = target, updated_at = now_at
        WHERE id = p_email AND status IS DISTINCT FROM target
        RETURNING status INTO after;
    END IF;
    -- What the event means beyond the row, whatever the row's status ends as (after the row's own status, so that
    -- its sequence ends for the event's reason, not for the suppression it causes).
    IF p_event IN ('bounced', 'unsubscribed', 'complained') THEN
        PERFORM sender_suppress(r.recipient, p_event || ' (' || p_source || ')', p_now);
    END IF;
    IF target IS NOT NULL AND after IS NOT NULL AND after = target THEN
        RETURN 'applied';
    END IF;
    RETURN 'recorded';
END
$$;

-- The same, naming the row by the Message-ID it was sent with (angle brackets optional).
CREATE FUNCTION sender_apply_event_by_message_id(p_message_id text, p_event text, p_at timestamptz, p_source text,
                                                 p_ref text, p_detail text, p_verdict text DEFAULT 'none',
                                                 p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    found bigint;
BEGIN
    SELECT id INTO found FROM sender_emails
    WHERE message_id = '<' || btrim(p_message_id, '<> ') || '>';
    IF found IS NULL THEN
        RETURN 'no_row';
    END IF;
    RETURN sender_apply_event(found, p_event, p_at, p_source, p_ref, p_detail, p_verdict, p_now);
END
$$;

-- The rank guard's one exception (version 7): a row that only a relay's `sent` made sent (no send-log entry: the submission server
-- never told us it accepted it) still takes the agent's own definite answer that it did not leave (failed, or
-- suppressed for a refused recipient), so that the answer stands whichever of the two arrived first.
CREATE OR REPLACE FUNCTION sender_rank_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = 'sent' AND NEW.status IN ('failed', 'suppressed')
       AND NOT EXISTS (SELECT 1 FROM sender_send_log WHERE email_id = NEW.id) THEN
        RETURN NEW;
    END IF;
    NEW.status := sender_guarded_status(OLD.status, NEW.status);
    RETURN NEW;
END
$$;

-- Settle a failed or unknown attempt. p_outcome:
--   retry       a clear retryable failure: back in p_delay_s, unless out of attempts (then failed)
--   reroute     the mailbox's fault (auth, quota, rate): back in p_delay_s, the attempt refunded
--   failed      permanent (content)
--   suppress    the recipient's address is bad: suppress it everywhere
--   bounce      the recipient's server refused the address for good (550 5.1.1 at RCPT): as suppress, and it is
--               a hard bounce of the mailbox (a `bounced` feedback entry, source `agent`, that health counts)
--   unconfirmed we do not know whether it left: never resent
-- The rank guard: nothing here touches a row that is already sent, or settled (ranked above sending); except that
-- a definite failure (failed, suppress, bounce) still settles a row that only a relay's `sent` made sent (no
-- send-log entry), as it would have had it come first: a late `sent` never overwrites `failed`.
CREATE OR REPLACE FUNCTION sender_settle(p_email bigint, p_outcome text, p_detail text, p_delay_s double precision,
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
    IF r.status <> 'sending' AND sender_rank(r.status) > sender_rank('sending')
       AND NOT (r.status = 'sent' AND p_outcome IN ('failed', 'suppress', 'bounce')
                AND NOT EXISTS (SELECT 1 FROM sender_send_log WHERE email_id = p_email)) THEN
        RETURN r.status;
    END IF;
    IF p_outcome IN ('suppress', 'bounce') THEN
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
    IF p_outcome = 'bounce' THEN
        -- once per attempt: the mailbox's health counts it as it counts a bounce read from the inbox
        INSERT INTO sender_feedback (email_id, event, source, ref, mailbox, occurred_at, received_at, detail)
        VALUES (p_email, 'bounced', 'agent', 'attempt:' || coalesce(r.attempt_id::text, r.attempts::text),
                r.mailbox, now_at, now_at, left(coalesce(p_detail, ''), 500))
        ON CONFLICT (email_id, event, ref) DO NOTHING;
    END IF;
    PERFORM sender_event(p_email, p_outcome, p_detail, p_now);
    RETURN new_status;
END
$$;
