-- Version 22: one name for a person's address (issue 44). A row's address was `sender_emails.recipient` while the
-- lead's, the suppression's and the CLI's were `address`; the row's column is `address` now, and every function
-- that read it reads it by that name. Nothing else changes.

ALTER TABLE sender_emails RENAME COLUMN recipient TO address;
ALTER TABLE sender_emails RENAME CONSTRAINT sender_emails_recipient_check TO sender_emails_address_check;
ALTER INDEX sender_emails_recipient RENAME TO sender_emails_address;

-- A parameter's name is part of the function: sender_enqueue's p_recipient is p_address.
DROP FUNCTION sender_enqueue(text, integer, text, text, text, text, timestamptz, boolean, timestamptz);

CREATE FUNCTION sender_enqueue(p_lead text, p_step integer, p_address text, p_group text,
                               p_subject text, p_body text, p_not_before timestamptz,
                               p_allow_same_person boolean DEFAULT false, p_now timestamptz DEFAULT NULL,
                               OUT outcome text, OUT first_lead text)
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    campaign bigint := (SELECT id FROM sender_campaigns WHERE name = 'enqueue');
    new_id bigint;
    new_status sender_status;
BEGIN
    IF sender_is_suppressed(p_address) THEN
        outcome := 'suppressed';
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM sender_leads WHERE campaign_id = campaign AND lead = p_lead) THEN
        PERFORM pg_advisory_xact_lock(hashtext('sender_enqueue'));
        IF NOT coalesce(p_allow_same_person, false) THEN
            SELECT a.lead INTO first_lead FROM sender_active_leads a
            WHERE a.address = lower(p_address) AND a.campaign_id = campaign AND a.lead <> p_lead
            ORDER BY a.id LIMIT 1;
            IF first_lead IS NOT NULL THEN
                outcome := 'same_person';
                RETURN;
            END IF;
        END IF;
    END IF;
    INSERT INTO sender_leads (campaign_id, lead, address, created_at)
    VALUES (campaign, p_lead, lower(p_address), now_at)
    ON CONFLICT (campaign_id, lead) DO NOTHING;
    IF EXISTS (SELECT 1 FROM sender_emails WHERE campaign_id = campaign AND lead = p_lead AND step = p_step) THEN
        outcome := 'duplicate';
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM sender_leads WHERE campaign_id = campaign AND lead = p_lead AND ended IS NOT NULL)
    THEN
        outcome := 'ended';
        RETURN;
    END IF;
    INSERT INTO sender_emails (campaign_id, lead, step, address, mailbox_group, subject, body, not_before,
                               due_at, pinned_mailbox, created_at, updated_at)
    SELECT campaign, p_lead, p_step, lower(p_address), p_group, p_subject, p_body, due.at, due.at,
           lower(sent.mailbox), now_at, now_at
    FROM (SELECT NULL) AS one
    LEFT JOIN LATERAL (SELECT e.mailbox, g.accepted_at FROM sender_emails e
                       JOIN sender_sent g ON g.email_id = e.id
                       WHERE e.campaign_id = campaign AND e.lead = p_lead AND e.step = p_step - 1
                         AND e.status IN ('sent', 'delivered')) AS sent ON true
    CROSS JOIN LATERAL (SELECT greatest(coalesce(p_not_before, now_at), coalesce(sent.accepted_at, now_at)) AS at)
        AS due
    ON CONFLICT (campaign_id, lead, step) DO NOTHING
    RETURNING id, status INTO new_id, new_status;
    IF new_id IS NULL THEN
        outcome := 'duplicate';
        RETURN;
    END IF;
    PERFORM sender_event(new_id, new_status::text, '', p_now);
    outcome := new_status::text;
END
$$;

CREATE OR REPLACE FUNCTION sender_suppress(p_address text, p_reason text, p_now timestamptz DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    entry text := lower(p_address);
    withdrawn integer;
BEGIN
    INSERT INTO sender_suppressions (address, reason, created_at)
    VALUES (entry, coalesce(p_reason, ''), now_at)
    ON CONFLICT (address) DO NOTHING;
    WITH hit AS (
        UPDATE sender_emails SET status = 'suppressed', updated_at = now_at
        WHERE status IN ('waiting', 'queued', 'retry')
          AND CASE WHEN left(entry, 1) = '@' THEN split_part(address, '@', 2) = substr(entry, 2)
                   ELSE address = entry END
        RETURNING id
    )
    SELECT count(*) INTO withdrawn FROM (SELECT sender_event(id, 'suppressed', p_reason, p_now) FROM hit) AS logged;
    RETURN withdrawn;
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
    IF sender_is_suppressed(r.address) THEN
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
    INSERT INTO sender_emails (campaign_id, lead, step, address, mailbox_group, subject, body, own_subject,
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

CREATE OR REPLACE FUNCTION sender_add_leads(p_name text, p_now timestamptz DEFAULT NULL)
RETURNS TABLE (outcome text, leads bigint, first_line integer) LANGUAGE plpgsql
SET jit = off
SET work_mem = '64MB'
AS $$
#variable_conflict use_column
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    c sender_campaigns;
    first sender_campaign_steps;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('sender_add_leads'));
    SELECT * INTO c FROM sender_campaigns WHERE name = p_name FOR UPDATE;
    IF c.id IS NULL OR c.kind <> 'file' THEN
        RAISE EXCEPTION 'no campaign %; `sendhost campaign status` lists them', p_name
            USING ERRCODE = 'check_violation';
    END IF;
    IF c.state = 'stopped' THEN
        RAISE EXCEPTION 'campaign % is stopped: it takes no leads', p_name USING ERRCODE = 'check_violation';
    END IF;
    SELECT * INTO first FROM sender_campaign_steps WHERE campaign_id = c.id AND step = 1;
    -- The writes below see none of each other's rows (one snapshot): each reads `classified`; the foreign keys,
    -- checked at the statement's end, see them all.
    RETURN QUERY
    WITH classified AS MATERIALIZED (
        SELECT i.line, i.address, i.ref, i.timezone, i.fields, CASE
            WHEN here.id IS NOT NULL THEN 'already'
            WHEN sender_is_suppressed(i.address) THEN 'suppressed'
            WHEN NOT c.allow_other_campaigns AND EXISTS (
                SELECT 1 FROM sender_active_leads a
                WHERE a.address = i.address AND a.campaign_id <> c.id AND a.kind = 'file') THEN 'other_campaign'
            ELSE 'added' END AS outcome
        FROM sender_leads_import i
        LEFT JOIN sender_leads here ON here.campaign_id = c.id AND here.lead = i.address
    ), added_leads AS (
        INSERT INTO sender_leads (campaign_id, lead, address, ref, timezone, fields, created_at)
        SELECT c.id, a.address, a.address, a.ref, a.timezone, a.fields, now_at FROM classified a
        WHERE a.outcome = 'added'
    ), created AS (
        INSERT INTO sender_emails (campaign_id, lead, step, address, mailbox_group, subject, body, status,
                                   not_before, due_at, created_at, updated_at)
        SELECT c.id, a.address, 1, a.address, c.mailbox_group, first.subject, first.body,
               CASE WHEN c.state = 'running' THEN 'queued'::sender_status ELSE 'waiting'::sender_status END,
               now_at, now_at, now_at, now_at
        FROM classified a WHERE a.outcome = 'added' ORDER BY a.line
        RETURNING id, status
    ), logged AS (
        INSERT INTO sender_events (email_id, at, kind, detail)
        SELECT e.id, coalesce(p_now, clock_timestamp()), e.status::text, 'added to campaign ' || p_name
        FROM created e
    )
    SELECT a.outcome, count(*), min(a.line) FROM classified a GROUP BY a.outcome;
END
$$;

CREATE OR REPLACE FUNCTION sender_unclaim(p_email bigint, p_delay_s double precision, p_why text,
                               p_now timestamptz DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    UPDATE sender_emails
    SET status = CASE WHEN sender_is_suppressed(address) THEN 'suppressed'::sender_status
                      WHEN attempts = 0 THEN 'queued'::sender_status ELSE 'retry'::sender_status END,
        not_before = now_at + make_interval(secs => p_delay_s), claimed_by = NULL, updated_at = now_at,
        -- its place in the queue stays (due_at), unless the delay is shorter than the time it was to become due
        due_at = least(due_at, now_at + make_interval(secs => p_delay_s))
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

CREATE OR REPLACE FUNCTION sender_begin_attempt(p_email bigint, p_attempt uuid, p_mailbox text, p_source_ip text,
                                     p_message_id text, p_subject text, p_now timestamptz DEFAULT NULL,
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
    IF r.pinned_mailbox IS NOT NULL AND lower(p_mailbox) <> r.pinned_mailbox THEN
        RAISE EXCEPTION 'sender_begin_attempt: row % goes from mailbox %, not %', p_email, r.pinned_mailbox,
                        p_mailbox;
    END IF;
    IF EXISTS (SELECT 1 FROM sender_leads WHERE campaign_id = r.campaign_id AND lead = r.lead AND ended IS NOT NULL)
    THEN
        UPDATE sender_emails SET status = 'cancelled', updated_at = now_at WHERE id = p_email;
        PERFORM sender_event(p_email, 'cancelled', 'the sequence ended before the handoff', p_now);
        outcome := 'ended';
        RETURN;
    END IF;
    IF r.step > 1 AND NOT sender_step_was_sent(r.campaign_id, r.lead, r.step - 1) THEN
        UPDATE sender_emails SET status = 'waiting', claimed_by = NULL, updated_at = now_at WHERE id = p_email;
        PERFORM sender_event(p_email, 'waiting', format('step %s is not sent', r.step - 1), p_now);
        outcome := 'lost';
        RETURN;
    END IF;
    IF sender_is_suppressed(r.address) THEN
        UPDATE sender_emails SET status = 'suppressed', updated_at = now_at WHERE id = p_email;
        PERFORM sender_event(p_email, 'suppressed', 'suppressed before the handoff', p_now);
        outcome := 'suppressed';
        RETURN;
    END IF;
    UPDATE sender_emails
    SET attempt_id = p_attempt, attempt_started_at = now_at, attempts = attempts + 1, mailbox = p_mailbox,
        source_ip = p_source_ip, message_id = coalesce(sender_emails.message_id, p_message_id),
        sent_subject = p_subject, updated_at = now_at
    WHERE id = p_email
    RETURNING sender_emails.message_id INTO message_id;
    PERFORM sender_event(p_email, 'attempt',
                         format('attempt %s via %s from %s', r.attempts + 1, p_mailbox, coalesce(p_source_ip, '-')),
                         p_now);
    outcome := 'ok';
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
        PERFORM sender_suppress(r.address, p_detail, p_now);
        new_status := 'suppressed';
    ELSIF p_outcome = 'unconfirmed' THEN
        new_status := 'unconfirmed';
    ELSIF p_outcome = 'failed' THEN
        new_status := 'failed';
    ELSIF p_outcome IN ('retry', 'reroute') THEN
        IF sender_is_suppressed(r.address) THEN
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

CREATE OR REPLACE FUNCTION sender_sweep(p_older_than_s double precision, p_now timestamptz DEFAULT NULL,
                             OUT requeued integer, OUT unconfirmed integer)
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
BEGIN
    WITH stale AS (
        UPDATE sender_emails
        SET status = CASE WHEN sender_is_suppressed(address) THEN 'suppressed'::sender_status
                          WHEN attempts = 0 THEN 'queued'::sender_status ELSE 'retry'::sender_status END,
            claimed_by = NULL, updated_at = now_at
        WHERE id IN (SELECT id FROM sender_emails
                     WHERE status = 'sending' AND attempt_id IS NULL
                       AND claimed_at < now_at - make_interval(secs => p_older_than_s)
                     FOR NO KEY UPDATE SKIP LOCKED)
        RETURNING id
    )
    SELECT count(*) INTO requeued
    FROM (SELECT sender_event(id, 'swept', 'requeued: no attempt started', p_now) FROM stale) s;
    WITH stale AS (
        UPDATE sender_emails SET status = 'unconfirmed', updated_at = now_at
        WHERE id IN (SELECT id FROM sender_emails e
                     WHERE status = 'sending' AND attempt_id IS NOT NULL
                       AND coalesce(attempt_started_at, claimed_at) < now_at - make_interval(secs => p_older_than_s)
                       AND NOT EXISTS (SELECT 1 FROM sender_sent WHERE email_id = e.id)
                     FOR NO KEY UPDATE SKIP LOCKED)
        RETURNING id
    )
    SELECT count(*) INTO unconfirmed
    FROM (SELECT sender_event(id, 'swept', 'unconfirmed: the attempt had started; check Sent Items', p_now)
          FROM stale) s;
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
        PERFORM sender_suppress(r.address, p_event || ' (' || p_source || ')', p_now);
    END IF;
    IF target IS NOT NULL AND after IS NOT NULL AND after = target THEN
        RETURN 'applied';
    END IF;
    RETURN 'recorded';
END
$$;

CREATE OR REPLACE FUNCTION sender_placement_enqueue(p_test bigint, p_token text, p_mailbox text, p_group text, p_seed text,
                                         p_provider text, p_subject text, p_body text, p_fields jsonb,
                                         p_now timestamptz DEFAULT NULL, OUT outcome text, OUT email_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    campaign bigint := (SELECT id FROM sender_campaigns WHERE name = 'enqueue');
    lead_id text := 'placement:' || p_token;
BEGIN
    IF sender_is_suppressed(p_seed) THEN
        outcome := 'suppressed';
        INSERT INTO sender_placement_results (test_id, mailbox, seed, provider, token, placement, detail, checked_at)
        VALUES (p_test, lower(p_mailbox), lower(p_seed), p_provider, p_token, 'not_sent',
                'the seed is suppressed in the ledger', now_at);
        RETURN;
    END IF;
    -- p_fields: a campaign step's merge fields for the seed as a lead (the agent renders the step with them and the
    -- unsubscribe link, as any lead's); NULL: the row's text as it is
    INSERT INTO sender_leads (campaign_id, lead, address, fields, created_at)
    VALUES (campaign, lead_id, lower(p_seed), p_fields, now_at);
    INSERT INTO sender_emails (campaign_id, lead, step, address, mailbox_group, subject, body, not_before, due_at,
                               pinned_mailbox, created_at, updated_at)
    VALUES (campaign, lead_id, 1, lower(p_seed), p_group, p_subject, p_body, now_at, now_at, lower(p_mailbox),
            now_at, now_at)
    RETURNING id INTO email_id;
    PERFORM sender_event(email_id, 'queued', 'placement test', p_now);
    INSERT INTO sender_placement_results (test_id, mailbox, seed, provider, token, email_id)
    VALUES (p_test, lower(p_mailbox), lower(p_seed), p_provider, p_token, email_id);
    outcome := 'queued';
END
$$;

