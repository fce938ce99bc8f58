-- Version 17: clicks and opens (issue 41, docs/tracking.md). A click on a tracked link or a load of the open image
-- is recorded in sender_engagement with its verdict (human, scanner, apple_proxy, google_proxy) and the rule that
-- gave it, and in the row's history (`clicked`, `opened`); it never changes a row's status or its sequence
-- (sender_record_engagement). A relay's `opened` and `clicked` are feedback events, recorded only.

ALTER TABLE sender_feedback DROP CONSTRAINT sender_feedback_event_check;
ALTER TABLE sender_feedback ADD CONSTRAINT sender_feedback_event_check
    CHECK (event IN ('sent', 'delivered', 'deferred', 'auto_replied', 'replied', 'bounced', 'unsubscribed',
                     'complained', 'left', 'colleague_replied', 'opened', 'clicked'));

CREATE TABLE sender_engagement (
    id bigserial PRIMARY KEY,
    email_id bigint NOT NULL REFERENCES sender_emails (id),
    kind text NOT NULL CHECK (kind IN ('click', 'open')),
    link integer CHECK ((kind = 'click') = (link IS NOT NULL) AND (link IS NULL OR link >= 0)),
    verdict text NOT NULL CHECK (verdict IN ('human', 'scanner', 'apple_proxy', 'google_proxy')),
    rule text NOT NULL DEFAULT '',
    at timestamptz NOT NULL
);
CREATE INDEX sender_engagement_email ON sender_engagement (email_id, at);

CREATE FUNCTION sender_record_engagement(p_email bigint, p_kind text, p_link integer, p_verdict text, p_rule text,
                                         p_relabel_since timestamptz, p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sender_emails WHERE id = p_email) THEN
        RETURN 'no_row';
    END IF;
    INSERT INTO sender_engagement (email_id, kind, link, verdict, rule, at)
    VALUES (p_email, p_kind, p_link, p_verdict, coalesce(p_rule, ''), now_at);
    -- every link of the message in one burst: the clicks of the burst before this one were a scanner's too
    IF p_relabel_since IS NOT NULL THEN
        UPDATE sender_engagement SET verdict = p_verdict, rule = coalesce(p_rule, '')
        WHERE email_id = p_email AND kind = p_kind AND at >= p_relabel_since AND verdict <> p_verdict;
    END IF;
    PERFORM sender_event(p_email, CASE p_kind WHEN 'click' THEN 'clicked' ELSE 'opened' END,
                         concat_ws(' ', CASE WHEN p_link IS NOT NULL THEN 'link ' || (p_link + 1) END,
                                   p_verdict || CASE WHEN coalesce(p_rule, '') <> '' THEN ' (' || p_rule || ')'
                                                     ELSE '' END), p_now);
    RETURN 'recorded';
END
$$;
