-- Version 15: one active sequence per address on `sender enqueue` too (issue 40). Two lead ids of one person
-- (crm-1 at ana@rcpt.example, crm-2 at Ana@RCPT.example) were both queued; campaign files already refused a second
-- active sequence of an address. The rule's "active" is now one view, sender_active_leads, read by add-leads as
-- before and by sender_enqueue, which refuses a new lead id for an address another `enqueue` lead holds active
-- (same_person, naming it) unless the caller allows it (p_allow_same_person: a new parameter, so the function is
-- made again; it returns the outcome and that lead).
CREATE VIEW sender_active_leads AS
SELECT l.id, l.address, l.campaign_id, l.lead, c.kind
FROM sender_leads l JOIN sender_campaigns c ON c.id = l.campaign_id
WHERE l.ended IS NULL AND c.state <> 'stopped';

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

DROP FUNCTION sender_enqueue(text, integer, text, text, text, text, timestamptz, timestamptz);

CREATE FUNCTION sender_enqueue(p_lead text, p_step integer, p_recipient text, p_group text,
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
    IF sender_is_suppressed(p_recipient) THEN
        outcome := 'suppressed';
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM sender_leads WHERE campaign_id = campaign AND lead = p_lead) THEN
        PERFORM pg_advisory_xact_lock(hashtext('sender_enqueue'));
        IF NOT coalesce(p_allow_same_person, false) THEN
            SELECT a.lead INTO first_lead FROM sender_active_leads a
            WHERE a.address = lower(p_recipient) AND a.campaign_id = campaign AND a.lead <> p_lead
            ORDER BY a.id LIMIT 1;
            IF first_lead IS NOT NULL THEN
                outcome := 'same_person';
                RETURN;
            END IF;
        END IF;
    END IF;
    INSERT INTO sender_leads (campaign_id, lead, address, created_at)
    VALUES (campaign, p_lead, lower(p_recipient), now_at)
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
    INSERT INTO sender_emails (campaign_id, lead, step, recipient, mailbox_group, subject, body, not_before,
                               due_at, pinned_mailbox, created_at, updated_at)
    SELECT campaign, p_lead, p_step, lower(p_recipient), p_group, p_subject, p_body, due.at, due.at,
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
