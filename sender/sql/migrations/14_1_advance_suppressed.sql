-- Version 14: a step's send records no follow-up for an address suppressed while the step was in flight (issue
-- 39). Suppression was checked when a row was queued, not when sender_advance made the next step due, so step 2
-- waited queued for three days to be refused at the handoff; now the sequence ends as suppressed. And a relay's
-- late `delivered` no longer turns a row the agent saw refused (failed) into delivered, as a late `sent` already
-- could not (version 7).
CREATE OR REPLACE FUNCTION sender_advance(p_email bigint, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r sender_emails;
    l sender_leads;
    next_step sender_campaign_steps;
    sent_at timestamptz;
    new_id bigint;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email;
    SELECT * INTO l FROM sender_leads WHERE campaign_id = r.campaign_id AND lead = r.lead FOR UPDATE;
    IF l.ended = 'unconfirmed' THEN
        UPDATE sender_leads SET ended = NULL, ended_at = NULL WHERE id = l.id;
    ELSIF l.ended IS NOT NULL THEN
        RETURN;
    END IF;
    -- Suppressed while this step was in flight (version 14): no follow-up is queued for it, the sequence ends.
    IF sender_is_suppressed(r.recipient) THEN
        PERFORM sender_end_sequence(r.campaign_id, r.lead, 'suppressed', p_at);
        RETURN;
    END IF;
    SELECT coalesce((SELECT accepted_at FROM sender_sent WHERE email_id = p_email), p_at) INTO sent_at;
    SELECT * INTO next_step FROM sender_campaign_steps WHERE campaign_id = r.campaign_id AND step = r.step + 1;
    UPDATE sender_emails
    SET status = CASE WHEN attempts = 0 THEN 'queued'::sender_status ELSE 'retry'::sender_status END,
        pinned_mailbox = lower(r.mailbox), updated_at = p_at,
        not_before = greatest(not_before, sent_at + make_interval(secs => coalesce(next_step.delay_s, 0))),
        due_at = greatest(not_before, sent_at + make_interval(secs => coalesce(next_step.delay_s, 0)))
    WHERE campaign_id = r.campaign_id AND lead = r.lead AND step = r.step + 1 AND status = 'waiting';
    IF FOUND OR EXISTS (SELECT 1 FROM sender_emails WHERE campaign_id = r.campaign_id AND lead = r.lead
                        AND step = r.step + 1) THEN
        RETURN;
    END IF;
    IF next_step.step IS NULL THEN
        IF EXISTS (SELECT 1 FROM sender_campaigns WHERE id = r.campaign_id AND kind = 'file') THEN
            PERFORM sender_end_sequence(r.campaign_id, r.lead, 'completed', p_at);
        END IF;
        RETURN;
    END IF;
    INSERT INTO sender_emails (campaign_id, lead, step, recipient, mailbox_group, subject, body, own_subject,
                               not_before, due_at, pinned_mailbox, created_at, updated_at)
    VALUES (r.campaign_id, r.lead, next_step.step, l.address, r.mailbox_group, coalesce(next_step.subject, ''),
            next_step.body, next_step.subject IS NOT NULL, sent_at + make_interval(secs => next_step.delay_s),
            sent_at + make_interval(secs => next_step.delay_s), lower(r.mailbox), p_at, p_at)
    RETURNING id INTO new_id;
    PERFORM sender_event(new_id, 'queued', format('step %s: due %s after step %s was sent', next_step.step,
                                                  make_interval(secs => next_step.delay_s), r.step), p_at);
END
$$;

CREATE OR REPLACE FUNCTION sender_apply_event(p_email bigint, p_event text, p_at timestamptz, p_source text, p_ref text,
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
    -- Nor a `delivered` (version 14): a relay's late report never overturns a refusal the agent saw (554 at DATA);
    -- the event stays recorded, in the feedback and the row's history, for a person.
    IF target IN ('sent', 'delivered') AND r.status IN ('failed', 'suppressed', 'cancelled') THEN
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
       AND NOT (r.status IN ('sent', 'delivered') AND p_outcome IN ('failed', 'suppress', 'bounce')
                AND NOT EXISTS (SELECT 1 FROM sender_sent WHERE email_id = p_email)) THEN
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
        due_at = CASE WHEN new_status = 'retry' THEN least(due_at, now_at + make_interval(secs => p_delay_s))
                      ELSE due_at END,
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

CREATE OR REPLACE FUNCTION sender_rank_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status IN ('sent', 'delivered') AND NEW.status IN ('failed', 'suppressed')
       AND NOT EXISTS (SELECT 1 FROM sender_sent WHERE email_id = NEW.id) THEN
        RETURN NEW;
    END IF;
    NEW.status := sender_guarded_status(OLD.status, NEW.status);
    RETURN NEW;
END
$$;
