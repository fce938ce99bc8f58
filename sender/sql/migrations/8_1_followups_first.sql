-- Version 8: follow-ups first (issue 25). When a mailbox can send fewer than are due, the due follow-ups (steps >= 2)
-- go before new first steps, oldest first, and a campaign's share keeps its new leads from starving:
--   - sender_emails.due_at: when the row first became due (its not_before when created, or when its previous step's
--     send released it); a give-back (sender_unclaim), a retry's backoff and a sweep leave it, so a follow-up given
--     back keeps its place. Rows of an older ledger take their not_before: a row given back before version 8 has
--     already lost its place, once;
--   - sender_campaigns.followups_share: the campaign file's `followups_share` (default 0.8), written by
--     sender_campaign_apply (re-apply a campaign's file to store a share other than the default: the same text
--     answers `unchanged` and still writes it); `enqueue` keeps the default;
--   - sender_claim: each row it takes has a turn (sender_claim_turns, a SEQUENCE: no row that every claimer locks),
--     and a turn is a follow-up's when sender_followups_turn says so for the campaign's share; the oldest due row
--     (by due_at) of that kind, else of the other (sender_emails_due_kind, one part of the index per kind).

ALTER TABLE sender_campaigns
    ADD COLUMN followups_share numeric NOT NULL DEFAULT 0.8 CHECK (followups_share BETWEEN 0 AND 1);

ALTER TABLE sender_emails ADD COLUMN due_at timestamptz;
UPDATE sender_emails SET due_at = not_before;
ALTER TABLE sender_emails ALTER COLUMN due_at SET DEFAULT now(), ALTER COLUMN due_at SET NOT NULL;

CREATE INDEX sender_emails_due_kind ON sender_emails ((least(step, 2)), due_at, id, not_before)
WHERE status IN ('queued', 'retry');

CREATE SEQUENCE sender_claim_turns;

CREATE FUNCTION sender_followups_turn(p_turn bigint, p_share numeric) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT floor((p_turn + 1) * p_share) > floor(p_turn * p_share)
$$;

CREATE OR REPLACE FUNCTION sender_claim(p_worker text, p_limit integer, p_groups text[], p_mailboxes text[],
                             p_now timestamptz DEFAULT NULL)
RETURNS SETOF sender_emails
LANGUAGE plpgsql
ROWS 1
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    turn bigint;
    followups_turn bigint[];  -- the running campaigns whose share gives this turn to a follow-up
    first_turn bigint[];      -- the others: to a first step
    agreed boolean;           -- one of the two is empty: no campaign filter
    kind integer;             -- least(step, 2): 1 a first step, 2 a follow-up
    campaigns bigint[];
    claimed boolean;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    FOR n IN 1 .. p_limit LOOP
        turn := nextval('sender_claim_turns');
        SELECT array_agg(id) FILTER (WHERE sender_followups_turn(turn, followups_share)),
               array_agg(id) FILTER (WHERE NOT sender_followups_turn(turn, followups_share))
        INTO followups_turn, first_turn
        FROM sender_campaigns WHERE state = 'running';
        agreed := followups_turn IS NULL OR first_turn IS NULL;
        claimed := false;
        -- the passes: the turn's kind of each campaign, then the other kind of each
        FOR pass IN 1 .. 4 LOOP
            kind := CASE WHEN pass IN (1, 3) THEN 2 ELSE 1 END;
            campaigns := CASE WHEN pass IN (1, 4) THEN followups_turn ELSE first_turn END;
            CONTINUE WHEN campaigns IS NULL;
            RETURN QUERY
            UPDATE sender_emails SET status = 'sending', claimed_at = now_at, claimed_by = p_worker,
                                     updated_at = now_at
            WHERE id IN (
                SELECT id FROM sender_emails
                WHERE status IN ('queued', 'retry') AND least(step, 2) = kind
                  AND due_at <= now_at AND not_before <= now_at
                  AND (agreed OR campaign_id = ANY (campaigns))
                  AND (p_groups IS NULL OR mailbox_group = ANY (p_groups))
                  AND (p_mailboxes IS NULL OR pinned_mailbox IS NULL OR pinned_mailbox = ANY (p_mailboxes))
                ORDER BY due_at, id
                LIMIT 1
                FOR UPDATE SKIP LOCKED
            )
            RETURNING *;
            IF FOUND THEN
                claimed := true;
                EXIT;
            END IF;
        END LOOP;
        EXIT WHEN NOT claimed;
    END LOOP;
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
    SET status = CASE WHEN sender_is_suppressed(recipient) THEN 'suppressed'::sender_status
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

CREATE OR REPLACE FUNCTION sender_retry_now(p_email bigint, p_before timestamptz, p_now timestamptz DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    moved integer;
BEGIN
    WITH due AS (
        UPDATE sender_emails SET not_before = now_at, due_at = least(due_at, now_at), updated_at = now_at
        WHERE status = 'retry' AND (p_email IS NULL OR id = p_email)
          AND (p_before IS NULL OR not_before < p_before)
        RETURNING id
    )
    SELECT count(*) INTO moved FROM (SELECT sender_event(id, 'retry_now', 'made due now by a person', p_now)
                                     FROM due) AS logged;
    RETURN moved;
END
$$;

CREATE OR REPLACE FUNCTION sender_enqueue(p_lead text, p_step integer, p_recipient text, p_group text,
                                          p_subject text, p_body text, p_not_before timestamptz,
                                          p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    campaign bigint := (SELECT id FROM sender_campaigns WHERE name = 'enqueue');
    new_id bigint;
    new_status sender_status;
BEGIN
    IF sender_is_suppressed(p_recipient) THEN
        RETURN 'suppressed';
    END IF;
    INSERT INTO sender_leads (campaign_id, lead, address, created_at)
    VALUES (campaign, p_lead, lower(p_recipient), now_at)
    ON CONFLICT (campaign_id, lead) DO NOTHING;
    IF EXISTS (SELECT 1 FROM sender_emails WHERE campaign_id = campaign AND lead = p_lead AND step = p_step) THEN
        RETURN 'duplicate';
    END IF;
    IF EXISTS (SELECT 1 FROM sender_leads WHERE campaign_id = campaign AND lead = p_lead AND ended IS NOT NULL)
    THEN
        RETURN 'ended';
    END IF;
    INSERT INTO sender_emails (campaign_id, lead, step, recipient, mailbox_group, subject, body, not_before,
                               due_at, pinned_mailbox, created_at, updated_at)
    SELECT campaign, p_lead, p_step, lower(p_recipient), p_group, p_subject, p_body, due.at, due.at,
           lower(sent.mailbox), now_at, now_at
    FROM (SELECT NULL) AS one
    LEFT JOIN LATERAL (SELECT e.mailbox, g.accepted_at FROM sender_emails e
                       JOIN sender_send_log g ON g.email_id = e.id
                       WHERE e.campaign_id = campaign AND e.lead = p_lead AND e.step = p_step - 1
                         AND e.status IN ('sent', 'delivered')) AS sent ON true
    CROSS JOIN LATERAL (SELECT greatest(coalesce(p_not_before, now_at), coalesce(sent.accepted_at, now_at)) AS at)
        AS due
    ON CONFLICT (campaign_id, lead, step) DO NOTHING
    RETURNING id, status INTO new_id, new_status;
    IF new_id IS NULL THEN
        RETURN 'duplicate';
    END IF;
    PERFORM sender_event(new_id, new_status::text, '', p_now);
    RETURN new_status::text;
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
    SELECT coalesce((SELECT accepted_at FROM sender_send_log WHERE email_id = p_email), p_at) INTO sent_at;
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
                SELECT 1 FROM sender_leads l JOIN sender_campaigns o ON o.id = l.campaign_id
                WHERE l.address = i.address AND l.campaign_id <> c.id AND l.ended IS NULL AND o.kind = 'file'
                  AND o.state <> 'stopped') THEN 'other_campaign'
            ELSE 'added' END AS outcome
        FROM sender_leads_import i
        LEFT JOIN sender_leads here ON here.campaign_id = c.id AND here.lead = i.address
    ), added_leads AS (
        INSERT INTO sender_leads (campaign_id, lead, address, ref, timezone, fields, created_at)
        SELECT c.id, a.address, a.address, a.ref, a.timezone, a.fields, now_at FROM classified a
        WHERE a.outcome = 'added'
    ), created AS (
        INSERT INTO sender_emails (campaign_id, lead, step, recipient, mailbox_group, subject, body, status,
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

DROP FUNCTION sender_campaign_apply(text, text, boolean, text, jsonb, timestamptz);

CREATE FUNCTION sender_campaign_apply(p_name text, p_group text, p_allow_other boolean, p_source text,
                                      p_steps jsonb, p_followups_share numeric, p_now timestamptz DEFAULT NULL)
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
                                      created_at, updated_at)
        VALUES (p_name, p_group, p_allow_other, p_source, p_followups_share, now_at, now_at)
        RETURNING * INTO c;
        answer := 'created';
    ELSIF c.kind <> 'file' THEN
        RAISE EXCEPTION 'campaign % is built in (sendhost sender enqueue); name the file''s campaign otherwise',
                        p_name USING ERRCODE = 'check_violation';
    ELSIF c.source = p_source THEN
        UPDATE sender_campaigns SET followups_share = p_followups_share
        WHERE id = c.id AND followups_share <> p_followups_share;
        RETURN 'unchanged';
    ELSE
        UPDATE sender_campaigns SET mailbox_group = p_group, allow_other_campaigns = p_allow_other,
                                    source = p_source, followups_share = p_followups_share, updated_at = now_at
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
