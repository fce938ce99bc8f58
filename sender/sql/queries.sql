-- Named queries of the ledger (sender.ledger.store.Ledger) and its metrics; loaded once by sender.ledger.queries,
-- with feedback.sql and versions.sql (names are unique across the three). Each opens with `-- name: NAME`.
-- Parameters are psycopg's %(name)s placeholders; %(now)s is the ledger's clock (NULL: the database's now()).

-- name: enqueue
-- The outcome, and for same_person the lead that holds the address's active sequence.
SELECT outcome, first_lead
FROM sender_enqueue(%(lead)s, %(step)s, %(address)s, %(group)s, %(subject)s, %(text)s, %(not_before)s,
                    %(allow_same_person)s, %(now)s);

-- name: suppress
SELECT sender_suppress(%(address)s, %(reason)s, %(now)s);

-- name: is_suppressed
SELECT sender_is_suppressed(%(address)s);

-- name: claim
-- With each claimed row: its lead's merge fields (NULL: the row carries its own text) and the lead's earlier
-- steps (own subject?, the Subject sent, Message-ID), oldest first, for the reply headers of the thread. And what
-- the agent's window check needs: the campaign, the lead's time zone, and a hash of the campaign file as applied
-- (NULL for `enqueue`, which has no file and no window) that tells the agent when to parse it again.
SELECT c.id, l.lead, c.step, c.address, c.mailbox_group, c.subject, c.body, c.attempts, c.idempotency_key,
       c.message_id, c.attempt_id, c.pinned_mailbox, c.own_subject, l.fields, earlier.steps,
       c.campaign_id, l.timezone, CASE WHEN cp.kind = 'file' THEN md5(cp.source) END
FROM sender_claim(%(worker)s, %(limit)s, %(groups)s, %(mailboxes)s, %(now)s) AS c
JOIN sender_leads l ON l.id = c.lead_id
JOIN sender_campaigns cp ON cp.id = c.campaign_id
LEFT JOIN LATERAL (
    SELECT json_agg(json_build_array(e.own_subject, e.sent_subject, e.message_id) ORDER BY e.step) AS steps
    FROM sender_emails e
    WHERE e.lead_id = c.lead_id AND e.step < c.step AND e.message_id IS NOT NULL
) AS earlier ON c.step > 1;

-- name: campaign_file
-- A campaign's file as last applied, with the hash the claim returns (the agent caches its parse by both).
SELECT name, source, md5(source) FROM sender_campaigns WHERE id = %(id)s;

-- name: campaign_queued_zones
-- The lead time zones (as stored; NULL: the campaign's) of a campaign's rows waiting to be claimed.
SELECT DISTINCT l.timezone
FROM sender_emails e
JOIN sender_campaigns c ON c.id = e.campaign_id
JOIN sender_leads l ON l.id = e.lead_id
WHERE c.name = %(name)s AND e.status IN ('queued', 'retry');

-- name: campaign_due_by
-- How many of them, of leads in one time zone, are due by `until` (the window's next opening there).
SELECT count(*)
FROM sender_emails e
JOIN sender_campaigns c ON c.id = e.campaign_id
JOIN sender_leads l ON l.id = e.lead_id
WHERE c.name = %(name)s AND e.status IN ('queued', 'retry') AND l.timezone IS NOT DISTINCT FROM %(timezone)s
  AND e.not_before <= %(until)s;

-- name: campaign_due_rows
-- Its rows waiting to be claimed, per lead time zone (NULL: the campaign's) and pinned mailbox (NULL: any of the
-- group), due by `horizon`: how many are due at `at` (now), by `day_ends` (the end of the campaign's day), and by
-- the instant their mailbox's cap next frees (`untils` of `mailboxes`; a row that may go from any mailbox of the
-- group: `group_until`). For `campaign status` (sender.ledger.cap_wait).
SELECT l.timezone, e.pinned_mailbox, count(*) FILTER (WHERE e.not_before <= %(at)s::timestamptz),
       count(*) FILTER (WHERE e.not_before <= %(day_ends)s::timestamptz),
       count(*) FILTER (WHERE e.not_before <= coalesce(u.until, CASE WHEN e.pinned_mailbox IS NULL
                                                                     THEN %(group_until)s::timestamptz END))
FROM sender_emails e
JOIN sender_campaigns c ON c.id = e.campaign_id
JOIN sender_leads l ON l.id = e.lead_id
LEFT JOIN unnest(%(mailboxes)s::text[], %(untils)s::timestamptz[]) AS u (mailbox, until)
       ON u.mailbox = e.pinned_mailbox
WHERE c.name = %(name)s AND e.status IN ('queued', 'retry') AND e.not_before <= %(horizon)s::timestamptz
GROUP BY 1, 2;

-- name: campaign_wait_rows
-- Its rows not sent yet (waiting, queued, retry, in flight), grouped as sender.ledger.waits classifies them: status,
-- lead time zone (NULL: the campaign's), group, pinned mailbox, not due yet at `at` (due_at: its delay or a hold,
-- as the claim reads it), held past `at` by a put-back or a backoff (not_before); how many, and the earliest time the
-- claim may take one of them. For `campaign status` and `lead show`.
SELECT e.status::text, l.timezone, e.mailbox_group, e.pinned_mailbox, e.due_at > %(at)s::timestamptz,
       e.not_before > %(at)s::timestamptz, count(*), min(greatest(e.not_before, e.due_at))
FROM sender_emails e
JOIN sender_campaigns c ON c.id = e.campaign_id
JOIN sender_leads l ON l.id = e.lead_id
WHERE c.name = %(name)s AND e.status IN ('waiting', 'queued', 'retry', 'sending')
GROUP BY 1, 2, 3, 4, 5, 6;

-- name: unclaim
SELECT sender_unclaim(%(id)s, %(delay_s)s, %(why)s, %(now)s);

-- name: begin_attempt
SELECT outcome, message_id FROM sender_begin_attempt(%(id)s, %(attempt)s, %(mailbox)s, %(source_ip)s,
                                                     %(message_id)s, %(subject)s, %(now)s);

-- name: record_sent
SELECT sender_record_sent(%(id)s, %(reply)s, %(now)s);

-- name: settle
SELECT sender_settle(%(id)s, %(outcome)s, %(detail)s, %(delay_s)s, %(max_attempts)s, %(now)s);

-- name: sweep
SELECT requeued, unconfirmed FROM sender_sweep(%(older_than_s)s, %(now)s);

-- name: status_counts
-- Rows per status from the ledger's counters (schema.sql, sender_counted): the same cost at any size; a status
-- with no row is left out.
SELECT key, n FROM sender_counted('rows');

-- name: status_ranks
-- The rank order every status change is guarded by (sender_status_ranks, in schema.sql).
SELECT status, rank FROM sender_status_ranks();

-- name: show_row
-- A lead's step in one campaign, the lead named by the caller's id or by its address (the one lead of it in a
-- campaign file's campaign). Without the campaign, two campaigns' leads of one name would both match.
SELECT e.id, c.name AS campaign, l.lead, e.step, e.address, e.mailbox_group, e.subject, e.status::text,
       e.attempts, e.not_before, e.idempotency_key, e.message_id, e.mailbox, e.source_ip, e.last_error,
       e.created_at, e.updated_at
FROM sender_emails e JOIN sender_campaigns c ON c.id = e.campaign_id JOIN sender_leads l ON l.id = e.lead_id
WHERE c.name = %(campaign)s AND (l.lead = %(lead)s OR (l.kind = 'file' AND l.address = lower(%(lead)s)))
  AND e.step = %(step)s;

-- name: row_status
-- One row's status, for a person's command that found it in another status than it acts on.
SELECT status::text FROM sender_emails WHERE id = %(id)s;

-- name: show_events
SELECT at, kind, detail FROM sender_events WHERE email_id = %(id)s ORDER BY id;

-- name: show_send_log
SELECT message_id, mailbox, source_ip, accepted_at, reply FROM sender_send_log WHERE email_id = %(id)s;

-- name: sends_since
-- What the warm-up guard's counters are rebuilt from, per mailbox: every send that was handed over or may have
-- been, once, whatever a relay or the inbox said of its row later (a `delivered`, `sent`, `bounced`, ... changes
-- nothing). A send accepted is in the send log, at its acceptance; any other row whose last attempt started and
-- was not proved to have stayed here (attempt_id: a retry clears it; settled failed, suppressed or cancelled: the
-- server refused it, or it never started) may have left: it counts at the attempt's start, as its reservation was
-- kept. The under-sending side of not knowing. `mailboxes` lower-case: a row holds the inventory's spelling.
SELECT lower(mailbox), accepted_at FROM sender_send_log
WHERE accepted_at >= %(since)s AND lower(mailbox) = ANY (%(mailboxes)s)
UNION ALL
SELECT lower(e.mailbox), e.attempt_started_at FROM sender_emails e
WHERE e.attempt_id IS NOT NULL AND e.status NOT IN ('failed', 'suppressed', 'cancelled')
  AND e.attempt_started_at >= %(since)s AND lower(e.mailbox) = ANY (%(mailboxes)s)
  AND NOT EXISTS (SELECT 1 FROM sender_sent s WHERE s.email_id = e.id);

-- name: campaign_sends_since
-- What a group's campaign counters are rebuilt from: the campaign file's sends from this group (a change of the
-- campaign's group starts its counters afresh, as the guard does), accepted or possibly accepted, per mailbox: the
-- rows `sends_since` counts.
SELECT c.name, c.source, lower(sends.mailbox), sends.at
FROM (SELECT e.campaign_id, g.mailbox, g.accepted_at AS at
      FROM sender_send_log g JOIN sender_emails e ON e.id = g.email_id
      WHERE g.accepted_at >= %(since)s AND e.mailbox_group = %(group)s
      UNION ALL
      SELECT e.campaign_id, e.mailbox, e.attempt_started_at FROM sender_emails e
      WHERE e.attempt_id IS NOT NULL AND e.status NOT IN ('failed', 'suppressed', 'cancelled')
        AND e.attempt_started_at >= %(since)s AND e.mailbox_group = %(group)s
        AND NOT EXISTS (SELECT 1 FROM sender_sent s WHERE s.email_id = e.id)) sends
JOIN sender_campaigns c ON c.id = sends.campaign_id
WHERE c.kind = 'file'
ORDER BY c.name;

-- name: unsubscribe_key
SELECT sender_unsubscribe_key(%(new)s);

-- name: next_due
-- Seconds until the next queued or retry row of these groups is due (negative: overdue); NULL when none is waiting.
-- A row of a campaign with a sending window is due when it may be claimed: at its window's next opening in its
-- lead's zone (sender_window_next, version 21), so an idle agent does not wake for a row the claim passes over. Of
-- the rows due now of one campaign and lead zone, all are due when it opens (0 when open now); a row held past now
-- is due at its not_before (one index step), when the next look sees whether its window is open. The rows due now
-- of a closed window are few: the sweep cycle moves their not_before to the opening (sender_window_defer).
WITH due_now AS (
    SELECT e.campaign_id, e.lead_id, e.not_before FROM sender_emails e
    WHERE e.status IN ('queued', 'retry') AND e.not_before <= coalesce(%(now)s::timestamptz, now())
      AND (%(groups)s::text[] IS NULL OR e.mailbox_group = ANY (%(groups)s::text[]))
), heads (due) AS (
    SELECT min(e.not_before) FROM sender_emails e
    WHERE e.status IN ('queued', 'retry') AND e.not_before > coalesce(%(now)s::timestamptz, now())
      AND (%(groups)s::text[] IS NULL OR e.mailbox_group = ANY (%(groups)s::text[]))
    UNION ALL
    SELECT min(q.not_before) FROM due_now q JOIN sender_campaigns c ON c.id = q.campaign_id WHERE c.always_open
    UNION ALL
    SELECT sender_window_next(q.campaign_id, coalesce(l.timezone, ''), coalesce(%(now)s::timestamptz, now()),
                              coalesce(%(now)s::timestamptz, now()))
    FROM due_now q
    JOIN sender_campaigns c ON c.id = q.campaign_id AND NOT c.always_open
    JOIN sender_leads l ON l.id = q.lead_id
    GROUP BY q.campaign_id, coalesce(l.timezone, '')
)
SELECT extract(epoch FROM min(due) - coalesce(%(now)s::timestamptz, now()))::double precision FROM heads;

-- name: window_defer
SELECT sender_window_defer(%(now)s);

-- name: ping
SELECT 1;

-- name: oldest_due_age
-- Metrics: seconds since the oldest due queued or retry row became due (0: nothing overdue).
SELECT coalesce(extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - min(not_before)), 0)::double precision
FROM sender_emails
WHERE status IN ('queued', 'retry') AND not_before <= coalesce(%(now)s::timestamptz, now());

-- name: pinned_due
-- Follow-ups due that may go only from the mailbox they are pinned to (the one that sent the lead's step before),
-- per campaign (%(name)s; NULL: every one) and mailbox: how many, and since when the oldest is due (due_at: a row
-- put back keeps it). What waits for a paused or disconnected mailbox (sender.ledger.stalled), and the metrics'.
SELECT c.name, e.pinned_mailbox, count(*), min(e.due_at)
FROM sender_emails e JOIN sender_campaigns c ON c.id = e.campaign_id
WHERE e.status IN ('queued', 'retry') AND e.pinned_mailbox IS NOT NULL
  AND e.due_at <= coalesce(%(now)s::timestamptz, now()) AND (%(name)s::text IS NULL OR c.name = %(name)s::text)
GROUP BY c.name, e.pinned_mailbox
ORDER BY c.name, e.pinned_mailbox;

-- name: event_counts
-- Metrics: the rows' history by kind, from the ledger's counters.
SELECT key, n FROM sender_counted('events');
