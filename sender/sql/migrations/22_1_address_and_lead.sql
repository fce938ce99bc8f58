-- Version 22 (issue 44): one name for a person's address, and `lead` only ever the caller's id or the lead record.
--
-- A row's address was `sender_emails.recipient` while the lead's, the suppression's and the CLI's were `address`:
-- the row's column is `address` now. And `sender_leads.lead`, which keyed a lead in its campaign, held the address
-- in a campaign file's campaign and the caller's id in `enqueue`: a row now names its lead record
-- (`sender_emails.lead_id`, sender_leads.id), `sender_leads.lead` is the caller's id (what `ref` was; enqueue's
-- key), and `sender_leads.kind` (its campaign's) says what makes a lead one, by two partial unique indexes. Columns
-- change in place (the catalogue keeps their positions, as a fresh schema.sql has them): the row's `lead` becomes
-- `lead_id`, the lead's `lead` becomes `kind` and its `ref` becomes `lead`. Every function that read them is
-- redefined as schema.sql has it.

ALTER TABLE sender_emails RENAME COLUMN recipient TO address;
ALTER TABLE sender_emails RENAME CONSTRAINT sender_emails_recipient_check TO sender_emails_address_check;
ALTER INDEX sender_emails_recipient RENAME TO sender_emails_address;

-- The lead record. The rows' key to their lead goes first (it references the key that changes).
ALTER TABLE sender_emails DROP CONSTRAINT sender_emails_campaign_id_lead_fkey;
ALTER TABLE sender_emails DROP CONSTRAINT sender_emails_campaign_id_lead_step_key;
ALTER TABLE sender_emails DROP CONSTRAINT sender_emails_lead_check;
UPDATE sender_emails e SET lead = l.id::text FROM sender_leads l WHERE l.campaign_id = e.campaign_id AND l.lead = e.lead;
ALTER TABLE sender_emails ALTER COLUMN lead TYPE bigint USING lead::bigint;
ALTER TABLE sender_emails RENAME COLUMN lead TO lead_id;

DROP VIEW sender_active_leads;  -- it reads the column that changes; the same view again below
ALTER TABLE sender_leads DROP CONSTRAINT sender_leads_campaign_id_lead_key;
ALTER TABLE sender_leads DROP CONSTRAINT sender_leads_lead_check;
ALTER TABLE sender_leads DROP CONSTRAINT sender_leads_campaign_id_fkey;
DROP INDEX sender_leads_ref;
UPDATE sender_leads l SET ref = l.lead FROM sender_campaigns c WHERE c.id = l.campaign_id AND c.kind = 'enqueue';
UPDATE sender_leads l SET lead = c.kind FROM sender_campaigns c WHERE c.id = l.campaign_id;
ALTER TABLE sender_leads RENAME COLUMN lead TO kind;
ALTER TABLE sender_leads RENAME COLUMN ref TO lead;
ALTER TABLE sender_leads ADD CONSTRAINT sender_leads_lead_check CHECK (lead <> '');

ALTER TABLE sender_campaigns ADD CONSTRAINT sender_campaigns_id_kind_key UNIQUE (id, kind);
ALTER TABLE sender_leads
    ADD CONSTRAINT sender_leads_campaign_id_id_key UNIQUE (campaign_id, id),
    ADD CONSTRAINT sender_leads_campaign_id_kind_fkey FOREIGN KEY (campaign_id, kind)
        REFERENCES sender_campaigns (id, kind),
    ADD CONSTRAINT sender_leads_enqueue_lead_has_id CHECK (kind = 'file' OR lead IS NOT NULL);
CREATE UNIQUE INDEX sender_leads_file_address ON sender_leads (campaign_id, address) WHERE kind = 'file';
CREATE UNIQUE INDEX sender_leads_enqueue_lead ON sender_leads (campaign_id, lead) WHERE kind = 'enqueue';
CREATE INDEX sender_leads_lead ON sender_leads (lead) WHERE lead IS NOT NULL;
ALTER TABLE sender_emails
    ADD CONSTRAINT sender_emails_lead_id_step_key UNIQUE (lead_id, step),
    ADD CONSTRAINT sender_emails_campaign_id_lead_id_fkey FOREIGN KEY (campaign_id, lead_id)
        REFERENCES sender_leads (campaign_id, id);

-- One active sequence per address (version 15): the leads whose sequence goes on (not ended) in a campaign that is
-- not stopped, by address. What `campaign add-leads` (other_campaign) and `sender enqueue` (same_person) refuse a
-- second of.
CREATE VIEW sender_active_leads AS
SELECT l.id, l.address, l.campaign_id, l.lead, c.kind
FROM sender_leads l JOIN sender_campaigns c ON c.id = l.campaign_id
WHERE l.ended IS NULL AND c.state <> 'stopped';

-- A parameter's name or type is part of the function: these are dropped and made again.
DROP FUNCTION sender_enqueue(text, integer, text, text, text, text, timestamptz, boolean, timestamptz);
DROP FUNCTION sender_step_was_sent(bigint, text, integer);
DROP FUNCTION sender_end_sequence(bigint, text, text, timestamptz);

CREATE FUNCTION sender_enqueue(p_lead text, p_step integer, p_address text, p_group text,
                               p_subject text, p_body text, p_not_before timestamptz,
                               p_allow_same_person boolean DEFAULT false, p_now timestamptz DEFAULT NULL,
                               OUT outcome text, OUT first_lead text)
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    campaign bigint := (SELECT id FROM sender_campaigns WHERE name = 'enqueue');
    the_lead bigint := (SELECT id FROM sender_leads WHERE campaign_id = campaign AND kind = 'enqueue'
                                                     AND lead = p_lead);
    new_id bigint;
    new_status sender_status;
BEGIN
    IF sender_is_suppressed(p_address) THEN
        outcome := 'suppressed';
        RETURN;
    END IF;
    IF the_lead IS NULL THEN
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
        -- a new lead, or the one an enqueue of the same id added while this one waited for the lock
        INSERT INTO sender_leads (campaign_id, kind, lead, address, created_at)
        VALUES (campaign, 'enqueue', p_lead, lower(p_address), now_at)
        ON CONFLICT (campaign_id, lead) WHERE kind = 'enqueue' DO NOTHING
        RETURNING id INTO the_lead;
        IF the_lead IS NULL THEN
            SELECT id INTO the_lead FROM sender_leads WHERE campaign_id = campaign AND kind = 'enqueue'
                                                        AND lead = p_lead;
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM sender_emails WHERE lead_id = the_lead AND step = p_step) THEN
        outcome := 'duplicate';
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM sender_leads WHERE id = the_lead AND ended IS NOT NULL) THEN
        outcome := 'ended';
        RETURN;
    END IF;
    INSERT INTO sender_emails (campaign_id, lead_id, step, address, mailbox_group, subject, body, not_before,
                               due_at, pinned_mailbox, created_at, updated_at)
    SELECT campaign, the_lead, p_step, lower(p_address), p_group, p_subject, p_body, due.at, due.at,
           lower(sent.mailbox), now_at, now_at
    FROM (SELECT NULL) AS one
    LEFT JOIN LATERAL (SELECT e.mailbox, g.accepted_at FROM sender_emails e
                       JOIN sender_sent g ON g.email_id = e.id
                       WHERE e.lead_id = the_lead AND e.step = p_step - 1
                         AND e.status IN ('sent', 'delivered')) AS sent ON true
    CROSS JOIN LATERAL (SELECT greatest(coalesce(p_not_before, now_at), coalesce(sent.accepted_at, now_at)) AS at)
        AS due
    ON CONFLICT (lead_id, step) DO NOTHING
    RETURNING id, status INTO new_id, new_status;
    IF new_id IS NULL THEN
        outcome := 'duplicate';
        RETURN;
    END IF;
    PERFORM sender_event(new_id, new_status::text, '', p_now);
    outcome := new_status::text;
END
$$;

CREATE FUNCTION sender_step_was_sent(p_lead bigint, p_step integer) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM sender_emails WHERE lead_id = p_lead AND step = p_step
                   AND status IN ('sent', 'delivered'))
$$;

CREATE FUNCTION sender_end_sequence(p_lead bigint, p_reason text, p_at timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    withdrawn integer;
BEGIN
    UPDATE sender_leads SET ended = p_reason, ended_at = p_at
    WHERE id = p_lead
      AND (ended IS NULL OR (ended IN ('completed', 'unconfirmed')
                             AND p_reason IN ('replied', 'bounced', 'unsubscribed', 'complained', 'left',
                                              'colleague_replied')));
    IF p_reason = 'unconfirmed' THEN
        RETURN;
    END IF;
    WITH withdrawn AS (
        UPDATE sender_emails SET status = 'cancelled', last_error = 'the sequence ended: ' || p_reason,
                                 updated_at = p_at
        WHERE lead_id = p_lead AND status IN ('waiting', 'queued', 'retry')
        RETURNING id
    )
    SELECT count(*) FROM (SELECT sender_event(id, 'cancelled', 'the sequence ended: ' || p_reason, p_at)
                          FROM withdrawn) AS logged INTO withdrawn;
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
        SELECT i.line, i.address, i.lead, i.timezone, i.fields, CASE
            WHEN here.id IS NOT NULL THEN 'already'
            WHEN sender_is_suppressed(i.address) THEN 'suppressed'
            WHEN NOT c.allow_other_campaigns AND EXISTS (
                SELECT 1 FROM sender_active_leads a
                WHERE a.address = i.address AND a.campaign_id <> c.id AND a.kind = 'file') THEN 'other_campaign'
            ELSE 'added' END AS outcome
        FROM sender_leads_import i
        LEFT JOIN sender_leads here ON here.campaign_id = c.id AND here.kind = 'file' AND here.address = i.address
    ), added_leads AS (
        INSERT INTO sender_leads (campaign_id, kind, address, lead, timezone, fields, created_at)
        SELECT c.id, 'file', a.address, a.lead, a.timezone, a.fields, now_at FROM classified a
        WHERE a.outcome = 'added'
        RETURNING id, address
    ), created AS (
        INSERT INTO sender_emails (campaign_id, lead_id, step, address, mailbox_group, subject, body, status,
                                   not_before, due_at, created_at, updated_at)
        SELECT c.id, l.id, 1, a.address, c.mailbox_group, first.subject, first.body,
               CASE WHEN c.state = 'running' THEN 'queued'::sender_status ELSE 'waiting'::sender_status END,
               now_at, now_at, now_at, now_at
        FROM classified a JOIN added_leads l ON l.address = a.address
        WHERE a.outcome = 'added' ORDER BY a.line
        RETURNING id, status
    ), logged AS (
        INSERT INTO sender_events (email_id, at, kind, detail)
        SELECT e.id, coalesce(p_now, clock_timestamp()), e.status::text, 'added to campaign ' || p_name
        FROM created e
    )
    SELECT a.outcome, count(*), min(a.line) FROM classified a GROUP BY a.outcome;
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
    SELECT * INTO l FROM sender_leads WHERE id = r.lead_id FOR UPDATE;
    IF l.ended = 'unconfirmed' THEN
        UPDATE sender_leads SET ended = NULL, ended_at = NULL WHERE id = l.id;
    ELSIF l.ended IS NOT NULL THEN
        RETURN;
    END IF;
    -- Suppressed while this step was in flight (version 14): no follow-up is queued for it, the sequence ends.
    IF sender_is_suppressed(r.address) THEN
        PERFORM sender_end_sequence(r.lead_id, 'suppressed', p_at);
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
    WHERE lead_id = r.lead_id AND step = r.step + 1 AND status = 'waiting';
    IF FOUND OR EXISTS (SELECT 1 FROM sender_emails WHERE lead_id = r.lead_id AND step = r.step + 1) THEN
        RETURN;
    END IF;
    IF next_step.step IS NULL THEN
        IF EXISTS (SELECT 1 FROM sender_campaigns WHERE id = r.campaign_id AND kind = 'file') THEN
            PERFORM sender_end_sequence(r.lead_id, 'completed', p_at);
        END IF;
        RETURN;
    END IF;
    INSERT INTO sender_emails (campaign_id, lead_id, step, address, mailbox_group, subject, body, own_subject,
                               not_before, due_at, pinned_mailbox, created_at, updated_at)
    VALUES (r.campaign_id, r.lead_id, next_step.step, l.address, r.mailbox_group, coalesce(next_step.subject, ''),
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
        PERFORM sender_end_sequence(r.lead_id, p_event, now_at);
        UPDATE sender_leads SET ended_note = left(coalesce(p_detail, ''), 500)
        WHERE id = r.lead_id AND ended = p_event;
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
    IF EXISTS (SELECT 1 FROM sender_leads WHERE id = r.lead_id AND ended IS NOT NULL) THEN
        UPDATE sender_emails SET status = 'cancelled', updated_at = now_at WHERE id = p_email;
        PERFORM sender_event(p_email, 'cancelled', 'the sequence ended before the handoff', p_now);
        outcome := 'ended';
        RETURN;
    END IF;
    IF r.step > 1 AND NOT sender_step_was_sent(r.lead_id, r.step - 1) THEN
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

CREATE OR REPLACE FUNCTION sender_campaign_move(p_name text, p_move text, p_now timestamptz DEFAULT NULL)
RETURNS sender_campaign_state LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    c sender_campaigns;
    target sender_campaign_state;
    lead_row record;
    logged integer;
BEGIN
    SELECT * INTO c FROM sender_campaigns WHERE name = p_name FOR UPDATE;
    IF c.id IS NULL OR c.kind <> 'file' THEN
        RAISE EXCEPTION 'no campaign %; `sendhost campaign status` lists them', p_name
            USING ERRCODE = 'check_violation';
    END IF;
    target := CASE p_move WHEN 'start' THEN 'running' WHEN 'resume' THEN 'running' WHEN 'pause' THEN 'paused'
                          WHEN 'stop' THEN 'stopped' END;
    IF target IS NULL THEN
        RAISE EXCEPTION 'sender_campaign_move: unknown move %', p_move;
    END IF;
    IF c.state = target THEN
        RETURN c.state;
    END IF;
    IF c.state = 'stopped' OR (p_move = 'start' AND c.state <> 'draft')
       OR (p_move = 'resume' AND c.state <> 'paused') OR (p_move = 'pause' AND c.state <> 'running') THEN
        -- the move that does what was meant, where there is one: a paused campaign is resumed, a draft started
        RAISE EXCEPTION 'campaign % is %: it cannot %', p_name, c.state, p_move ||
            CASE WHEN c.state = 'paused' AND p_move = 'start'
                     THEN format('; `start` is for a draft: `sendhost campaign resume %s` runs it again', p_name)
                 WHEN c.state = 'draft' AND p_move IN ('resume', 'pause')
                     THEN format('; a draft is started: `sendhost campaign start %s`', p_name)
                 WHEN c.state = 'stopped' THEN '; a stopped campaign stays stopped: apply a new one to send again'
                 ELSE '' END
            USING ERRCODE = 'check_violation';
    END IF;
    UPDATE sender_campaigns SET state = target, updated_at = now_at WHERE id = c.id;
    IF target = 'running' THEN
        -- what waited for the campaign is due again; what waits for an earlier step goes on waiting (the guard)
        WITH moved AS (
            UPDATE sender_emails SET status = CASE WHEN attempts = 0 THEN 'queued'::sender_status
                                                   ELSE 'retry'::sender_status END, updated_at = now_at
            WHERE campaign_id = c.id AND status = 'waiting'
            RETURNING id, status
        )
        SELECT count(*) INTO logged
        FROM (SELECT sender_event(id, status::text, format('campaign %s: %s', p_name, p_move), p_now)
              FROM moved WHERE status <> 'waiting') AS events;
    ELSIF target = 'paused' THEN
        WITH moved AS (
            UPDATE sender_emails SET status = 'waiting', updated_at = now_at
            WHERE campaign_id = c.id AND status IN ('queued', 'retry')
            RETURNING id
        )
        SELECT count(*) INTO logged
        FROM (SELECT sender_event(id, 'waiting', format('campaign %s: paused', p_name), p_now) FROM moved) AS events;
    ELSE
        FOR lead_row IN SELECT id FROM sender_leads WHERE campaign_id = c.id AND ended IS NULL LOOP
            PERFORM sender_end_sequence(lead_row.id, 'stopped', now_at);
        END LOOP;
    END IF;
    RETURN target;
END
$$;

CREATE OR REPLACE FUNCTION sender_claim(p_worker text, p_limit integer, p_groups text[], p_mailboxes text[],
                             p_now timestamptz DEFAULT NULL)
RETURNS SETOF sender_emails
LANGUAGE plpgsql
ROWS 1
SET enable_sort = off
SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    -- the routes the agent serves: a mailbox's (pinned: the follow-ups pinned to it, and since version 19 a placement
    -- test's first steps) or a group's (its rows that no mailbox is pinned to)
    route_pinned boolean[] := array_fill(false, ARRAY[coalesce(cardinality(p_groups), 0)])
                              || array_fill(true, ARRAY[coalesce(cardinality(p_mailboxes), 0)]);
    route_names text[] := p_groups || p_mailboxes;
    turn bigint;
    followups_turn bigint[];  -- the running campaigns whose share gives this turn to a follow-up
    first_turn bigint[];      -- the others: to a first step
    agreed boolean;           -- one of the two is empty: no campaign filter
    kinds integer[];          -- the kinds a pass looks at, least(step, 2): 1 a first step, 2 a follow-up
    first_kind integer;       -- of those, the one whose rows go first
    campaigns bigint[];
    claimed boolean;
    windowed bigint[];        -- the campaigns with a sending window: their rows go only inside an interval
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT coalesce(array_agg(id), '{}') INTO windowed FROM sender_campaigns WHERE NOT always_open;
    IF p_groups IS NULL OR p_mailboxes IS NULL THEN
        -- any group or any mailbox: the routes that hold rows to claim, one index step each (a skip scan)
        WITH RECURSIVE queued(pinned, name) AS (
            (SELECT pinned_mailbox IS NOT NULL, coalesce(pinned_mailbox, mailbox_group) FROM sender_emails
             WHERE status IN ('queued', 'retry') ORDER BY 1, 2 LIMIT 1)
            UNION ALL
            SELECT next_route.* FROM queued CROSS JOIN LATERAL (
                SELECT pinned_mailbox IS NOT NULL, coalesce(pinned_mailbox, mailbox_group) FROM sender_emails
                WHERE status IN ('queued', 'retry')
                  AND (pinned_mailbox IS NOT NULL, coalesce(pinned_mailbox, mailbox_group)) > (queued.pinned,
                                                                                              queued.name)
                ORDER BY 1, 2 LIMIT 1) AS next_route
        )
        SELECT array_agg(pinned), array_agg(name) INTO route_pinned, route_names FROM queued
        WHERE CASE WHEN pinned THEN p_mailboxes IS NULL OR name = ANY (p_mailboxes)
                   ELSE p_groups IS NULL OR name = ANY (p_groups) END;
    END IF;
    FOR n IN 1 .. p_limit LOOP
        turn := nextval('sender_claim_turns');
        SELECT array_agg(id) FILTER (WHERE sender_followups_turn(turn, followups_share)),
               array_agg(id) FILTER (WHERE NOT sender_followups_turn(turn, followups_share))
        INTO followups_turn, first_turn
        FROM sender_campaigns WHERE state = 'running';
        agreed := followups_turn IS NULL OR first_turn IS NULL;
        claimed := false;
        FOR pass IN 1 .. CASE WHEN agreed THEN 1 ELSE 4 END LOOP
            IF agreed THEN
                EXIT WHEN followups_turn IS NULL AND first_turn IS NULL;  -- no campaign running
                first_kind := CASE WHEN followups_turn IS NOT NULL THEN 2 ELSE 1 END;
                kinds := ARRAY[first_kind, 3 - first_kind];
            ELSE  -- the turn's kind of each campaign, then the other kind of each
                first_kind := CASE WHEN pass IN (1, 3) THEN 2 ELSE 1 END;
                kinds := ARRAY[first_kind];
                campaigns := CASE WHEN pass IN (1, 4) THEN followups_turn ELSE first_turn END;
            END IF;
            RETURN QUERY
            UPDATE sender_emails SET status = 'sending', claimed_at = now_at, claimed_by = p_worker,
                                     updated_at = now_at
            WHERE id = (
                SELECT (array_agg(head.id ORDER BY head.kind <> first_kind, head.due_at, head.id))[1]
                FROM unnest(route_pinned, route_names) AS route(pinned, name)
                CROSS JOIN unnest(kinds) AS k(kind)
                CROSS JOIN LATERAL (
                    SELECT id, due_at, k.kind FROM sender_emails
                    WHERE status IN ('queued', 'retry')
                      AND (pinned_mailbox IS NOT NULL, coalesce(pinned_mailbox, mailbox_group))
                          = (route.pinned, route.name)
                      AND least(step, 2) = k.kind AND due_at <= now_at AND not_before <= now_at
                      AND (agreed OR campaign_id = ANY (campaigns))
                      AND (p_groups IS NULL OR mailbox_group = ANY (p_groups))  -- a pinned row's group too
                      -- inside its lead's window (version 21): the last interval of its lead's zone that opened
                      -- by now (they never overlap), one index step, still open; none known: closed
                      AND (campaign_id <> ALL (windowed) OR coalesce((
                          SELECT w.closes > now_at FROM sender_window_intervals w
                          WHERE w.campaign_id = sender_emails.campaign_id
                            AND w.lead_timezone = (SELECT coalesce(l.timezone, '') FROM sender_leads l
                                                   WHERE l.id = sender_emails.lead_id)
                            AND w.opens <= now_at
                          ORDER BY w.opens DESC LIMIT 1), false))
                    ORDER BY due_at, id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                ) AS head
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

CREATE OR REPLACE FUNCTION sender_colleague_reply(p_mailbox text, p_sender text, p_ref text, p_detail text,
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
    JOIN sender_emails e ON e.lead_id = l.id
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

CREATE OR REPLACE FUNCTION sender_due_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    lead_ended text;
BEGIN
    SELECT ended INTO lead_ended FROM sender_leads WHERE id = NEW.lead_id;
    IF lead_ended IS NOT NULL THEN
        NEW.status := 'cancelled';
        NEW.last_error := 'the sequence ended: ' || lead_ended;
    ELSIF NOT EXISTS (SELECT 1 FROM sender_campaigns WHERE id = NEW.campaign_id AND state = 'running') THEN
        NEW.status := 'waiting';
    ELSIF NEW.step > 1 AND NOT sender_step_was_sent(NEW.lead_id, NEW.step - 1) THEN
        NEW.status := 'waiting';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION sender_hold(p_email bigint, p_until timestamptz, p_why text, p_now timestamptz DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
    l sender_leads;
    moved integer;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email;
    SELECT * INTO l FROM sender_leads WHERE id = r.lead_id FOR UPDATE;
    IF l.id IS NULL OR l.ended IS NOT NULL THEN
        RETURN 0;
    END IF;
    IF l.held_until IS NULL OR p_until > l.held_until THEN
        UPDATE sender_leads SET held_until = p_until, held_why = left(coalesce(p_why, ''), 500) WHERE id = l.id;
    END IF;
    WITH held AS (
        UPDATE sender_emails SET not_before = p_until, due_at = greatest(due_at, p_until), updated_at = now_at
        WHERE lead_id = r.lead_id AND status IN ('waiting', 'queued', 'retry')
          AND not_before < p_until
        RETURNING id
    )
    SELECT count(*) INTO moved
    FROM (SELECT sender_event(id, 'held', format('until %s: %s', p_until, coalesce(p_why, '')), p_now)
          FROM held) AS logged;
    RETURN moved;
END
$$;

CREATE OR REPLACE FUNCTION sender_placement_enqueue(p_test bigint, p_token text, p_mailbox text, p_group text, p_seed text,
                                         p_provider text, p_subject text, p_body text, p_fields jsonb,
                                         p_now timestamptz DEFAULT NULL, OUT outcome text, OUT email_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    campaign bigint := (SELECT id FROM sender_campaigns WHERE name = 'enqueue');
    placement_lead text := 'placement:' || p_token;
    the_lead bigint;
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
    INSERT INTO sender_leads (campaign_id, kind, lead, address, fields, created_at)
    VALUES (campaign, 'enqueue', placement_lead, lower(p_seed), p_fields, now_at)
    RETURNING id INTO the_lead;
    INSERT INTO sender_emails (campaign_id, lead_id, step, address, mailbox_group, subject, body, not_before, due_at,
                               pinned_mailbox, created_at, updated_at)
    VALUES (campaign, the_lead, 1, lower(p_seed), p_group, p_subject, p_body, now_at, now_at, lower(p_mailbox),
            now_at, now_at)
    RETURNING id INTO email_id;
    PERFORM sender_event(email_id, 'queued', 'placement test', p_now);
    INSERT INTO sender_placement_results (test_id, mailbox, seed, provider, token, email_id)
    VALUES (p_test, lower(p_mailbox), lower(p_seed), p_provider, p_token, email_id);
    outcome := 'queued';
END
$$;

CREATE OR REPLACE FUNCTION sender_reclassify(p_email bigint, p_as text, p_note text, p_now timestamptz DEFAULT NULL)
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
        WHERE id = r.lead_id AND ended IN ('replied', 'left');
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

CREATE OR REPLACE FUNCTION sender_resolve(p_email bigint, p_sent boolean, p_note text, p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email FOR UPDATE;
    IF r.id IS NULL THEN
        RETURN 'no_row';
    END IF;
    IF r.status <> 'unconfirmed' THEN
        RETURN 'not_unconfirmed';
    END IF;
    -- once per row (sender_sent's key); the row's lock keeps a second call of it waiting for this one. The send
    -- log before the history, as sender_record_sent writes them: a month being made locks them in that order.
    IF p_sent AND NOT EXISTS (SELECT 1 FROM sender_sent WHERE email_id = p_email) THEN
        INSERT INTO sender_send_log (email_id, message_id, mailbox, source_ip, accepted_at, reply)
        VALUES (p_email, r.message_id, r.mailbox, r.source_ip, coalesce(r.attempt_started_at, now_at),
                'resolved as sent: ' || coalesce(p_note, ''));
    END IF;
    PERFORM sender_event(p_email, 'resolved', format('%s by a person: %s', CASE WHEN p_sent THEN 'sent'
                                                     ELSE 'not sent' END, coalesce(p_note, '')), p_now);
    IF p_sent THEN
        UPDATE sender_emails SET status = 'sent', last_error = NULL, updated_at = now_at WHERE id = p_email;
    ELSE
        UPDATE sender_emails SET status = 'failed', last_error = 'resolved as not sent: ' || coalesce(p_note, ''),
                                 updated_at = now_at
        WHERE id = p_email;
        UPDATE sender_leads SET ended = 'failed', ended_at = now_at
        WHERE id = r.lead_id AND ended = 'unconfirmed';
    END IF;
    RETURN 'resolved';
END
$$;

CREATE OR REPLACE FUNCTION sender_sequence_rule() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('sent', 'delivered') THEN
        IF OLD.status <> 'sent' THEN
            PERFORM sender_advance(NEW.id, NEW.updated_at);
        END IF;
    ELSE
        PERFORM sender_end_sequence(NEW.lead_id, NEW.status::text, NEW.updated_at);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION sender_window_defer(p_now timestamptz DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    moved integer;
BEGIN
    WITH closed AS (
        SELECT e.id, sender_window_next(e.campaign_id, coalesce(l.timezone, ''), now_at, now_at) AS opens
        FROM sender_emails e
        JOIN sender_campaigns c ON c.id = e.campaign_id AND NOT c.always_open
        JOIN sender_leads l ON l.id = e.lead_id
        WHERE e.status IN ('queued', 'retry') AND e.not_before <= now_at
        FOR NO KEY UPDATE OF e SKIP LOCKED
    )
    UPDATE sender_emails e SET not_before = closed.opens, updated_at = now_at
    FROM closed WHERE e.id = closed.id AND closed.opens > now_at;
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN moved;
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
