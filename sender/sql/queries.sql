-- Named queries the Python side runs; loaded once by sender.queries. Each opens with `-- name: NAME`.
-- Parameters are psycopg's %(name)s placeholders.

-- name: enqueue
SELECT sender_enqueue(%(lead)s, %(step)s, %(to)s, %(group)s, %(subject)s, %(text)s, %(not_before)s);

-- name: suppress
SELECT sender_suppress(%(address)s, %(reason)s);

-- name: is_suppressed
SELECT sender_is_suppressed(%(address)s);

-- name: claim
SELECT id, lead, step, recipient, mailbox_group, subject, body, attempts, idempotency_key, message_id, attempt_id
FROM sender_claim(%(worker)s, %(limit)s, %(groups)s);

-- name: unclaim
SELECT sender_unclaim(%(id)s, %(delay_s)s, %(why)s);

-- name: begin_attempt
SELECT outcome, message_id FROM sender_begin_attempt(%(id)s, %(attempt)s, %(mailbox)s, %(source_ip)s,
                                                     %(message_id)s);

-- name: record_sent
SELECT sender_record_sent(%(id)s, %(reply)s);

-- name: settle
SELECT sender_settle(%(id)s, %(outcome)s, %(detail)s, %(delay_s)s, %(max_attempts)s);

-- name: sweep
SELECT requeued, unconfirmed FROM sender_sweep(%(older_than_s)s);

-- name: status_counts
SELECT status::text, count(*) FROM sender_emails GROUP BY status;

-- name: show_row
SELECT id, lead, step, recipient, mailbox_group, subject, status::text, attempts, not_before, idempotency_key,
       message_id, mailbox, source_ip, last_error, created_at, updated_at
FROM sender_emails WHERE lead = %(lead)s AND step = %(step)s;

-- name: show_events
SELECT at, kind, detail FROM sender_events WHERE email_id = %(id)s ORDER BY id;

-- name: show_send_log
SELECT message_id, mailbox, source_ip, accepted_at, reply FROM sender_send_log WHERE email_id = %(id)s;

-- name: sends_since
-- What the warm-up guard's counters are rebuilt from: every accepted send, and every unconfirmed attempt
-- (its reservation was kept, so it counts as used), per mailbox.
SELECT mailbox, accepted_at FROM sender_send_log WHERE accepted_at >= %(since)s AND mailbox = ANY (%(mailboxes)s)
UNION ALL
SELECT mailbox, attempt_started_at FROM sender_emails
WHERE status IN ('unconfirmed', 'sending') AND attempt_started_at >= %(since)s AND mailbox = ANY (%(mailboxes)s);

-- name: unsubscribe_key
SELECT sender_unsubscribe_key(%(new)s);

-- name: schema_version
SELECT coalesce(max(version), 0) FROM sender_schema_versions;

-- name: next_due
-- Seconds until the next queued or retry row of these groups is due (negative: overdue); NULL when none is waiting.
SELECT extract(epoch FROM min(not_before) - now())::double precision FROM sender_emails
WHERE status IN ('queued', 'retry') AND (%(groups)s::text[] IS NULL OR mailbox_group = ANY (%(groups)s::text[]));
