-- Named queries of campaigns and of the answers for people (sender.ledger.campaigns, sender.ledger.answers);
-- loaded with queries.sql. %(now)s is the ledger's clock (NULL: the database's now()).

-- name: campaign_source
SELECT source FROM sender_campaigns WHERE name = %(name)s AND kind = 'file';

-- name: lead_lacking_field
-- A lead still going that has no value for a field a changed step now needs.
SELECT l.address FROM sender_leads l JOIN sender_campaigns c ON c.id = l.campaign_id
WHERE c.name = %(name)s AND l.ended IS NULL AND coalesce(btrim(l.fields ->> %(field)s), '') = ''
ORDER BY l.id LIMIT 1;

-- name: campaign_apply
SELECT sender_campaign_apply(%(name)s, %(group)s, %(allow)s, %(source)s, %(steps)s, %(followups_share)s,
                             %(stop_on_domain_reply)s, %(now)s);

-- name: leads_import_timeout
-- The import's statements may take longer than the ledger's tiny ones (sender.ledger.campaigns): for this
-- transaction only.
SELECT set_config('statement_timeout', %(ms)s, true);

-- name: leads_import_table
CREATE TEMPORARY TABLE sender_leads_import (
    line integer NOT NULL, address text NOT NULL, lead text, timezone text, fields jsonb, outcome text
) ON COMMIT DROP;

-- name: leads_import_copy
COPY sender_leads_import (line, address, lead, timezone, fields) FROM STDIN;

-- name: add_leads
SELECT outcome, leads, first_line FROM sender_add_leads(%(name)s, %(now)s);

-- name: lead_other_campaign
-- The active campaign (running, paused or draft, its sequence not ended: sender_active_leads) other than `name`
-- that holds `address`, the one add-leads names for its first lead refused as in another active campaign.
SELECT c.name FROM sender_active_leads a JOIN sender_campaigns c ON c.id = a.campaign_id
WHERE a.address = %(address)s AND c.name <> %(name)s ORDER BY c.name LIMIT 1;

-- name: campaign_move
SELECT sender_campaign_move(%(name)s, %(move)s, %(now)s)::text;

-- name: campaign_names
SELECT name FROM sender_campaigns WHERE kind = 'file' ORDER BY name;

-- name: campaign_head
SELECT c.state::text, coalesce(c.mailbox_group, ''), (SELECT count(*) FROM sender_leads WHERE campaign_id = c.id)
FROM sender_campaigns c WHERE c.name = %(name)s;

-- name: campaign_ended
SELECT l.ended, count(*) FROM sender_leads l JOIN sender_campaigns c ON c.id = l.campaign_id
WHERE c.name = %(name)s AND l.ended IS NOT NULL GROUP BY l.ended ORDER BY l.ended;

-- name: campaign_steps
-- Per step, what became of its rows (the columns of `campaign status`): sending counts as queued, delivered as
-- sent, complained as unsubscribed.
SELECT e.step, CASE e.status WHEN 'sending' THEN 'queued' WHEN 'retry' THEN 'queued' WHEN 'delivered' THEN 'sent'
                             WHEN 'complained' THEN 'unsubscribed' ELSE e.status::text END, count(*)
FROM sender_emails e JOIN sender_campaigns c ON c.id = e.campaign_id
WHERE c.name = %(name)s GROUP BY 1, 2 ORDER BY 1, 2;

-- name: campaign_mailboxes
-- Per mailbox: the campaign's sends, and the leads' later steps waiting to go from it. Sends from sender_sent,
-- kept when the send log's month is retired (version 13).
SELECT mailbox, sum(sent), sum(waiting) FROM (
    SELECT lower(g.mailbox) AS mailbox, 1 AS sent, 0 AS waiting
    FROM sender_sent g JOIN sender_emails e ON e.id = g.email_id JOIN sender_campaigns c ON c.id = e.campaign_id
    WHERE c.name = %(name)s
    UNION ALL
    SELECT e.pinned_mailbox, 0, 1 FROM sender_emails e JOIN sender_campaigns c ON c.id = e.campaign_id
    WHERE c.name = %(name)s AND e.pinned_mailbox IS NOT NULL AND e.status IN ('waiting', 'queued', 'retry')
) AS per GROUP BY mailbox ORDER BY mailbox;

-- name: reassign
SELECT sender_reassign(%(name)s, %(from)s, %(to)s, %(now)s);

-- name: resolve
SELECT sender_resolve(%(id)s, %(sent)s, %(note)s, %(now)s);

-- name: retry_now
SELECT sender_retry_now(%(id)s, %(before)s, %(now)s);

-- name: unconfirmed_rows
-- Rows waiting for a person's verdict, with what is known of their last attempt.
SELECT e.id, c.name, l.lead, e.step, e.address, e.mailbox, e.source_ip, e.attempt_started_at, e.message_id,
       coalesce(e.last_error, '')
FROM sender_emails e JOIN sender_campaigns c ON c.id = e.campaign_id JOIN sender_leads l ON l.id = e.lead_id
WHERE e.status = 'unconfirmed' ORDER BY e.attempt_started_at NULLS LAST, e.id;

-- name: lead_rows
-- Every row of every lead of a person, by address or by the caller's id, in campaign and step order; what ended
-- the lead's sequence, and an automatic reply's hold (version 16).
SELECT c.name, l.id AS lead_id, l.lead, l.address, l.ended, l.ended_at, l.ended_note, l.held_until, l.held_why, l.timezone,
       e.id, e.step, e.status::text, e.not_before, e.due_at, e.mailbox_group,
       e.mailbox, e.pinned_mailbox, e.message_id, e.sent_subject, g.accepted_at
FROM sender_leads l JOIN sender_campaigns c ON c.id = l.campaign_id
LEFT JOIN sender_emails e ON e.lead_id = l.id
LEFT JOIN sender_sent g ON g.email_id = e.id
WHERE l.address = lower(%(who)s) OR l.lead = %(who)s
ORDER BY c.name, l.address, l.id, e.step;

-- name: conflict_rows
-- Rows the agent settled as not handed over (failed, suppressed, cancelled) that a relay or the inbox later
-- reported sent or delivered: the rank guard kept the agent's answer from the submission server and recorded the
-- report (version 14); a person decides which was right. One line per report, oldest first.
SELECT e.id, c.name, l.lead, e.step, e.address, e.mailbox, e.status::text, coalesce(e.last_error, ''), f.event,
       f.source, f.occurred_at, f.detail
FROM sender_feedback f
JOIN sender_emails e ON e.id = f.email_id
JOIN sender_leads l ON l.id = e.lead_id
JOIN sender_campaigns c ON c.id = e.campaign_id
WHERE f.event IN ('sent', 'delivered') AND f.source <> 'agent' AND e.status IN ('failed', 'suppressed', 'cancelled')
ORDER BY f.occurred_at, f.id;

-- name: campaign_worked
-- What worked (docs/tracking.md#what-worked): per step and sending mailbox, the rows sent (accepted by the
-- provider), and of those the rows delivered (a relay said so, or the recipient replied or clicked), replied (a
-- reply or a `left` one), bounced, unsubscribed (or complained), clicked by a person (sender_engagement's `human`
-- verdict), opened by a person (an estimate); last, the rows a scanner clicked (never counted as clicks: shown apart
-- by the simulation's summary). A row counts once per column, whatever its status ranks as now.
-- %(campaign)s NULL: every campaign file's.
SELECT c.name, e.step, lower(g.mailbox), count(*),
       count(*) FILTER (WHERE e.status IN ('delivered', 'replied') OR f.delivered OR k.clicked),
       count(*) FILTER (WHERE e.status = 'replied' OR f.replied),
       count(*) FILTER (WHERE e.status = 'bounced' OR f.bounced),
       count(*) FILTER (WHERE e.status IN ('unsubscribed', 'complained') OR f.unsubscribed),
       count(*) FILTER (WHERE k.clicked),
       count(*) FILTER (WHERE k.opened),
       count(*) FILTER (WHERE k.scanned)
FROM sender_sent g
JOIN sender_emails e ON e.id = g.email_id
JOIN sender_campaigns c ON c.id = e.campaign_id
LEFT JOIN LATERAL (
    SELECT bool_or(x.event = 'delivered') AS delivered, bool_or(x.event IN ('replied', 'left')) AS replied,
           bool_or(x.event = 'bounced') AS bounced,
           bool_or(x.event IN ('unsubscribed', 'complained')) AS unsubscribed
    FROM sender_feedback x WHERE x.email_id = e.id AND x.verdict <> 'fail'
) AS f ON true
LEFT JOIN LATERAL (
    SELECT bool_or(y.kind = 'click' AND y.verdict = 'human') AS clicked,
           bool_or(y.kind = 'open' AND y.verdict = 'human') AS opened,
           bool_or(y.kind = 'click' AND y.verdict = 'scanner') AS scanned
    FROM sender_engagement y WHERE y.email_id = e.id
) AS k ON true
WHERE c.kind = 'file' AND (%(campaign)s::text IS NULL OR c.name = %(campaign)s)
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;

-- name: forecast_sent
-- A campaign's sends from %(since)s on (a forecast's, on its own copy of the ledger): step, mailbox, when.
SELECT e.step, lower(g.mailbox), g.accepted_at
FROM sender_sent g
JOIN sender_emails e ON e.id = g.email_id
JOIN sender_campaigns c ON c.id = e.campaign_id
WHERE c.name = %(name)s AND g.accepted_at >= %(since)s
ORDER BY g.accepted_at;

-- name: forecast_campaign_rows
-- A campaign's state, and its rows due now and not claimed (queued or in retry, due at or before now).
SELECT c.state::text,
       (SELECT count(*) FROM sender_emails e
        WHERE e.campaign_id = c.id AND e.status IN ('queued', 'retry')
          AND e.due_at <= coalesce(%(now)s, now()))
FROM sender_campaigns c WHERE c.name = %(name)s;

-- name: forecast_row_campaign
-- The campaign of row %(id)s.
SELECT c.name FROM sender_emails e JOIN sender_campaigns c ON c.id = e.campaign_id WHERE e.id = %(id)s;

-- name: forecast_steps_left
-- A campaign's steps not sent yet of its leads still in sequence: each such lead's steps less those it is done with
-- (a later step's row is made only when the step before it is sent).
SELECT coalesce(sum(n.steps - d.done), 0)
FROM sender_leads l
JOIN sender_campaigns c ON c.id = l.campaign_id
CROSS JOIN LATERAL (SELECT count(*) AS steps FROM sender_campaign_steps s WHERE s.campaign_id = c.id) AS n
CROSS JOIN LATERAL (
    SELECT count(*) AS done FROM sender_emails e
    WHERE e.lead_id = l.id
      AND e.status NOT IN ('waiting', 'queued', 'retry', 'sending')
) AS d
WHERE c.name = %(name)s AND l.ended IS NULL;

-- name: window_campaign
-- A campaign file's window as the claim knows it (sender.ledger.window_intervals), locked against a concurrent apply
-- or sweep until the intervals written from it commit: id, the file, its hash, the hash the intervals are of.
SELECT id, source, md5(source), window_hash FROM sender_campaigns
WHERE name = %(name)s AND kind = 'file'
FOR NO KEY UPDATE;

-- name: window_zones
-- The lead time zones of a campaign (as stored; '' for none, the campaign's), with those already written.
SELECT DISTINCT coalesce(timezone, '') FROM sender_leads WHERE campaign_id = %(id)s
UNION
SELECT lead_timezone FROM sender_window_horizons WHERE campaign_id = %(id)s;

-- name: window_horizons
SELECT lead_timezone, known_until FROM sender_window_horizons WHERE campaign_id = %(id)s;

-- name: window_forget
-- Every interval of a campaign, before those of a new file (or none: no window, or a file that does not parse).
WITH intervals AS (DELETE FROM sender_window_intervals WHERE campaign_id = %(id)s)
DELETE FROM sender_window_horizons WHERE campaign_id = %(id)s;

-- name: window_mark
UPDATE sender_campaigns SET always_open = %(always_open)s, window_hash = %(hash)s WHERE id = %(id)s;

-- name: window_write
-- One zone's intervals from its horizon on, and its new horizon; those closed before `before` dropped.
WITH added AS (
    INSERT INTO sender_window_intervals (campaign_id, lead_timezone, opens, closes)
    SELECT %(id)s, %(zone)s, i.opens, i.closes
    FROM unnest(%(opens)s::timestamptz[], %(closes)s::timestamptz[]) AS i (opens, closes)
), pruned AS (
    DELETE FROM sender_window_intervals
    WHERE campaign_id = %(id)s AND lead_timezone = %(zone)s AND closes < %(before)s
)
INSERT INTO sender_window_horizons (campaign_id, lead_timezone, known_until)
VALUES (%(id)s, %(zone)s, %(until)s)
ON CONFLICT (campaign_id, lead_timezone) DO UPDATE SET known_until = excluded.known_until;

-- name: window_stale
-- The campaigns whose intervals the sweep cycle writes: a file applied since they were written (or never written:
-- a ledger migrated to version 21), or a zone known less far ahead than `soon`.
SELECT c.name FROM sender_campaigns c
WHERE c.kind = 'file' AND c.state <> 'stopped'
  AND (c.window_hash IS DISTINCT FROM md5(c.source)
       OR EXISTS (SELECT 1 FROM sender_window_horizons h WHERE h.campaign_id = c.id AND h.known_until < %(soon)s))
ORDER BY c.name;
