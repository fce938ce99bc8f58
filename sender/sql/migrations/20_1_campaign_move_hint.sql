-- Version 20: a refused campaign move names the one that does what was meant (issue 43): `start` on a paused
-- campaign points to `resume`, `resume` or `pause` on a draft to `start`; a stopped campaign says it stays stopped.

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
        FOR lead_row IN SELECT lead FROM sender_leads WHERE campaign_id = c.id AND ended IS NULL LOOP
            PERFORM sender_end_sequence(c.id, lead_row.lead, 'stopped', now_at);
        END LOOP;
    END IF;
    RETURN target;
END
$$;
