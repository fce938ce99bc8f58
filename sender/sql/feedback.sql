-- Named queries of the feedback side (sender.ledger.events.Feedback); loaded with queries.sql.
-- %(now)s is the ledger's clock (NULL: the database's now()).

-- name: apply_event
SELECT sender_apply_event(%(id)s, %(event)s, %(at)s, %(source)s, %(ref)s, %(detail)s, %(verdict)s, %(now)s);

-- name: apply_event_by_message_id
SELECT sender_apply_event_by_message_id(%(message_id)s, %(event)s, %(at)s, %(source)s, %(ref)s, %(detail)s,
                                        %(verdict)s, %(now)s);

-- name: row_of_idempotency_key
-- The row an unsubscribe token names (sender.sending.tokens): its random key, never handed out again, unlike an id
-- after a restore from an older dump.
SELECT id FROM sender_emails WHERE idempotency_key = %(key)s;

-- name: row_of_row_id_token
-- A first-form token (the row's id, what the agent put in mail before version 9) still names its row only when the
-- row's message went out before the ledger was upgraded to version 9 (`row_id_tokens_before`, written by that
-- migration; a ledger made at version 9 or later has none, so no such token counts) and for 30 days after the
-- upgrade (CAN-SPAM's: an opt-out link works that long). A row made after the upgrade is never named by an id,
-- so an id reused after a restore reaches nobody new.
SELECT e.id FROM sender_emails e JOIN sender_settings s ON s.name = 'row_id_tokens_before'
WHERE e.id = %(id)s AND e.attempt_started_at < to_timestamp(s.value::double precision)
  AND coalesce(%(now)s::timestamptz, now()) < to_timestamp(s.value::double precision) + interval '30 days';

-- name: row_of_message_id
SELECT id FROM sender_emails WHERE message_id = '<' || btrim(%(message_id)s, '<> ') || '>';

-- name: address_of
SELECT address FROM sender_emails WHERE id = %(id)s;

-- name: latest_row_to
-- The row this mailbox last handed over to the address (a reply or an unsubscribe mail from it).
SELECT id FROM sender_emails WHERE address = lower(%(address)s) AND lower(mailbox) = lower(%(mailbox)s)
  AND message_id IS NOT NULL
ORDER BY attempt_started_at DESC NULLS LAST, id DESC LIMIT 1;

-- name: inbox_mark
SELECT uidvalidity, last_uid FROM sender_inbox_marks WHERE mailbox = %(mailbox)s;

-- name: set_inbox_mark
-- Forward only within one UIDVALIDITY; a new UIDVALIDITY starts over.
INSERT INTO sender_inbox_marks (mailbox, uidvalidity, last_uid, updated_at)
VALUES (%(mailbox)s, %(uidvalidity)s, %(last_uid)s, coalesce(%(now)s::timestamptz, now()))
ON CONFLICT (mailbox) DO UPDATE
SET uidvalidity = excluded.uidvalidity, updated_at = excluded.updated_at,
    last_uid = CASE WHEN sender_inbox_marks.uidvalidity = excluded.uidvalidity
                    THEN greatest(sender_inbox_marks.last_uid, excluded.last_uid) ELSE excluded.last_uid END;

-- name: health_since
-- Per mailbox since %(since)s: sends, hard bounces, complaints (what the warm-up health gates read), each counted
-- once per row: three complaints or two bounces about one message are one (whoever sent them), and forged
-- feedback (verdict fail) is never counted. A recipient refused at submission (the agent's own `bounced`, no
-- send-log entry) counts as a send and a bounce, so the rate stays bounces over attempts that reached a server.
SELECT mailbox, count(DISTINCT email_id) FILTER (WHERE event = 'sent') AS sent,
       count(DISTINCT email_id) FILTER (WHERE event = 'bounced') AS bounced,
       count(DISTINCT email_id) FILTER (WHERE event = 'complained') AS complained
FROM (SELECT mailbox, email_id, 'sent' AS event FROM sender_send_log WHERE accepted_at >= %(since)s
      UNION ALL
      SELECT mailbox, email_id, 'sent' FROM sender_feedback
      WHERE occurred_at >= %(since)s AND event = 'bounced' AND source = 'agent' AND mailbox IS NOT NULL
      UNION ALL
      SELECT mailbox, email_id, event FROM sender_feedback
      WHERE occurred_at >= %(since)s AND event IN ('bounced', 'complained') AND verdict <> 'fail'
        AND mailbox IS NOT NULL) AS seen
GROUP BY mailbox;

-- name: rows_of_message_ids
-- The rows sent with any of %(message_ids)s (each '<local@domain>'), in one lookup, with their addresses.
SELECT message_id, id, address FROM sender_emails WHERE message_id = ANY (%(message_ids)s::text[]);

-- name: feedback_of_row
-- A row's feedback, oldest first, with how sure each source was (`sender show`, `lead show`).
SELECT occurred_at, event, source, verdict, detail FROM sender_feedback WHERE email_id = %(id)s ORDER BY id;

-- name: hold
-- An automatic reply's hold on the lead of row %(id)s (sender_hold): how many of its rows moved.
SELECT sender_hold(%(id)s, %(until)s, %(why)s, %(now)s);

-- name: hold_zone
-- What a hold's day is read in: the lead's time zone, else its campaign's (from the file as applied).
SELECT l.timezone, c.name, CASE WHEN c.kind = 'file' THEN c.source END
FROM sender_emails e JOIN sender_leads l ON l.id = e.lead_id
JOIN sender_campaigns c ON c.id = e.campaign_id
WHERE e.id = %(id)s;

-- name: colleague_reply
SELECT email_id, answer FROM sender_colleague_reply(%(mailbox)s, %(sender)s, %(ref)s, %(detail)s, %(verdict)s,
                                                   %(now)s);

-- name: reclassify
SELECT sender_reclassify(%(id)s, %(as)s, %(note)s, %(now)s);

-- name: tracked_row
-- The row a click or open token names (docs/tracking.md): a campaign row whose message went out, with what its
-- links are read from (its body as stored and its lead's fields) and when the provider accepted it.
SELECT e.id, e.body, l.fields, g.accepted_at, coalesce(%(now)s::timestamptz, now())
FROM sender_emails e
JOIN sender_leads l ON l.id = e.lead_id
JOIN sender_sent g ON g.email_id = e.id
WHERE e.idempotency_key = %(key)s AND l.fields IS NOT NULL;

-- name: links_clicked_since
-- The links of a row clicked since %(since)s by what looked like a person so far: what "every link in the same
-- second" reads (a click a rule already gave to a scanner is its own burst, not a person's).
SELECT coalesce(array_agg(DISTINCT link), '{}') FROM sender_engagement
WHERE email_id = %(id)s AND kind = 'click' AND at > %(since)s AND verdict = 'human';

-- name: record_engagement
SELECT sender_record_engagement(%(id)s, %(kind)s, %(link)s, %(verdict)s, %(rule)s, %(relabel_since)s, %(now)s);

-- name: row_text
-- A campaign row's body as stored and its lead's fields: what its tracked links are read from (lead show).
SELECT e.body, l.fields FROM sender_emails e
JOIN sender_leads l ON l.id = e.lead_id
WHERE e.id = %(id)s AND l.fields IS NOT NULL;

-- name: row_clicks
SELECT link, verdict, count(*) FROM sender_engagement WHERE email_id = %(id)s AND kind = 'click'
GROUP BY link, verdict ORDER BY link, verdict;
