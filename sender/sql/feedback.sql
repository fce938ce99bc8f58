-- Named queries of the feedback side (sender.ledger.events.Feedback); loaded with queries.sql.
-- %(now)s is the ledger's clock (NULL: the database's now()).

-- name: apply_event
SELECT sender_apply_event(%(id)s, %(event)s, %(at)s, %(source)s, %(ref)s, %(detail)s, %(now)s);

-- name: apply_event_by_message_id
SELECT sender_apply_event_by_message_id(%(message_id)s, %(event)s, %(at)s, %(source)s, %(ref)s, %(detail)s,
                                        %(now)s);

-- name: has_row
SELECT 1 FROM sender_emails WHERE id = %(id)s;

-- name: row_of_message_id
SELECT id FROM sender_emails WHERE message_id = '<' || btrim(%(message_id)s, '<> ') || '>';

-- name: recipient_of
SELECT recipient FROM sender_emails WHERE id = %(id)s;

-- name: latest_row_to
-- The row this mailbox last handed over to the address (a reply or an unsubscribe mail from it).
SELECT id FROM sender_emails WHERE recipient = lower(%(address)s) AND lower(mailbox) = lower(%(mailbox)s)
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
-- Per mailbox since %(since)s: accepted sends, hard bounces, complaints (what the warm-up health gates read).
SELECT mailbox, count(*) FILTER (WHERE event = 'sent') AS sent, count(*) FILTER (WHERE event = 'bounced') AS bounced,
       count(*) FILTER (WHERE event = 'complained') AS complained
FROM (SELECT mailbox, 'sent' AS event FROM sender_send_log WHERE accepted_at >= %(since)s
      UNION ALL
      SELECT mailbox, event FROM sender_feedback
      WHERE occurred_at >= %(since)s AND event IN ('bounced', 'complained') AND mailbox IS NOT NULL) AS seen
GROUP BY mailbox;
