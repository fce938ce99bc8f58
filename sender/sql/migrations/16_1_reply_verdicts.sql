-- Version 15: replies as a person reads them (issue 39). An automatic reply naming a return date holds its lead
-- (sender_hold; sender_leads.held_until, held_why; sender_advance keeps a step created later behind the hold); a
-- reply saying the lead left or is the wrong person ends the sequence as `left`, keeping the addresses it names
-- (sender_leads.ended_note); a reply from a colleague at the lead's domain ends it as `colleague_replied` when the
-- campaign file says `stop_on_domain_reply: true` (sender_campaigns.stop_on_domain_reply, sender_campaign_apply's
-- new argument, sender_colleague_reply, sender_leads_domain); a person corrects a verdict with sender_reclassify.

ALTER TABLE sender_campaigns ADD COLUMN stop_on_domain_reply boolean NOT NULL DEFAULT false;

ALTER TABLE sender_leads DROP CONSTRAINT sender_leads_ended_check;
ALTER TABLE sender_leads ADD CONSTRAINT sender_leads_ended_check
    CHECK (ended IN ('completed', 'failed', 'unconfirmed', 'suppressed', 'cancelled', 'replied',
                     'bounced', 'unsubscribed', 'complained', 'stopped', 'left', 'colleague_replied'));
ALTER TABLE sender_leads ADD COLUMN ended_note text;
ALTER TABLE sender_leads ADD COLUMN held_until timestamptz;
ALTER TABLE sender_leads ADD COLUMN held_why text;
CREATE INDEX sender_leads_domain ON sender_leads ((split_part(address, '@', 2))) WHERE ended IS NULL;

ALTER TABLE sender_feedback DROP CONSTRAINT sender_feedback_event_check;
ALTER TABLE sender_feedback ADD CONSTRAINT sender_feedback_event_check
    CHECK (event IN ('sent', 'delivered', 'deferred', 'auto_replied', 'replied', 'bounced',
                     'unsubscribed', 'complained', 'left', 'colleague_replied'));

CREATE INDEX sender_feedback_colleague ON sender_feedback (ref) WHERE event = 'colleague_replied';

DROP FUNCTION sender_campaign_apply(text, text, boolean, text, jsonb, numeric, timestamptz);

CREATE OR REPLACE FUNCTION sender_end_sequence(p_campaign bigint, p_lead text, p_reason text, p_at timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    withdrawn integer;
BEGIN
    UPDATE sender_leads SET ended = p_reason, ended_at = p_at
    WHERE campaign_id = p_campaign AND lead = p_lead
      AND (ended IS NULL OR (ended IN ('completed', 'unconfirmed')
                             AND p_reason IN ('replied', 'bounced', 'unsubscribed', 'complained', 'left',
                                              'colleague_replied')));
    IF p_reason = 'unconfirmed' THEN
        RETURN;
    END IF;
    WITH withdrawn AS (
        UPDATE sender_emails SET status = 'cancelled', last_error = 'the sequence ended: ' || p_reason,
                                 updated_at = p_at
        WHERE campaign_id = p_campaign AND lead = p_lead AND status IN ('waiting', 'queued', 'retry')
        RETURNING id
    )
    SELECT count(*) FROM (SELECT sender_event(id, 'cancelled', 'the sequence ended: ' || p_reason, p_at)
                          FROM withdrawn) AS logged INTO withdrawn;
END
$$;

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
        not_before = greatest(not_before, sent_at + make_interval(secs => coalesce(next_step.delay_s, 0)),
                              l.held_until),
        due_at = greatest(not_before, sent_at + make_interval(secs => coalesce(next_step.delay_s, 0)),
                          l.held_until)
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
            next_step.body, next_step.subject IS NOT NULL,
            greatest(sent_at + make_interval(secs => next_step.delay_s), l.held_until),
            greatest(sent_at + make_interval(secs => next_step.delay_s), l.held_until), lower(r.mailbox), p_at, p_at)
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
    -- rank guard; `left` sets replied; the others (deferred, auto_replied, colleague_replied) are recorded only.
    IF EXISTS (SELECT 1 FROM sender_status_ranks() WHERE status = p_event) THEN
        target := p_event::sender_status;
    ELSIF p_event = 'left' THEN
        target := 'replied';  -- a reply, that ends its lead's sequence as `left` (below)
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
    -- What a reply says of its lead (version 16): gone or the wrong person (`left`), or a colleague answered
    -- (`colleague_replied`): the sequence ends for that reason, before the row's own status can end it as a reply,
    -- and keeps what the reply named (the addresses it gives, who replied) for `lead show`.
    IF p_event IN ('left', 'colleague_replied') THEN
        PERFORM sender_end_sequence(r.campaign_id, r.lead, p_event, now_at);
        UPDATE sender_leads SET ended_note = left(coalesce(p_detail, ''), 500)
        WHERE campaign_id = r.campaign_id AND lead = r.lead AND ended = p_event;
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

CREATE FUNCTION sender_campaign_apply(p_name text, p_group text, p_allow_other boolean, p_source text,
                                      p_steps jsonb, p_followups_share numeric, p_stop_on_domain_reply boolean,
                                      p_now timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    c sender_campaigns;
    answer text;
BEGIN
    SELECT * INTO c FROM sender_campaigns WHERE name = p_name FOR UPDATE;
    IF c.id IS NULL THEN
        INSERT INTO sender_campaigns (name, mailbox_group, allow_other_campaigns, source, followups_share,
                                      stop_on_domain_reply, created_at, updated_at)
        VALUES (p_name, p_group, p_allow_other, p_source, p_followups_share, p_stop_on_domain_reply, now_at, now_at)
        RETURNING * INTO c;
        answer := 'created';
    ELSIF c.kind <> 'file' THEN
        RAISE EXCEPTION 'campaign % is built in (sendhost sender enqueue); name the file''s campaign otherwise',
                        p_name USING ERRCODE = 'check_violation';
    ELSIF c.source = p_source THEN
        UPDATE sender_campaigns SET followups_share = p_followups_share,
                                    stop_on_domain_reply = p_stop_on_domain_reply
        WHERE id = c.id AND (followups_share <> p_followups_share
                             OR stop_on_domain_reply <> p_stop_on_domain_reply);
        RETURN 'unchanged';
    ELSE
        UPDATE sender_campaigns SET mailbox_group = p_group, allow_other_campaigns = p_allow_other,
                                    source = p_source, followups_share = p_followups_share,
                                    stop_on_domain_reply = p_stop_on_domain_reply, updated_at = now_at
        WHERE id = c.id;
        -- rows not handed over yet follow the group; their templates stay those they were created with
        UPDATE sender_emails SET mailbox_group = p_group
        WHERE campaign_id = c.id AND status IN ('waiting', 'queued', 'retry') AND mailbox_group <> p_group;
        answer := 'updated';
    END IF;
    DELETE FROM sender_campaign_steps WHERE campaign_id = c.id;
    INSERT INTO sender_campaign_steps (campaign_id, step, delay_s, subject, body)
    SELECT c.id, s.ordinality, (s.value ->> 'delay_s')::integer, s.value ->> 'subject', s.value ->> 'body'
    FROM jsonb_array_elements(p_steps) WITH ORDINALITY AS s;
    RETURN answer;
END
$$;

-- Replies as a person reads them (version 16, docs/feedback.md).

-- An automatic reply says its author is away until p_until: the lead's steps not sent yet wait until then, and so
-- does a step created later (sender_advance reads sender_leads.held_until). The first open window after it is the
-- agent's to find: a row claimed outside its lead's window goes back until the window opens. A hold is never
-- shortened (the later of two stands); a lead whose sequence ended is left alone. Returns how many rows it moved.
CREATE FUNCTION sender_hold(p_email bigint, p_until timestamptz, p_why text, p_now timestamptz DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
    l sender_leads;
    moved integer;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email;
    SELECT * INTO l FROM sender_leads WHERE campaign_id = r.campaign_id AND lead = r.lead FOR UPDATE;
    IF l.id IS NULL OR l.ended IS NOT NULL THEN
        RETURN 0;
    END IF;
    IF l.held_until IS NULL OR p_until > l.held_until THEN
        UPDATE sender_leads SET held_until = p_until, held_why = left(coalesce(p_why, ''), 500) WHERE id = l.id;
    END IF;
    WITH held AS (
        UPDATE sender_emails SET not_before = p_until, due_at = greatest(due_at, p_until), updated_at = now_at
        WHERE campaign_id = r.campaign_id AND lead = r.lead AND status IN ('waiting', 'queued', 'retry')
          AND not_before < p_until
        RETURNING id
    )
    SELECT count(*) INTO moved
    FROM (SELECT sender_event(id, 'held', format('until %s: %s', p_until, coalesce(p_why, '')), p_now)
          FROM held) AS logged;
    RETURN moved;
END
$$;

-- A reply from another address at a lead's domain that names no row of ours (version 16): in the campaigns whose
-- file says `stop_on_domain_reply: true`, of the leads at p_sender's domain whose sequences go on and that mailbox
-- p_mailbox has mailed, the one it mailed last ends as `colleague_replied`, naming p_sender (p_detail). The caller
-- has decided that the domain is a company's, not a free-mail provider's. The event goes through
-- sender_apply_event on that lead's last row from p_mailbox: answer is its answer, or no_row when no lead
-- qualifies.
CREATE FUNCTION sender_colleague_reply(p_mailbox text, p_sender text, p_ref text, p_detail text,
                                       p_verdict text DEFAULT 'none', p_now timestamptz DEFAULT NULL,
                                       OUT email_id bigint, OUT answer text)
LANGUAGE plpgsql AS $$
BEGIN
    -- read before (a restored inbox mark): the lead it ended, never the next one at the domain
    SELECT f.email_id INTO email_id FROM sender_feedback f WHERE f.event = 'colleague_replied' AND f.ref = p_ref
    LIMIT 1;
    IF email_id IS NOT NULL THEN
        answer := 'replay';
        RETURN;
    END IF;
    SELECT e.id INTO email_id
    FROM sender_leads l
    JOIN sender_campaigns c ON c.id = l.campaign_id
    JOIN sender_emails e ON e.campaign_id = l.campaign_id AND e.lead = l.lead
    JOIN sender_sent g ON g.email_id = e.id
    WHERE split_part(l.address, '@', 2) = split_part(lower(p_sender), '@', 2) AND l.ended IS NULL
      AND l.address <> lower(p_sender) AND c.stop_on_domain_reply AND lower(g.mailbox) = lower(p_mailbox)
    ORDER BY g.accepted_at DESC, e.id DESC
    LIMIT 1;
    IF email_id IS NULL THEN
        answer := 'no_row';
        RETURN;
    END IF;
    answer := sender_apply_event(email_id, 'colleague_replied', NULL, 'inbox', p_ref, p_detail, p_verdict, p_now);
END
$$;

-- A person's correction of what came back about row p_email (`sendhost sender reclassify`, version 16): p_as
-- (replied, auto_replied, unsubscribed, bounced, left) applied as feedback from a person, with its effect, under
-- the rank guard: a row never moves down, so a row `replied` called an automatic reply stays replied and its
-- sequence stays ended (answer outranked), while an unsubscribe or a bounce still suppresses the address. An
-- automatic reply holds the lead 7 days (the default of an automatic reply naming no date); `left` also replaces
-- a sequence that ended as `replied`. Answers: applied (the row or its lead's sequence changed) | recorded |
-- outranked | not_sent (no attempt ever started: nothing came back about it) | no_row.
CREATE FUNCTION sender_reclassify(p_email bigint, p_as text, p_note text, p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
    effect sender_status;  -- the status the verdict gives a row, for the rank guard's answer
    answer text;
    held integer;
BEGIN
    IF p_as IS NULL OR p_as NOT IN ('replied', 'auto_replied', 'unsubscribed', 'bounced', 'left') THEN
        RAISE EXCEPTION 'sender_reclassify: % is not a verdict a person gives', p_as
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    effect := CASE p_as WHEN 'auto_replied' THEN 'delivered' WHEN 'left' THEN 'replied'
                        ELSE p_as::sender_status END;
    SELECT * INTO r FROM sender_emails WHERE id = p_email;
    IF r.id IS NULL THEN
        RETURN 'no_row';
    END IF;
    IF r.attempt_started_at IS NULL THEN
        RETURN 'not_sent';
    END IF;
    answer := sender_apply_event(p_email, p_as, now_at, 'person', 'person:' || clock_timestamp()::text,
                                 coalesce(p_note, ''), 'none', p_now);
    IF p_as = 'left' THEN
        UPDATE sender_leads SET ended = 'left', ended_at = now_at, ended_note = left(coalesce(p_note, ''), 500)
        WHERE campaign_id = r.campaign_id AND lead = r.lead AND ended IN ('replied', 'left');
        IF FOUND THEN
            answer := 'applied';
        END IF;
    ELSIF p_as = 'auto_replied' THEN
        held := sender_hold(p_email, now_at + interval '7 days',
                            'an automatic reply, said a person: ' || coalesce(p_note, ''), p_now);
        IF held > 0 THEN
            answer := 'applied';
        END IF;
    END IF;
    IF answer = 'recorded' AND sender_rank(r.status) > sender_rank(effect) THEN
        RETURN 'outranked';
    END IF;
    RETURN answer;
END
$$;
