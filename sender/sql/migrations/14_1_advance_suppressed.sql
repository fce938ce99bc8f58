-- Version 14: a step's send records no follow-up for an address suppressed while the step was in flight (issue
-- 39). Suppression was checked when a row was queued, not when sender_advance made the next step due, so step 2
-- waited queued for three days to be refused at the handoff; now the sequence ends as suppressed.
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
