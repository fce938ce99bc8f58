-- Version 13: the history by month (issue 30). sender_events and sender_send_log become tables partitioned by the
-- UTC month of their time (at, accepted_at), each with a DEFAULT partition so that no insert ever fails for a
-- month not made yet; `sendhost sender retire-history` drops old months whole, so nothing a send costs grows with
-- the years. A partitioned table's keys must hold its partition key: the send log's one entry per row, and what
-- the sequence rules read of a send (when, from which mailbox), move to sender_sent, kept forever and written by
-- the same insert (a trigger). The history entries of retired months stay counted (sender_events_retired).
-- The old tables' rows are copied into month partitions made for them (from the oldest month held through two
-- months ahead), the old tables dropped; the counters are left as they were, since no entry changed.

-- Copying the whole history takes as long as the history is long: no statement timeout for this transaction only
-- (set_config's is_local, as the runner's own timeout is set: nothing outlives the transaction through PgBouncer).
SELECT set_config('statement_timeout', '0', true);

-- What the sequence rules read of a send, from the send log as it is.
CREATE TABLE sender_sent (
    email_id bigint PRIMARY KEY REFERENCES sender_emails (id),
    accepted_at timestamptz NOT NULL,
    mailbox text NOT NULL
);

INSERT INTO sender_sent (email_id, accepted_at, mailbox) SELECT email_id, accepted_at, mailbox FROM sender_send_log;

-- The old tables step aside, their indexes and keys dropped so that the new ones take their names (a name chosen
-- for a constraint is one no other constraint of the schema has); the events' id sequence is kept (OWNED BY NONE)
-- for the new table.
ALTER TABLE sender_send_log RENAME TO sender_send_log_v12;
ALTER TABLE sender_send_log_v12 DROP CONSTRAINT sender_send_log_pkey;
ALTER TABLE sender_send_log_v12 DROP CONSTRAINT sender_send_log_message_id_key;
ALTER TABLE sender_send_log_v12 DROP CONSTRAINT sender_send_log_email_id_fkey;
DROP INDEX sender_send_log_mailbox;
DROP INDEX sender_send_log_accepted;
ALTER SEQUENCE sender_events_id_seq OWNED BY NONE;
ALTER TABLE sender_events RENAME TO sender_events_v12;
ALTER TABLE sender_events_v12 DROP CONSTRAINT sender_events_pkey;
ALTER TABLE sender_events_v12 DROP CONSTRAINT sender_events_email_id_fkey;
DROP INDEX sender_events_email;

CREATE TABLE sender_send_log (
    email_id bigint NOT NULL REFERENCES sender_emails (id),
    message_id text NOT NULL,
    mailbox text NOT NULL,
    source_ip text,
    accepted_at timestamptz NOT NULL DEFAULT now(),
    reply text NOT NULL DEFAULT '',
    PRIMARY KEY (email_id, accepted_at)
) PARTITION BY RANGE (accepted_at);
-- What no month's partition holds yet (sender_make_partitions makes them ahead): no insert ever fails for a month.
CREATE TABLE sender_send_log_default PARTITION OF sender_send_log DEFAULT;
CREATE INDEX sender_send_log_mailbox ON sender_send_log (mailbox, accepted_at);
-- The health window's (version 10): the last 7 days of every mailbox, read without the rest of the history.
CREATE INDEX sender_send_log_accepted ON sender_send_log (accepted_at);

CREATE TABLE sender_events (
    id bigint NOT NULL DEFAULT nextval('sender_events_id_seq'),
    email_id bigint NOT NULL REFERENCES sender_emails (id),
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind text NOT NULL,
    detail text NOT NULL DEFAULT '',
    PRIMARY KEY (id, at)
) PARTITION BY RANGE (at);
CREATE TABLE sender_events_default PARTITION OF sender_events DEFAULT;
CREATE INDEX sender_events_email ON sender_events (email_id, id);

ALTER SEQUENCE sender_events_id_seq OWNED BY sender_events.id;

-- The history entries that `sendhost sender retire-history` dropped with their month (version 13), per kind: still
-- counted, by sender_counts as before and by a recount from here.
CREATE TABLE sender_events_retired (
    kind text PRIMARY KEY,
    n bigint NOT NULL
);

-- The column a history table is partitioned by.
CREATE FUNCTION sender_history_column(p_table text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE p_table WHEN 'sender_events' THEN 'at' WHEN 'sender_send_log' THEN 'accepted_at' END
$$;

-- One month of a history table, the UTC month holding p_month, made unless it is there: true when made. Rows
-- that landed in the DEFAULT partition for that month move into it (PostgreSQL refuses a partition whose range
-- has rows in DEFAULT); moved, the history entries are no new entries, so their counter lines cancel out.
-- Inserts into the table wait meanwhile (a month is made once), reads do not.
CREATE FUNCTION sender_make_partition(p_table text, p_month timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    col text := sender_history_column(p_table);
    month_start timestamp := date_trunc('month', p_month AT TIME ZONE 'UTC');
    lo timestamptz := month_start AT TIME ZONE 'UTC';
    hi timestamptz := (month_start + interval '1 month') AT TIME ZONE 'UTC';
    part text := format('%s_y%sm%s', p_table, to_char(month_start, 'YYYY'), to_char(month_start, 'MM'));
    stray boolean;
BEGIN
    IF col IS NULL THEN
        RAISE EXCEPTION 'sender_make_partition: % is not a history table', p_table;
    END IF;
    IF to_regclass(part) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('LOCK TABLE %I IN SHARE ROW EXCLUSIVE MODE', p_table);
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE %I >= $1 AND %I < $2)', p_table || '_default', col, col)
    INTO stray USING lo, hi;
    IF NOT stray THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', part, p_table, lo, hi);
        RETURN true;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS)', part, p_table);
    EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= $1 AND %I < $2 RETURNING *) '
                   'INSERT INTO %I SELECT * FROM moved', p_table || '_default', col, col, part) USING lo, hi;
    IF p_table = 'sender_events' THEN
        -- the delete above counted each entry out (sender_count_event); the insert, into no partition yet, did
        -- not count it in
        EXECUTE format('INSERT INTO sender_count_changes (counter, old_key, new_key) '
                       'SELECT ''events'', NULL, kind FROM %I', part);
    END IF;
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', p_table, part, lo, hi);
    RETURN true;
END
$$;

-- Every month of both history tables from p_now's (NULL: now()) through p_through's, and each month that rows in
-- DEFAULT belong to, made unless there: how many were made. Called by `sendhost sender migrate` and by the agent
-- at its start and once a day, two months ahead, so no send lands in DEFAULT. Two callers at once: the second
-- waits for the first (a transaction lock), then finds them made. Cheap when nothing is missing: one catalogue
-- look-up a month, and a read of DEFAULT, which is empty.
CREATE FUNCTION sender_make_partitions(p_through timestamptz, p_now timestamptz DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    history text;
    month_start timestamp;
    made integer := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('sender_make_partitions'));
    -- the send log first, as its writers (sender_record_sent, sender_resolve) take the two: in the other order a
    -- month made while a send is recorded deadlocked with it
    FOREACH history IN ARRAY ARRAY['sender_send_log', 'sender_events'] LOOP
        FOR month_start IN EXECUTE format(
            'SELECT DISTINCT date_trunc(''month'', %I AT TIME ZONE ''UTC'') FROM %I '
            'UNION SELECT generate_series(date_trunc(''month'', $1 AT TIME ZONE ''UTC''), '
            '                             date_trunc(''month'', $2 AT TIME ZONE ''UTC''), interval ''1 month'') '
            'ORDER BY 1', sender_history_column(history), history || '_default')
            USING coalesce(p_now, now()), p_through
        LOOP
            IF sender_make_partition(history, month_start AT TIME ZONE 'UTC') THEN
                made := made + 1;
            END IF;
        END LOOP;
    END LOOP;
    RETURN made;
END
$$;

-- The month partitions of a history table, oldest first: each one's name and the start of its month (from the name
-- sender_make_partition gives it), for sender_retire_history.
CREATE FUNCTION sender_history_months(p_table text) RETURNS TABLE (part text, month_start timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT c.relname::text, (substr(c.relname, length(p_table) + 3, 4) || '-'
                             || substr(c.relname, length(p_table) + 8, 2) || '-01')::timestamp AT TIME ZONE 'UTC'
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = p_table::regclass AND c.relname ~ ('^' || p_table || '_y[0-9]{4}m[0-9]{2}$')
    ORDER BY 2
$$;

-- Drop every month of the history (sender_events, sender_send_log) that ends on or before p_before (a UTC month
-- boundary), whole: one row per month dropped, with its entries. All or nothing: a month holding the history of a
-- row still `sending` or `unconfirmed` (its verdict may yet need it) refuses the whole call, naming the month and
-- how many such rows (object_in_use). The entries dropped stay counted (sender_events_retired). Kept forever:
-- sender_sent, the rows, the leads, the suppressions, the feedback.
CREATE FUNCTION sender_retire_history(p_before timestamptz)
RETURNS TABLE (history text, month_start timestamptz, entries bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    m record;
    held bigint;
    n bigint;
BEGIN
    IF p_before <> date_trunc('month', p_before AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' THEN
        RAISE EXCEPTION 'sender_retire_history: % is not the start of a UTC month', p_before
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('sender_make_partitions'));
    FOR m IN SELECT t.history, h.part, h.month_start
             FROM unnest(ARRAY['sender_send_log', 'sender_events']) WITH ORDINALITY AS t(history, taken)
             CROSS JOIN LATERAL sender_history_months(t.history) AS h
             WHERE h.month_start + interval '1 month' <= p_before
             ORDER BY h.month_start, t.taken LOOP  -- the send log first, as sender_make_partitions
        EXECUTE format('SELECT count(DISTINCT e.id) FROM %I v JOIN sender_emails e ON e.id = v.email_id '
                       'WHERE e.status IN (''sending'', ''unconfirmed'')', m.part) INTO held;
        IF held > 0 THEN
            RAISE EXCEPTION 'month % holds the history of % row(s) still sending or unconfirmed',
                            to_char(m.month_start AT TIME ZONE 'UTC', 'YYYY-MM'), held
                USING ERRCODE = 'object_in_use';
        END IF;
        IF m.history = 'sender_events' THEN
            EXECUTE format('INSERT INTO sender_events_retired AS r (kind, n) SELECT kind, count(*) FROM %I '
                           'GROUP BY kind ON CONFLICT (kind) DO UPDATE SET n = r.n + excluded.n', m.part);
        END IF;
        EXECUTE format('SELECT count(*) FROM %I', m.part) INTO n;
        EXECUTE format('DROP TABLE %I', m.part);
        history := m.history;
        month_start := m.month_start;
        entries := n;
        RETURN NEXT;
    END LOOP;
END
$$;

-- Months for every entry there is (through two months ahead, or the latest entry if later), then the entries:
-- each lands in its month, none in DEFAULT.
CREATE TEMPORARY TABLE sender_events_v12_span ON COMMIT DROP AS
SELECT min(at) AS first, greatest(max(at), now() + interval '2 months') AS last FROM sender_events_v12;
CREATE TEMPORARY TABLE sender_send_log_v12_span ON COMMIT DROP AS
SELECT min(accepted_at) AS first, greatest(max(accepted_at), now() + interval '2 months') AS last
FROM sender_send_log_v12;
SELECT sender_make_partition('sender_events', m AT TIME ZONE 'UTC')
FROM sender_events_v12_span AS s,
     generate_series(date_trunc('month', s.first AT TIME ZONE 'UTC'), s.last AT TIME ZONE 'UTC', interval '1 month') AS m;
SELECT sender_make_partition('sender_send_log', m AT TIME ZONE 'UTC')
FROM sender_send_log_v12_span AS s,
     generate_series(date_trunc('month', s.first AT TIME ZONE 'UTC'), s.last AT TIME ZONE 'UTC', interval '1 month') AS m;
SELECT sender_make_partitions(now() + interval '2 months');
INSERT INTO sender_events (id, email_id, at, kind, detail) SELECT id, email_id, at, kind, detail FROM sender_events_v12;
INSERT INTO sender_send_log (email_id, message_id, mailbox, source_ip, accepted_at, reply)
SELECT email_id, message_id, mailbox, source_ip, accepted_at, reply FROM sender_send_log_v12;
DROP TABLE sender_events_v12;
DROP TABLE sender_send_log_v12;

-- The triggers after the copy: the entries copied are no new entries (counted already), their sends in sender_sent.
CREATE FUNCTION sender_log_sent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- a second entry for the row fails here, on sender_sent's key
    INSERT INTO sender_sent (email_id, accepted_at, mailbox) VALUES (NEW.email_id, NEW.accepted_at, NEW.mailbox);
    RETURN NULL;
END
$$;

CREATE TRIGGER sender_log_sent AFTER INSERT ON sender_send_log FOR EACH ROW EXECUTE FUNCTION sender_log_sent();
CREATE TRIGGER sender_count_event AFTER INSERT OR DELETE ON sender_events
FOR EACH ROW EXECUTE FUNCTION sender_count_event();
CREATE TRIGGER sender_count_events_truncated AFTER TRUNCATE ON sender_events
FOR EACH STATEMENT EXECUTE FUNCTION sender_count_truncated('events');

-- What read the send log for a send's time, mailbox or existence reads sender_sent; the two that wrote it insert
-- once per row without ON CONFLICT (no key of the send log's own to conflict on).
CREATE OR REPLACE FUNCTION sender_rank_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = 'sent' AND NEW.status IN ('failed', 'suppressed')
       AND NOT EXISTS (SELECT 1 FROM sender_sent WHERE email_id = NEW.id) THEN
        RETURN NEW;
    END IF;
    NEW.status := sender_guarded_status(OLD.status, NEW.status);
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION sender_enqueue(p_lead text, p_step integer, p_recipient text, p_group text,
                                          p_subject text, p_body text, p_not_before timestamptz,
                                          p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    campaign bigint := (SELECT id FROM sender_campaigns WHERE name = 'enqueue');
    new_id bigint;
    new_status sender_status;
BEGIN
    IF sender_is_suppressed(p_recipient) THEN
        RETURN 'suppressed';
    END IF;
    INSERT INTO sender_leads (campaign_id, lead, address, created_at)
    VALUES (campaign, p_lead, lower(p_recipient), now_at)
    ON CONFLICT (campaign_id, lead) DO NOTHING;
    IF EXISTS (SELECT 1 FROM sender_emails WHERE campaign_id = campaign AND lead = p_lead AND step = p_step) THEN
        RETURN 'duplicate';
    END IF;
    IF EXISTS (SELECT 1 FROM sender_leads WHERE campaign_id = campaign AND lead = p_lead AND ended IS NOT NULL)
    THEN
        RETURN 'ended';
    END IF;
    INSERT INTO sender_emails (campaign_id, lead, step, recipient, mailbox_group, subject, body, not_before,
                               due_at, pinned_mailbox, created_at, updated_at)
    SELECT campaign, p_lead, p_step, lower(p_recipient), p_group, p_subject, p_body, due.at, due.at,
           lower(sent.mailbox), now_at, now_at
    FROM (SELECT NULL) AS one
    LEFT JOIN LATERAL (SELECT e.mailbox, g.accepted_at FROM sender_emails e
                       JOIN sender_sent g ON g.email_id = e.id
                       WHERE e.campaign_id = campaign AND e.lead = p_lead AND e.step = p_step - 1
                         AND e.status IN ('sent', 'delivered')) AS sent ON true
    CROSS JOIN LATERAL (SELECT greatest(coalesce(p_not_before, now_at), coalesce(sent.accepted_at, now_at)) AS at)
        AS due
    ON CONFLICT (campaign_id, lead, step) DO NOTHING
    RETURNING id, status INTO new_id, new_status;
    IF new_id IS NULL THEN
        RETURN 'duplicate';
    END IF;
    PERFORM sender_event(new_id, new_status::text, '', p_now);
    RETURN new_status::text;
END
$$;

CREATE OR REPLACE FUNCTION sender_advance(p_email bigint, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r sender_emails;
    l sender_leads;
    next_step sender_campaign_steps;
    sent_at timestamptz;
    new_id bigint;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email;
    SELECT * INTO l FROM sender_leads WHERE campaign_id = r.campaign_id AND lead = r.lead FOR UPDATE;
    IF l.ended = 'unconfirmed' THEN
        UPDATE sender_leads SET ended = NULL, ended_at = NULL WHERE id = l.id;
    ELSIF l.ended IS NOT NULL THEN
        RETURN;
    END IF;
    SELECT coalesce((SELECT accepted_at FROM sender_sent WHERE email_id = p_email), p_at) INTO sent_at;
    SELECT * INTO next_step FROM sender_campaign_steps WHERE campaign_id = r.campaign_id AND step = r.step + 1;
    UPDATE sender_emails
    SET status = CASE WHEN attempts = 0 THEN 'queued'::sender_status ELSE 'retry'::sender_status END,
        pinned_mailbox = lower(r.mailbox), updated_at = p_at,
        not_before = greatest(not_before, sent_at + make_interval(secs => coalesce(next_step.delay_s, 0))),
        due_at = greatest(not_before, sent_at + make_interval(secs => coalesce(next_step.delay_s, 0)))
    WHERE campaign_id = r.campaign_id AND lead = r.lead AND step = r.step + 1 AND status = 'waiting';
    IF FOUND OR EXISTS (SELECT 1 FROM sender_emails WHERE campaign_id = r.campaign_id AND lead = r.lead
                        AND step = r.step + 1) THEN
        RETURN;
    END IF;
    IF next_step.step IS NULL THEN
        IF EXISTS (SELECT 1 FROM sender_campaigns WHERE id = r.campaign_id AND kind = 'file') THEN
            PERFORM sender_end_sequence(r.campaign_id, r.lead, 'completed', p_at);
        END IF;
        RETURN;
    END IF;
    INSERT INTO sender_emails (campaign_id, lead, step, recipient, mailbox_group, subject, body, own_subject,
                               not_before, due_at, pinned_mailbox, created_at, updated_at)
    VALUES (r.campaign_id, r.lead, next_step.step, l.address, r.mailbox_group, coalesce(next_step.subject, ''),
            next_step.body, next_step.subject IS NOT NULL, sent_at + make_interval(secs => next_step.delay_s),
            sent_at + make_interval(secs => next_step.delay_s), lower(r.mailbox), p_at, p_at)
    RETURNING id INTO new_id;
    PERFORM sender_event(new_id, 'queued', format('step %s: due %s after step %s was sent', next_step.step,
                                                  make_interval(secs => next_step.delay_s), r.step), p_at);
END
$$;

CREATE OR REPLACE FUNCTION sender_resolve(p_email bigint, p_sent boolean, p_note text, p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email FOR UPDATE;
    IF r.id IS NULL THEN
        RETURN 'no_row';
    END IF;
    IF r.status <> 'unconfirmed' THEN
        RETURN 'not_unconfirmed';
    END IF;
    -- once per row (sender_sent's key); the row's lock keeps a second call of it waiting for this one. The send
    -- log before the history, as sender_record_sent writes them: a month being made locks them in that order.
    IF p_sent AND NOT EXISTS (SELECT 1 FROM sender_sent WHERE email_id = p_email) THEN
        INSERT INTO sender_send_log (email_id, message_id, mailbox, source_ip, accepted_at, reply)
        VALUES (p_email, r.message_id, r.mailbox, r.source_ip, coalesce(r.attempt_started_at, now_at),
                'resolved as sent: ' || coalesce(p_note, ''));
    END IF;
    PERFORM sender_event(p_email, 'resolved', format('%s by a person: %s', CASE WHEN p_sent THEN 'sent'
                                                     ELSE 'not sent' END, coalesce(p_note, '')), p_now);
    IF p_sent THEN
        UPDATE sender_emails SET status = 'sent', last_error = NULL, updated_at = now_at WHERE id = p_email;
    ELSE
        UPDATE sender_emails SET status = 'failed', last_error = 'resolved as not sent: ' || coalesce(p_note, ''),
                                 updated_at = now_at
        WHERE id = p_email;
        UPDATE sender_leads SET ended = 'failed', ended_at = now_at
        WHERE campaign_id = r.campaign_id AND lead = r.lead AND ended = 'unconfirmed';
    END IF;
    RETURN 'resolved';
END
$$;

CREATE OR REPLACE FUNCTION sender_record_sent(p_email bigint, p_reply text, p_now timestamptz DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
    logged bigint;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT * INTO r FROM sender_emails WHERE id = p_email FOR UPDATE;
    IF r.attempt_id IS NULL OR r.message_id IS NULL THEN
        RAISE EXCEPTION 'sender_record_sent: row % has no attempt', p_email;
    END IF;
    -- once per row (sender_sent's key, written with the entry); the row's lock above keeps a second call waiting
    IF NOT EXISTS (SELECT 1 FROM sender_sent WHERE email_id = p_email) THEN
        INSERT INTO sender_send_log (email_id, message_id, mailbox, source_ip, accepted_at, reply)
        VALUES (p_email, r.message_id, r.mailbox, r.source_ip, now_at, coalesce(p_reply, ''))
        RETURNING email_id INTO logged;
    END IF;
    UPDATE sender_emails SET status = 'sent', last_error = NULL, updated_at = now_at
    WHERE id = p_email AND status <> 'sent';
    IF logged IS NOT NULL THEN
        PERFORM sender_event(p_email, 'sent', coalesce(p_reply, ''), p_now);
    END IF;
    RETURN logged IS NOT NULL;
END
$$;

CREATE OR REPLACE FUNCTION sender_settle(p_email bigint, p_outcome text, p_detail text, p_delay_s double precision,
                              p_max_attempts integer, p_now timestamptz DEFAULT NULL) RETURNS sender_status
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
    new_status sender_status;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email FOR UPDATE;
    IF r.id IS NULL THEN
        RAISE EXCEPTION 'sender_settle: no row %', p_email;
    END IF;
    IF r.status <> 'sending' AND sender_rank(r.status) > sender_rank('sending')
       AND NOT (r.status = 'sent' AND p_outcome IN ('failed', 'suppress', 'bounce')
                AND NOT EXISTS (SELECT 1 FROM sender_sent WHERE email_id = p_email)) THEN
        RETURN r.status;
    END IF;
    IF p_outcome IN ('suppress', 'bounce') THEN
        PERFORM sender_suppress(r.recipient, p_detail, p_now);
        new_status := 'suppressed';
    ELSIF p_outcome = 'unconfirmed' THEN
        new_status := 'unconfirmed';
    ELSIF p_outcome = 'failed' THEN
        new_status := 'failed';
    ELSIF p_outcome IN ('retry', 'reroute') THEN
        IF sender_is_suppressed(r.recipient) THEN
            new_status := 'suppressed';
        ELSIF p_outcome = 'retry' AND r.attempts >= p_max_attempts THEN
            new_status := 'failed';
        ELSE
            new_status := 'retry';
        END IF;
    ELSE
        RAISE EXCEPTION 'sender_settle: unknown outcome %', p_outcome;
    END IF;
    UPDATE sender_emails
    SET status = new_status, last_error = p_detail, updated_at = now_at,
        attempts = CASE WHEN p_outcome = 'reroute' AND r.attempt_id IS NOT NULL
                        THEN greatest(attempts - 1, 0) ELSE attempts END,
        -- a retry proves the last attempt did not leave: the next one may start
        attempt_id = CASE WHEN new_status = 'retry' THEN NULL ELSE attempt_id END,
        not_before = CASE WHEN new_status = 'retry' THEN now_at + make_interval(secs => p_delay_s) ELSE not_before END,
        due_at = CASE WHEN new_status = 'retry' THEN least(due_at, now_at + make_interval(secs => p_delay_s))
                      ELSE due_at END,
        claimed_by = CASE WHEN new_status = 'retry' THEN NULL ELSE claimed_by END
    WHERE id = p_email;
    IF p_outcome = 'bounce' THEN
        -- once per attempt: the mailbox's health counts it as it counts a bounce read from the inbox
        INSERT INTO sender_feedback (email_id, event, source, ref, mailbox, occurred_at, received_at, detail)
        VALUES (p_email, 'bounced', 'agent', 'attempt:' || coalesce(r.attempt_id::text, r.attempts::text),
                r.mailbox, now_at, now_at, left(coalesce(p_detail, ''), 500))
        ON CONFLICT (email_id, event, ref) DO NOTHING;
    END IF;
    PERFORM sender_event(p_email, p_outcome, p_detail, p_now);
    RETURN new_status;
END
$$;

-- The sweep leaves a row someone holds for the next sweep: two sweeps that waited deadlocked (stop 36's CI).
CREATE OR REPLACE FUNCTION sender_sweep(p_older_than_s double precision, p_now timestamptz DEFAULT NULL,
                             OUT requeued integer, OUT unconfirmed integer)
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
BEGIN
    WITH stale AS (
        UPDATE sender_emails
        SET status = CASE WHEN sender_is_suppressed(recipient) THEN 'suppressed'::sender_status
                          WHEN attempts = 0 THEN 'queued'::sender_status ELSE 'retry'::sender_status END,
            claimed_by = NULL, updated_at = now_at
        WHERE id IN (SELECT id FROM sender_emails
                     WHERE status = 'sending' AND attempt_id IS NULL
                       AND claimed_at < now_at - make_interval(secs => p_older_than_s)
                     FOR NO KEY UPDATE SKIP LOCKED)
        RETURNING id
    )
    SELECT count(*) INTO requeued
    FROM (SELECT sender_event(id, 'swept', 'requeued: no attempt started', p_now) FROM stale) s;
    WITH stale AS (
        UPDATE sender_emails SET status = 'unconfirmed', updated_at = now_at
        WHERE id IN (SELECT id FROM sender_emails e
                     WHERE status = 'sending' AND attempt_id IS NOT NULL
                       AND coalesce(attempt_started_at, claimed_at) < now_at - make_interval(secs => p_older_than_s)
                       AND NOT EXISTS (SELECT 1 FROM sender_sent WHERE email_id = e.id)
                     FOR NO KEY UPDATE SKIP LOCKED)
        RETURNING id
    )
    SELECT count(*) INTO unconfirmed
    FROM (SELECT sender_event(id, 'swept', 'unconfirmed: the attempt had started; check Sent Items', p_now)
          FROM stale) s;
END
$$;

CREATE OR REPLACE FUNCTION sender_count_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM sender_count_changes WHERE counter = TG_ARGV[0];
    DELETE FROM sender_counts WHERE counter = TG_ARGV[0];
    IF TG_ARGV[0] = 'events' THEN
        DELETE FROM sender_events_retired;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION sender_recount() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('sender_fold_counts'));  -- and no fold meanwhile
    LOCK TABLE sender_emails, sender_events, sender_events_retired IN SHARE MODE;
    DELETE FROM sender_count_changes;
    DELETE FROM sender_counts;
    INSERT INTO sender_counts (counter, key, n)
    SELECT 'rows', status::text, count(*) FROM sender_emails GROUP BY status;
    INSERT INTO sender_counts (counter, key, n)
    SELECT 'events', kind, sum(n) FROM (SELECT kind, count(*) AS n FROM sender_events GROUP BY kind
                                        UNION ALL
                                        SELECT kind, n FROM sender_events_retired) AS counted
    GROUP BY kind;
END
$$;
