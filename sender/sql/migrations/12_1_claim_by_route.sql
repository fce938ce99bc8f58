-- Version 12: the claim reads only the routes the agent serves (issue 30). A row's route is the mailbox it is pinned
-- to, else its group (a first step, or a follow-up no mailbox is pinned to); sender_emails_due_kind, ordered by
-- kind for every route at once, is replaced by sender_emails_due_route, ordered by route first, and sender_claim
-- reads the oldest due row of each route it serves, one index step each, and claims the oldest of them. Version
-- 8's claim walked past every older due row of a group it does not serve, or pinned to another host's mailbox:
-- 500,006 index entries a claim beside 1,000,000 due rows of another group (bench/ledger_scale.py). The new index
-- is built before the old one is dropped, so no claim meanwhile is left without one; independent of versions 9-11.

CREATE INDEX sender_emails_due_route ON sender_emails ((pinned_mailbox IS NOT NULL),
                                                        (coalesce(pinned_mailbox, mailbox_group)),
                                                        (least(step, 2)), due_at, id, not_before)
WHERE status IN ('queued', 'retry');
DROP INDEX sender_emails_due_kind;

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
    -- the routes the agent serves: a mailbox's (pinned: the follow-ups pinned to it) or a group's (its rows that no
    -- mailbox is pinned to)
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
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
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
                    ORDER BY due_at, id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                ) AS head
                WHERE NOT (route.pinned AND k.kind = 1)  -- a row is pinned from its second step on
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
