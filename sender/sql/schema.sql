-- The send ledger as it is now, version 5: what a fresh database gets from `sendhost sender migrate`.
-- Rules live here, not in Python: one row per (lead, step), one send-log entry per row, one suppression function,
-- the claim as one statement, every state change as a function under one rank guard, and feedback (delivered,
-- replied, bounced, unsubscribed, complained) applied through one function whoever reports it.
--
-- A database made by an earlier sendhost is brought here by migrations/<version>_<n>_<what>.sql, in order; a
-- change to this file is a new migration too. tests/sender/test_schema.py proves that version 1
-- (migrations/1_0_baseline.sql) plus every migration gives this file's catalogue.
--
-- Time: every function that reads or writes the time takes `p_now` last; NULL (the default) is the database's
-- own now(). A caller on a clock of its own (`sender.Ledger(clock=...)`: tests, the simulation) passes it.

CREATE TYPE sender_status AS ENUM (
    'queued',       -- waiting for its first attempt
    'sending',      -- claimed by an agent
    'sent',         -- the submission server accepted it (a send-log entry exists)
    'retry',        -- a clear retryable failure: waits until not_before
    'failed',       -- permanent failure, or out of attempts
    'unconfirmed',  -- we do not know whether it left (timeout after DATA, agent died mid-send): never resent
    'suppressed',   -- the recipient is suppressed
    'cancelled',    -- withdrawn by a person, or a later step of a lead who replied
    -- what happened after the handoff (feedback, sender_apply_event): ranked above sent
    'delivered',    -- a relay reported delivery
    'replied',      -- the recipient replied
    'bounced',      -- a hard bounce: the recipient is suppressed
    'unsubscribed', -- one-click or otherwise: the recipient is suppressed
    'complained'    -- a spam complaint: the recipient is suppressed
);

CREATE TABLE sender_emails (
    id bigserial PRIMARY KEY,
    lead text NOT NULL CHECK (lead <> ''),
    step integer NOT NULL CHECK (step >= 1),
    recipient text NOT NULL CHECK (recipient = lower(recipient) AND recipient LIKE '%_@_%'),
    mailbox_group text NOT NULL CHECK (mailbox_group <> ''),
    subject text NOT NULL,
    body text NOT NULL,
    not_before timestamptz NOT NULL DEFAULT now(),
    status sender_status NOT NULL DEFAULT 'queued',
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- fixed for the row's life: the application's handle, and the header the recipient's server dedups on
    idempotency_key uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
    message_id text UNIQUE,  -- generated before the first SMTP call, then never changed
    attempt_id uuid,         -- set when an SMTP submission starts; cleared only when a failure proves it did not
    attempt_started_at timestamptz,
    claimed_at timestamptz,
    claimed_by text,
    mailbox text,
    source_ip text,
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (lead, step)
);
CREATE INDEX sender_emails_due ON sender_emails (not_before, id) WHERE status IN ('queued', 'retry');
CREATE INDEX sender_emails_sending ON sender_emails (claimed_at) WHERE status = 'sending';
CREATE INDEX sender_emails_recipient ON sender_emails (recipient);

-- Written only after the submission server accepted the message; one per row.
CREATE TABLE sender_send_log (
    email_id bigint PRIMARY KEY REFERENCES sender_emails (id),
    message_id text NOT NULL UNIQUE,
    mailbox text NOT NULL,
    source_ip text,
    accepted_at timestamptz NOT NULL DEFAULT now(),
    reply text NOT NULL DEFAULT ''
);
CREATE INDEX sender_send_log_mailbox ON sender_send_log (mailbox, accepted_at);

CREATE TABLE sender_suppressions (
    address text PRIMARY KEY CHECK (address = lower(address)),
    reason text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The row's history: the answer to "what happened to this lead's step 2?".
CREATE TABLE sender_events (
    id bigserial PRIMARY KEY,
    email_id bigint NOT NULL REFERENCES sender_emails (id),
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind text NOT NULL,
    detail text NOT NULL DEFAULT ''
);
CREATE INDEX sender_events_email ON sender_events (email_id, id);

CREATE TABLE sender_settings (
    name text PRIMARY KEY,
    value text NOT NULL
);

-- Every piece of feedback, once per (row, event, reference): the replay guard and the health counters' source.
CREATE TABLE sender_feedback (
    id bigserial PRIMARY KEY,
    email_id bigint NOT NULL REFERENCES sender_emails (id),
    event text NOT NULL CHECK (event IN ('sent', 'delivered', 'deferred', 'auto_replied', 'replied', 'bounced',
                                         'unsubscribed', 'complained')),
    source text NOT NULL,          -- agent | inbox | one-click | webhook | person
    ref text NOT NULL,             -- what makes a replay a replay: the webhook's time, the IMAP message, ...
    mailbox text,                  -- the sending mailbox of the row, for health per mailbox
    occurred_at timestamptz NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    detail text NOT NULL DEFAULT '',
    UNIQUE (email_id, event, ref)
);
CREATE INDEX sender_feedback_mailbox ON sender_feedback (mailbox, event, occurred_at);

-- Where each mailbox's inbox reader got to: a message is read once per (mailbox, UIDVALIDITY).
CREATE TABLE sender_inbox_marks (
    mailbox text PRIMARY KEY,
    uidvalidity bigint NOT NULL,
    last_uid bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The rank order (higher wins; once a row was handed over, its status never moves to a lower rank):
--   0 queued, retry   1 sending   2 failed, cancelled, suppressed   3 unconfirmed   4 sent   5 delivered
--   6 replied   7 bounced   8 unsubscribed   9 complained
-- So a late `sent` never overwrites `delivered`; nothing overwrites bounced, unsubscribed or complained except a
-- stronger one of those three (each of them suppresses the recipient, so which one the row shows changes no
-- sending; the order only makes every arrival order end in the same status: complaint is the signal the spam
-- rate counts, so it shows). The one list of it, read by sender_rank and, through it, by every function here;
-- the Python enums are tested against it. Text, not sender_status, as in migrations/4_1_status_ranks.sql.
CREATE FUNCTION sender_status_ranks() RETURNS TABLE (status text, rank integer) LANGUAGE sql IMMUTABLE AS $$
    VALUES ('queued', 0), ('retry', 0), ('sending', 1), ('failed', 2), ('cancelled', 2), ('suppressed', 2),
           ('unconfirmed', 3), ('sent', 4), ('delivered', 5), ('replied', 6), ('bounced', 7), ('unsubscribed', 8),
           ('complained', 9)
$$;

CREATE FUNCTION sender_rank(s sender_status) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT rank FROM sender_status_ranks() WHERE status = s::text
$$;

-- The guard on every status change, from any function or a person at psql: once a row was handed over
-- (rank >= sent), its status only moves up. Before the handoff the agent's own moves (sending -> retry) stand.
CREATE FUNCTION sender_guarded_status(p_old sender_status, p_new sender_status) RETURNS sender_status
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN sender_rank(p_old) >= sender_rank('sent') AND sender_rank(p_new) < sender_rank(p_old)
                THEN p_old ELSE p_new END
$$;

CREATE FUNCTION sender_rank_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.status := sender_guarded_status(OLD.status, NEW.status);
    RETURN NEW;
END
$$;

CREATE TRIGGER sender_rank_guard BEFORE UPDATE OF status ON sender_emails
FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION sender_rank_guard();

-- The one suppression check: called by enqueue, by each requeue, and right before the SMTP handoff.
CREATE FUNCTION sender_is_suppressed(p_address text) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM sender_suppressions WHERE address = lower(p_address))
$$;

CREATE FUNCTION sender_event(p_email bigint, p_kind text, p_detail text, p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO sender_events (email_id, at, kind, detail)
    VALUES (p_email, coalesce(p_now, clock_timestamp()), p_kind, coalesce(p_detail, ''))
$$;

-- queued | duplicate | suppressed; a duplicate (lead, step) is refused by the unique constraint.
CREATE FUNCTION sender_enqueue(p_lead text, p_step integer, p_recipient text, p_group text, p_subject text,
                               p_body text, p_not_before timestamptz, p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    new_id bigint;
BEGIN
    IF sender_is_suppressed(p_recipient) THEN
        RETURN 'suppressed';
    END IF;
    INSERT INTO sender_emails (lead, step, recipient, mailbox_group, subject, body, not_before, created_at,
                               updated_at)
    VALUES (p_lead, p_step, lower(p_recipient), p_group, p_subject, p_body, coalesce(p_not_before, now_at), now_at,
            now_at)
    ON CONFLICT (lead, step) DO NOTHING
    RETURNING id INTO new_id;
    IF new_id IS NULL THEN
        RETURN 'duplicate';
    END IF;
    PERFORM sender_event(new_id, 'queued', '', p_now);
    RETURN 'queued';
END
$$;

CREATE FUNCTION sender_suppress(p_address text, p_reason text, p_now timestamptz DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    withdrawn integer;
BEGIN
    INSERT INTO sender_suppressions (address, reason, created_at)
    VALUES (lower(p_address), coalesce(p_reason, ''), now_at)
    ON CONFLICT (address) DO NOTHING;
    WITH hit AS (
        UPDATE sender_emails SET status = 'suppressed', updated_at = now_at
        WHERE recipient = lower(p_address) AND status IN ('queued', 'retry')
        RETURNING id
    )
    SELECT count(*) INTO withdrawn FROM (SELECT sender_event(id, 'suppressed', p_reason, p_now) FROM hit) AS logged;
    RETURN withdrawn;
END
$$;

-- One statement: due rows, oldest first, each claimed by exactly one agent.
-- Its commit does not wait for the disk (synchronous_commit off for this transaction only): a claim lost in a
-- database crash only puts the row back in the queue, and the attempt's start, which must survive, is a durable
-- commit that flushes the claim's WAL with it. PL/pgSQL keeps the statement's plan between calls.
-- The claim wants the oldest due row: the first entries of sender_emails_due, read in order. On a table whose
-- statistics are stale (a fresh ledger, a bulk enqueue that autovacuum has not analyzed yet) the planner believes
-- the queue holds a handful of rows and reads every due row to sort them instead (version 3): sorting is never
-- what a claim wants, so the function plans without it, whatever the statistics say.
CREATE FUNCTION sender_claim(p_worker text, p_limit integer, p_groups text[], p_now timestamptz DEFAULT NULL)
RETURNS SETOF sender_emails
LANGUAGE plpgsql
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    RETURN QUERY
    UPDATE sender_emails SET status = 'sending', claimed_at = now_at, claimed_by = p_worker, updated_at = now_at
    WHERE id IN (
        SELECT id FROM sender_emails
        WHERE status IN ('queued', 'retry') AND not_before <= now_at
          AND (p_groups IS NULL OR mailbox_group = ANY (p_groups))
        ORDER BY not_before, id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    RETURNING *;
END
$$;

-- Give back a claim whose attempt never started (no mailbox free, no lease, agent stopping). Not waiting for the
-- disk, as the claim: if it is lost, the row stays `sending` without an attempt and the sweep requeues it.
CREATE FUNCTION sender_unclaim(p_email bigint, p_delay_s double precision, p_why text,
                               p_now timestamptz DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    UPDATE sender_emails
    SET status = CASE WHEN sender_is_suppressed(recipient) THEN 'suppressed'::sender_status
                      WHEN attempts = 0 THEN 'queued'::sender_status ELSE 'retry'::sender_status END,
        not_before = now_at + make_interval(secs => p_delay_s), claimed_by = NULL, updated_at = now_at
    WHERE id = p_email AND status = 'sending' AND attempt_id IS NULL
    RETURNING * INTO r;
    IF r.id IS NULL THEN
        RETURN false;
    END IF;
    IF p_why <> '' THEN
        PERFORM sender_event(p_email, 'unclaimed', p_why, p_now);
    END IF;
    RETURN true;
END
$$;

-- The last check before the handoff, and the attempt's start, in one call: ok (with the row's fixed
-- Message-ID) | suppressed | lost (the row is no longer ours to send).
CREATE FUNCTION sender_begin_attempt(p_email bigint, p_attempt uuid, p_mailbox text, p_source_ip text,
                                     p_message_id text, p_now timestamptz DEFAULT NULL,
                                     OUT outcome text, OUT message_id text)
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email FOR UPDATE;
    IF r.status <> 'sending' OR r.attempt_id IS NOT NULL THEN
        outcome := 'lost';
        RETURN;
    END IF;
    IF sender_is_suppressed(r.recipient) THEN
        UPDATE sender_emails SET status = 'suppressed', updated_at = now_at WHERE id = p_email;
        PERFORM sender_event(p_email, 'suppressed', 'suppressed before the handoff', p_now);
        outcome := 'suppressed';
        RETURN;
    END IF;
    UPDATE sender_emails
    SET attempt_id = p_attempt, attempt_started_at = now_at, attempts = attempts + 1, mailbox = p_mailbox,
        source_ip = p_source_ip, message_id = coalesce(sender_emails.message_id, p_message_id), updated_at = now_at
    WHERE id = p_email
    RETURNING sender_emails.message_id INTO message_id;
    PERFORM sender_event(p_email, 'attempt',
                         format('attempt %s via %s from %s', r.attempts + 1, p_mailbox, coalesce(p_source_ip, '-')),
                         p_now);
    outcome := 'ok';
END
$$;

-- The server accepted the message: the send-log entry and `sent`, once. True when this call recorded it.
-- The one durable commit of a send is the attempt's start (sender_begin_attempt): it is what keeps a row from
-- ever being sent twice. This commit does not wait for the disk: if a database crash loses it, the row is left
-- `sending` with its attempt started, and the sweep settles it as unconfirmed, never resent, still counted
-- against the mailbox's cap (sends_since counts started attempts): the under-sending side of not knowing.
CREATE FUNCTION sender_record_sent(p_email bigint, p_reply text, p_now timestamptz DEFAULT NULL) RETURNS boolean
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
    INSERT INTO sender_send_log (email_id, message_id, mailbox, source_ip, accepted_at, reply)
    VALUES (p_email, r.message_id, r.mailbox, r.source_ip, now_at, coalesce(p_reply, ''))
    ON CONFLICT (email_id) DO NOTHING
    RETURNING email_id INTO logged;
    UPDATE sender_emails SET status = 'sent', last_error = NULL, updated_at = now_at
    WHERE id = p_email AND status <> 'sent';
    IF logged IS NOT NULL THEN
        PERFORM sender_event(p_email, 'sent', coalesce(p_reply, ''), p_now);
    END IF;
    RETURN logged IS NOT NULL;
END
$$;

-- Settle a failed or unknown attempt. p_outcome:
--   retry       a clear retryable failure: back in p_delay_s, unless out of attempts (then failed)
--   reroute     the mailbox's fault (auth, quota, rate): back in p_delay_s, the attempt refunded
--   failed      permanent (content)
--   suppress    the recipient's address is bad: suppress it everywhere
--   unconfirmed we do not know whether it left: never resent
-- The rank guard: nothing here touches a row that is already sent, or settled (ranked above sending).
CREATE FUNCTION sender_settle(p_email bigint, p_outcome text, p_detail text, p_delay_s double precision,
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
    IF r.status = 'sent' OR (r.status <> 'sending' AND sender_rank(r.status) > sender_rank('sending')) THEN
        RETURN r.status;
    END IF;
    IF p_outcome = 'suppress' THEN
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
        claimed_by = CASE WHEN new_status = 'retry' THEN NULL ELSE claimed_by END
    WHERE id = p_email;
    PERFORM sender_event(p_email, p_outcome, p_detail, p_now);
    RETURN new_status;
END
$$;

-- Rows whose agent died: back to the queue if the attempt never started, else unconfirmed (never resent).
CREATE FUNCTION sender_sweep(p_older_than_s double precision, p_now timestamptz DEFAULT NULL,
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
        WHERE status = 'sending' AND attempt_id IS NULL
          AND claimed_at < now_at - make_interval(secs => p_older_than_s)
        RETURNING id
    )
    SELECT count(*) INTO requeued
    FROM (SELECT sender_event(id, 'swept', 'requeued: no attempt started', p_now) FROM stale) s;
    WITH stale AS (
        UPDATE sender_emails SET status = 'unconfirmed', updated_at = now_at
        WHERE status = 'sending' AND attempt_id IS NOT NULL
          AND coalesce(attempt_started_at, claimed_at) < now_at - make_interval(secs => p_older_than_s)
          AND NOT EXISTS (SELECT 1 FROM sender_send_log WHERE email_id = sender_emails.id)
        RETURNING id
    )
    SELECT count(*) INTO unconfirmed
    FROM (SELECT sender_event(id, 'swept', 'unconfirmed: the attempt had started; check Sent Items', p_now)
          FROM stale) s;
END
$$;

-- The one function every piece of feedback goes through. Answers:
--   applied   the row's status moved
--   recorded  a new event that changed no status (lower rank, or an event with no status of its own)
--   replay    this (row, event, reference) was already recorded: nothing changed
--   no_row    no such row
CREATE FUNCTION sender_apply_event(p_email bigint, p_event text, p_at timestamptz, p_source text, p_ref text,
                                   p_detail text, p_now timestamptz DEFAULT NULL) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
    target sender_status;
    recorded bigint;
    after sender_status;
BEGIN
    -- A replay is answered from a read, without the row lock: a thousand clicks on one link cost no writes.
    -- (The insert below stays the guard when two first arrivals race.)
    IF EXISTS (SELECT 1 FROM sender_feedback WHERE email_id = p_email AND event = p_event
               AND ref = coalesce(p_ref, '')) THEN
        RETURN 'replay';
    END IF;
    SELECT * INTO r FROM sender_emails WHERE id = p_email FOR UPDATE;
    IF r.id IS NULL THEN
        RETURN 'no_row';
    END IF;
    -- An event named as a status sets it (sent, delivered, replied, bounced, unsubscribed, complained), under the
    -- rank guard; the others (deferred, auto_replied) are recorded only.
    IF EXISTS (SELECT 1 FROM sender_status_ranks() WHERE status = p_event) THEN
        target := p_event::sender_status;
    END IF;
    INSERT INTO sender_feedback (email_id, event, source, ref, mailbox, occurred_at, received_at, detail)
    VALUES (p_email, p_event, p_source, coalesce(p_ref, ''), r.mailbox, coalesce(p_at, now_at), now_at,
            left(coalesce(p_detail, ''), 500))
    ON CONFLICT (email_id, event, ref) DO NOTHING
    RETURNING id INTO recorded;
    IF recorded IS NULL THEN
        RETURN 'replay';
    END IF;
    PERFORM sender_event(p_email, p_event, format('%s: %s', p_source, left(coalesce(p_detail, ''), 300)), p_now);
    -- What the event means beyond the row, whatever the row's status ends as.
    IF p_event IN ('bounced', 'unsubscribed', 'complained') THEN
        PERFORM sender_suppress(r.recipient, p_event || ' (' || p_source || ')', p_now);
    END IF;
    IF p_event = 'replied' THEN  -- stop on reply: the lead's later steps are withdrawn
        UPDATE sender_emails SET status = 'cancelled', updated_at = now_at
        WHERE lead = r.lead AND step > r.step AND status IN ('queued', 'retry');
    END IF;
    IF target IS NULL THEN
        RETURN 'recorded';
    END IF;
    UPDATE sender_emails SET status = target, updated_at = now_at
    WHERE id = p_email AND status IS DISTINCT FROM target
    RETURNING status INTO after;
    IF after IS NOT NULL AND after = target THEN
        RETURN 'applied';
    END IF;
    RETURN 'recorded';
END
$$;

-- The same, naming the row by the Message-ID it was sent with (angle brackets optional).
CREATE FUNCTION sender_apply_event_by_message_id(p_message_id text, p_event text, p_at timestamptz, p_source text,
                                                 p_ref text, p_detail text, p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    found bigint;
BEGIN
    SELECT id INTO found FROM sender_emails
    WHERE message_id = '<' || btrim(p_message_id, '<> ') || '>';
    IF found IS NULL THEN
        RETURN 'no_row';
    END IF;
    RETURN sender_apply_event(found, p_event, p_at, p_source, p_ref, p_detail, p_now);
END
$$;

-- The HMAC key of unsubscribe tokens, created on first use and never changed.
CREATE FUNCTION sender_unsubscribe_key(p_new text) RETURNS text LANGUAGE sql AS $$
    INSERT INTO sender_settings (name, value) VALUES ('unsubscribe_key', p_new) ON CONFLICT (name) DO NOTHING;
    SELECT value FROM sender_settings WHERE name = 'unsubscribe_key';
$$;
