-- Version 19: placement tests on seed mailboxes (issue 42): sender_placement_tests, sender_placement_results,
-- sender_placement_rests and the functions that write them (begin, enqueue, record, finish, rest, lift); sender_claim
-- reads the first steps of a mailbox's route too.

CREATE TABLE sender_placement_tests (
    id bigserial PRIMARY KEY,
    started_at timestamptz NOT NULL,
    wait_s integer NOT NULL CHECK (wait_s >= 0),
    campaign text,  -- the campaign whose step was rendered for the seeds; NULL: a neutral text
    step integer CHECK (step >= 1),
    finished_at timestamptz
);

CREATE TABLE sender_placement_results (
    id bigserial PRIMARY KEY,
    test_id bigint NOT NULL REFERENCES sender_placement_tests (id),
    mailbox text NOT NULL CHECK (mailbox = lower(mailbox)),
    seed text NOT NULL CHECK (seed = lower(seed)),
    provider text NOT NULL,
    token text NOT NULL UNIQUE,  -- in the message's text: how it is found in the seed
    email_id bigint REFERENCES sender_emails (id),  -- the row the agent sends; NULL: refused at enqueue
    -- pending: not looked for yet; not_sent: the agent never handed it over; not_found: not in any folder when the
    -- wait ended (never `spam`: nobody saw it there); unknown: the seed could not be searched
    placement text NOT NULL DEFAULT 'pending'
        CHECK (placement IN ('pending', 'inbox', 'spam', 'category', 'other', 'not_found', 'not_sent', 'unknown')),
    folder text,
    category text,  -- Gmail's category (X-GM-LABELS), when the server offers it
    found_after_s double precision,  -- from the submission's acceptance to the seed's arrival time
    spf text,
    dkim text,
    dkim_domain text,  -- the signing domain (header.d) of the DKIM result read
    dmarc text,
    arc text,
    auth_results text,  -- the trusted Authentication-Results header(s) as the seed's provider wrote them
    detail text NOT NULL DEFAULT '',
    checked_at timestamptz,
    UNIQUE (test_id, mailbox, seed)
);
CREATE INDEX sender_placement_results_mailbox ON sender_placement_results (mailbox, test_id);

-- Queue one placement message: the seed is no lead of any campaign file; its row is an `enqueue` row of its own
-- lead (`placement:<token>`), pinned to the mailbox under test, so only that mailbox sends it, through the
-- agent's send path (its warm-up reservation counts as any send's). A suppressed seed is recorded `not_sent`.
CREATE FUNCTION sender_placement_enqueue(p_test bigint, p_token text, p_mailbox text, p_group text, p_seed text,
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
    INSERT INTO sender_emails (campaign_id, lead, step, recipient, mailbox_group, subject, body, not_before, due_at,
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

-- What a seed's folders said of one placement message.
CREATE FUNCTION sender_placement_record(p_token text, p_placement text, p_folder text, p_category text,
                                        p_found_after_s double precision, p_spf text, p_dkim text, p_dkim_domain text,
                                        p_dmarc text, p_arc text, p_auth_results text, p_detail text,
                                        p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE sql AS $$
    UPDATE sender_placement_results
    SET placement = p_placement, folder = p_folder, category = p_category, found_after_s = p_found_after_s,
        spf = p_spf, dkim = p_dkim, dkim_domain = p_dkim_domain, dmarc = p_dmarc, arc = p_arc,
        auth_results = p_auth_results, detail = coalesce(p_detail, ''), checked_at = coalesce(p_now, now())
    WHERE token = p_token;
$$;

-- A mailbox rested by its placement (sendhost_placement.rest_below): why, on which tests, and when it was lifted.
CREATE TABLE sender_placement_rests (
    id bigserial PRIMARY KEY,
    mailbox text NOT NULL CHECK (mailbox = lower(mailbox)),
    rested_at timestamptz NOT NULL,
    how text NOT NULL CHECK (how IN ('halved', 'paused')),
    reason text NOT NULL,
    tests bigint[] NOT NULL,
    lifted_at timestamptz,
    lifted_by text
);
CREATE UNIQUE INDEX sender_placement_rests_open ON sender_placement_rests (mailbox) WHERE lifted_at IS NULL;

-- A test begins, and ends (every job role writes only through functions, sql/roles.sql).
CREATE FUNCTION sender_placement_begin(p_wait_s integer, p_campaign text, p_step integer,
                                       p_now timestamptz DEFAULT NULL) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO sender_placement_tests (started_at, wait_s, campaign, step)
    VALUES (coalesce(p_now, now()), p_wait_s, p_campaign, p_step) RETURNING id;
$$;

CREATE FUNCTION sender_placement_finish(p_test bigint, p_now timestamptz DEFAULT NULL) RETURNS void
LANGUAGE sql AS $$
    UPDATE sender_placement_tests SET finished_at = coalesce(p_now, now()) WHERE id = p_test;
$$;

-- Rest a mailbox (one open rest at a time: true when this one is new), or lift its open rest (true when it had one).
CREATE FUNCTION sender_placement_rest(p_mailbox text, p_how text, p_reason text, p_tests bigint[],
                                      p_now timestamptz DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sender_placement_rests (mailbox, rested_at, how, reason, tests)
    VALUES (lower(p_mailbox), coalesce(p_now, now()), p_how, p_reason, p_tests)
    ON CONFLICT (mailbox) WHERE lifted_at IS NULL DO NOTHING;
    RETURN FOUND;
END
$$;

CREATE FUNCTION sender_placement_lift(p_mailbox text, p_by text, p_now timestamptz DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sender_placement_rests SET lifted_at = coalesce(p_now, now()), lifted_by = p_by
    WHERE mailbox = lower(p_mailbox) AND lifted_at IS NULL;
    RETURN FOUND;
END
$$;

-- A placement test's message is a first step pinned to the mailbox under test: the claim reads the first steps of a
-- mailbox's route too (before, a row was pinned only from its second step on, and its route's first steps were
-- never looked at). One more index step per mailbox route, on an index ordered by route then kind.
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
