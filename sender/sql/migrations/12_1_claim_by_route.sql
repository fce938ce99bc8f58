-- Version 12: the claim reads only the routes the agent serves (issue 30). A row's route is its group (a first step,
-- or a follow-up no mailbox is pinned to) or the mailbox it is pinned to; sender_emails_due_kind, one index for
-- every route, is replaced by one part per route (sender_emails_due_group, sender_emails_due_pinned), and
-- sender_claim reads the oldest due row of each route it serves, one index step each, then claims from the oldest.
-- Version 8's claim walked past every older due row of a group it does not serve, or pinned to another host's
-- mailbox: 500,006 index entries a claim beside 1,000,000 due rows of another group (bench/ledger_scale.py).
-- Built before the old index is dropped, so no claim meanwhile is left without one; independent of versions 9-11.

CREATE INDEX sender_emails_due_group ON sender_emails (mailbox_group, (least(step, 2)), due_at, id, not_before)
WHERE status IN ('queued', 'retry') AND pinned_mailbox IS NULL;
CREATE INDEX sender_emails_due_pinned ON sender_emails (pinned_mailbox, (least(step, 2)), due_at, id, not_before)
WHERE status IN ('queued', 'retry') AND pinned_mailbox IS NOT NULL;
DROP INDEX sender_emails_due_kind;

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
    groups text[] := p_groups;
    mailboxes text[] := p_mailboxes;
    turn bigint;
    followups_turn bigint[];  -- the running campaigns whose share gives this turn to a follow-up
    first_turn bigint[];      -- the others: to a first step
    agreed boolean;           -- one of the two is empty: no campaign filter
    kinds integer[];          -- the kinds a pass looks at, least(step, 2): 1 a first step, 2 a follow-up
    first_kind integer;       -- of those, the one whose rows go first
    campaigns bigint[];
    route_kinds integer[];    -- the routes with a due row of a kind, in the order they are tried:
    route_pinned boolean[];   -- a mailbox's (true) or a group's,
    route_names text[];
    claimed boolean;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    -- Any group, any mailbox: the routes that hold due rows, one index step each (a skip scan).
    IF groups IS NULL THEN
        WITH RECURSIVE g(name) AS (
            SELECT min(mailbox_group) FROM sender_emails
            WHERE status IN ('queued', 'retry') AND pinned_mailbox IS NULL
            UNION ALL
            SELECT (SELECT min(mailbox_group) FROM sender_emails
                    WHERE status IN ('queued', 'retry') AND pinned_mailbox IS NULL AND mailbox_group > g.name)
            FROM g WHERE g.name IS NOT NULL
        )
        SELECT coalesce(array_agg(name), '{}') INTO groups FROM g WHERE name IS NOT NULL;
    END IF;
    IF mailboxes IS NULL THEN
        WITH RECURSIVE m(name) AS (
            SELECT min(pinned_mailbox) FROM sender_emails
            WHERE status IN ('queued', 'retry') AND pinned_mailbox IS NOT NULL
            UNION ALL
            SELECT (SELECT min(pinned_mailbox) FROM sender_emails
                    WHERE status IN ('queued', 'retry') AND pinned_mailbox > m.name)
            FROM m WHERE m.name IS NOT NULL
        )
        SELECT coalesce(array_agg(name), '{}') INTO mailboxes FROM m WHERE name IS NOT NULL;
    END IF;
    FOR n IN 1 .. p_limit LOOP
        turn := nextval('sender_claim_turns');
        SELECT array_agg(id) FILTER (WHERE sender_followups_turn(turn, followups_share)),
               array_agg(id) FILTER (WHERE NOT sender_followups_turn(turn, followups_share))
        INTO followups_turn, first_turn
        FROM sender_campaigns WHERE state = 'running';
        agreed := followups_turn IS NULL OR first_turn IS NULL;
        claimed := false;
        -- the passes: when the campaigns agree, one that looks at both kinds, the turn's first; else the turn's
        -- kind of each campaign, then the other kind of each
        FOR pass IN 1 .. CASE WHEN agreed THEN 1 ELSE 4 END LOOP
            IF agreed THEN
                EXIT WHEN followups_turn IS NULL AND first_turn IS NULL;  -- no campaign running
                first_kind := CASE WHEN followups_turn IS NOT NULL THEN 2 ELSE 1 END;
                kinds := ARRAY[first_kind, 3 - first_kind];
            ELSE
                first_kind := CASE WHEN pass IN (1, 3) THEN 2 ELSE 1 END;
                kinds := ARRAY[first_kind];
                campaigns := CASE WHEN pass IN (1, 4) THEN followups_turn ELSE first_turn END;
            END IF;
            -- each route's oldest due row of each kind, the first kind's first, then oldest first; a row another
            -- agent is claiming right now may be among them, and the claim below takes the next of its route
            -- (ordered in the aggregate: a Sort node, which enable_sort = off prices out, would cost a JIT
            -- compilation at each call, 0.6 s)
            SELECT array_agg(oldest.kind ORDER BY oldest.kind <> first_kind, oldest.due_at, oldest.id),
                   array_agg(oldest.pinned ORDER BY oldest.kind <> first_kind, oldest.due_at, oldest.id),
                   array_agg(oldest.name ORDER BY oldest.kind <> first_kind, oldest.due_at, oldest.id)
            INTO route_kinds, route_pinned, route_names
            FROM (
                    SELECT k.kind, false AS pinned, g.name, e.due_at, e.id
                    FROM unnest(groups) AS g(name) CROSS JOIN unnest(kinds) AS k(kind) CROSS JOIN LATERAL (
                        SELECT due_at, id FROM sender_emails
                        WHERE status IN ('queued', 'retry') AND pinned_mailbox IS NULL AND mailbox_group = g.name
                          AND least(step, 2) = k.kind AND due_at <= now_at AND not_before <= now_at
                          AND (agreed OR campaign_id = ANY (campaigns))
                        ORDER BY due_at, id LIMIT 1) AS e
                    UNION ALL
                    SELECT 2, true, m.name, e.due_at, e.id
                    FROM unnest(mailboxes) AS m(name) CROSS JOIN LATERAL (
                        SELECT due_at, id FROM sender_emails
                        WHERE status IN ('queued', 'retry') AND pinned_mailbox = m.name
                          AND least(step, 2) = 2 AND due_at <= now_at AND not_before <= now_at
                          AND (agreed OR campaign_id = ANY (campaigns))
                          AND (p_groups IS NULL OR mailbox_group = ANY (p_groups))
                        ORDER BY due_at, id LIMIT 1) AS e
                    WHERE 2 = ANY (kinds)
                ) AS oldest;
            FOR i IN 1 .. coalesce(cardinality(route_names), 0) LOOP
                IF route_pinned[i] THEN
                    RETURN QUERY
                    UPDATE sender_emails SET status = 'sending', claimed_at = now_at, claimed_by = p_worker,
                                             updated_at = now_at
                    WHERE id IN (
                        SELECT id FROM sender_emails
                        WHERE status IN ('queued', 'retry') AND pinned_mailbox = route_names[i]
                          AND least(step, 2) = route_kinds[i] AND due_at <= now_at AND not_before <= now_at
                          AND (agreed OR campaign_id = ANY (campaigns))
                          AND (p_groups IS NULL OR mailbox_group = ANY (p_groups))
                        ORDER BY due_at, id
                        LIMIT 1
                        FOR UPDATE SKIP LOCKED
                    )
                    RETURNING *;
                ELSE
                    RETURN QUERY
                    UPDATE sender_emails SET status = 'sending', claimed_at = now_at, claimed_by = p_worker,
                                             updated_at = now_at
                    WHERE id IN (
                        SELECT id FROM sender_emails
                        WHERE status IN ('queued', 'retry') AND pinned_mailbox IS NULL
                          AND mailbox_group = route_names[i]
                          AND least(step, 2) = route_kinds[i] AND due_at <= now_at AND not_before <= now_at
                          AND (agreed OR campaign_id = ANY (campaigns))
                        ORDER BY due_at, id
                        LIMIT 1
                        FOR UPDATE SKIP LOCKED
                    )
                    RETURNING *;
                END IF;
                IF FOUND THEN
                    claimed := true;
                    EXIT;
                END IF;
            END LOOP;
            EXIT WHEN claimed;
        END LOOP;
        EXIT WHEN NOT claimed;
    END LOOP;
END
$$;
