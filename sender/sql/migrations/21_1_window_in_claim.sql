-- Version 21: the sending window is decided in the claim (issue 44). Before, sender_claim took a due row and the
-- agent's window check (sender/sending/windows.py) gave it back when its lead's window was closed; now the window's
-- open instants are data (sender_window_intervals, written from sender.campaigns.window.Schedule by
-- sender.ledger.window_intervals) and the claim passes over a row outside them. A file campaign applied before this
-- version has no intervals yet: its rows wait (fail closed) until the agent's first sweep cycle writes them.

ALTER TABLE sender_campaigns
    ADD COLUMN always_open boolean NOT NULL DEFAULT false,
    ADD COLUMN window_hash text;
UPDATE sender_campaigns SET always_open = true WHERE kind = 'enqueue';
ALTER TABLE sender_campaigns
    ADD CONSTRAINT sender_campaigns_enqueue_always_open CHECK (kind = 'file' OR always_open);

-- The sending window as data the claim reads (version 21): the instants a campaign's window is open, per lead time
-- zone (the lead's `timezone` column as stored, '' for none: the campaign's), from sender.campaigns.window.Schedule,
-- the one place the window's rules live (DST gaps and repeats, skip dates). Written by sender.ledger.window_intervals
-- when a campaign is applied and when leads are added, for two weeks ahead, and extended by the agent's sweep cycle.
-- The intervals of one campaign and zone never overlap. No interval at an instant: closed (or not known: closed).
CREATE TABLE sender_window_intervals (
    campaign_id bigint NOT NULL REFERENCES sender_campaigns (id),
    lead_timezone text NOT NULL,
    opens timestamptz NOT NULL,
    closes timestamptz NOT NULL CHECK (closes > opens),
    PRIMARY KEY (campaign_id, lead_timezone, opens)
);
-- How far ahead each campaign's zone is known: instants before known_until are open exactly inside an interval.
CREATE TABLE sender_window_horizons (
    campaign_id bigint NOT NULL REFERENCES sender_campaigns (id),
    lead_timezone text NOT NULL,
    known_until timestamptz NOT NULL,
    PRIMARY KEY (campaign_id, lead_timezone)
);

-- When a lead's window is next open at or after `p_at` (version 21): `p_at` itself when open; the opening of the
-- first interval after it; else, when nothing is known that far, the end of what is known (the sweep cycle extends
-- it; nothing sooner can be claimed), or NULL when that is past (or nothing was ever written: fail closed).
CREATE FUNCTION sender_window_next(p_campaign bigint, p_lead_timezone text, p_at timestamptz, p_now timestamptz)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT greatest(w.opens, p_at) FROM sender_window_intervals w
         WHERE w.campaign_id = p_campaign AND w.lead_timezone = p_lead_timezone AND w.closes > p_at
         ORDER BY w.opens LIMIT 1),
        (SELECT greatest(h.known_until, p_at) FROM sender_window_horizons h
         WHERE h.campaign_id = p_campaign AND h.lead_timezone = p_lead_timezone AND h.known_until > p_now))
$$;


-- The sweep cycle's share of the window (version 21): each due row of a campaign with a window that is closed now
-- for its lead waits, not_before, until the window next opens (sender_window_next), so the claim's index passes it
-- over with the rows put back instead of looking it up again at every claim until then (each look, a lead and an
-- interval read: 20-26 ms a claim beside 5,000 such rows, 3 ms once moved). Never claimed, so no event. A row
-- whose zone has nothing known stays as it is (closed: the claim still passes over it). The count moved.
CREATE FUNCTION sender_window_defer(p_now timestamptz DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    moved integer;
BEGIN
    WITH closed AS (
        SELECT e.id, sender_window_next(e.campaign_id, coalesce(l.timezone, ''), now_at, now_at) AS opens
        FROM sender_emails e
        JOIN sender_campaigns c ON c.id = e.campaign_id AND NOT c.always_open
        JOIN sender_leads l ON l.campaign_id = e.campaign_id AND l.lead = e.lead
        WHERE e.status IN ('queued', 'retry') AND e.not_before <= now_at
        FOR NO KEY UPDATE OF e SKIP LOCKED
    )
    UPDATE sender_emails e SET not_before = closed.opens, updated_at = now_at
    FROM closed WHERE e.id = closed.id AND closed.opens > now_at;
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN moved;
END
$$;

-- The claim passes over a row whose lead's window is closed.
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
                                                   WHERE l.campaign_id = sender_emails.campaign_id
                                                     AND l.lead = sender_emails.lead)
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
