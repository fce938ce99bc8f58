-- Version 1, the send ledger as first shipped. Never applied by `sendhost sender migrate`: a fresh database gets
-- ../schema.sql (the current version) and a database at version 1 or later gets only the migrations above it.
-- Kept, byte for byte in its definitions, so tests/sender/test_schema.py can build a version-1 database and prove
-- that it plus every migration is the schema.sql catalogue.

CREATE TYPE sender_status AS ENUM (
    'queued',       -- waiting for its first attempt
    'sending',      -- claimed by an agent
    'sent',         -- the submission server accepted it (a send-log entry exists)
    'retry',        -- a clear retryable failure: waits until not_before
    'failed',       -- permanent failure, or out of attempts
    'unconfirmed',  -- we do not know whether it left (timeout after DATA, agent died mid-send): never resent
    'suppressed',   -- the recipient is suppressed
    'cancelled'     -- withdrawn by a person
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

-- A late event never downgrades a row: a settled status outranks sending, and sent outranks everything.
CREATE FUNCTION sender_rank(s sender_status) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE s WHEN 'queued' THEN 0 WHEN 'retry' THEN 0 WHEN 'sending' THEN 1
                  WHEN 'failed' THEN 2 WHEN 'cancelled' THEN 2 WHEN 'suppressed' THEN 2
                  WHEN 'unconfirmed' THEN 3 WHEN 'sent' THEN 4 END
$$;

-- The one suppression check: called by enqueue, by each requeue, and right before the SMTP handoff.
CREATE FUNCTION sender_is_suppressed(p_address text) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM sender_suppressions WHERE address = lower(p_address))
$$;

CREATE FUNCTION sender_event(p_email bigint, p_kind text, p_detail text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO sender_events (email_id, kind, detail) VALUES (p_email, p_kind, coalesce(p_detail, ''))
$$;

-- queued | duplicate | suppressed; a duplicate (lead, step) is refused by the unique constraint.
CREATE FUNCTION sender_enqueue(p_lead text, p_step integer, p_recipient text, p_group text, p_subject text,
                               p_body text, p_not_before timestamptz) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    new_id bigint;
BEGIN
    IF sender_is_suppressed(p_recipient) THEN
        RETURN 'suppressed';
    END IF;
    INSERT INTO sender_emails (lead, step, recipient, mailbox_group, subject, body, not_before)
    VALUES (p_lead, p_step, lower(p_recipient), p_group, p_subject, p_body, coalesce(p_not_before, now()))
    ON CONFLICT (lead, step) DO NOTHING
    RETURNING id INTO new_id;
    IF new_id IS NULL THEN
        RETURN 'duplicate';
    END IF;
    PERFORM sender_event(new_id, 'queued', '');
    RETURN 'queued';
END
$$;

CREATE FUNCTION sender_suppress(p_address text, p_reason text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    withdrawn integer;
BEGIN
    INSERT INTO sender_suppressions (address, reason) VALUES (lower(p_address), coalesce(p_reason, ''))
    ON CONFLICT (address) DO NOTHING;
    WITH hit AS (
        UPDATE sender_emails SET status = 'suppressed', updated_at = now()
        WHERE recipient = lower(p_address) AND status IN ('queued', 'retry')
        RETURNING id
    )
    SELECT count(*) INTO withdrawn FROM (SELECT sender_event(id, 'suppressed', p_reason) FROM hit) AS logged;
    RETURN withdrawn;
END
$$;

-- One statement: due rows, oldest first, each claimed by exactly one agent.
-- Its commit does not wait for the disk (synchronous_commit off for this transaction only): a claim lost in a
-- database crash only puts the row back in the queue, and the attempt's start, which must survive, is a durable
-- commit that flushes the claim's WAL with it. PL/pgSQL keeps the statement's plan between calls.
CREATE FUNCTION sender_claim(p_worker text, p_limit integer, p_groups text[]) RETURNS SETOF sender_emails
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    RETURN QUERY
    UPDATE sender_emails SET status = 'sending', claimed_at = now(), claimed_by = p_worker, updated_at = now()
    WHERE id IN (
        SELECT id FROM sender_emails
        WHERE status IN ('queued', 'retry') AND not_before <= now()
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
CREATE FUNCTION sender_unclaim(p_email bigint, p_delay_s double precision, p_why text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    r sender_emails;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    UPDATE sender_emails
    SET status = CASE WHEN sender_is_suppressed(recipient) THEN 'suppressed'::sender_status
                      WHEN attempts = 0 THEN 'queued'::sender_status ELSE 'retry'::sender_status END,
        not_before = now() + make_interval(secs => p_delay_s), claimed_by = NULL, updated_at = now()
    WHERE id = p_email AND status = 'sending' AND attempt_id IS NULL
    RETURNING * INTO r;
    IF r.id IS NULL THEN
        RETURN false;
    END IF;
    IF p_why <> '' THEN
        PERFORM sender_event(p_email, 'unclaimed', p_why);
    END IF;
    RETURN true;
END
$$;

-- The last check before the handoff, and the attempt's start, in one call: ok (with the row's fixed
-- Message-ID) | suppressed | lost (the row is no longer ours to send).
CREATE FUNCTION sender_begin_attempt(p_email bigint, p_attempt uuid, p_mailbox text, p_source_ip text,
                                     p_message_id text, OUT outcome text, OUT message_id text)
LANGUAGE plpgsql AS $$
DECLARE
    r sender_emails;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email FOR UPDATE;
    IF r.status <> 'sending' OR r.attempt_id IS NOT NULL THEN
        outcome := 'lost';
        RETURN;
    END IF;
    IF sender_is_suppressed(r.recipient) THEN
        UPDATE sender_emails SET status = 'suppressed', updated_at = now() WHERE id = p_email;
        PERFORM sender_event(p_email, 'suppressed', 'suppressed before the handoff');
        outcome := 'suppressed';
        RETURN;
    END IF;
    UPDATE sender_emails
    SET attempt_id = p_attempt, attempt_started_at = now(), attempts = attempts + 1, mailbox = p_mailbox,
        source_ip = p_source_ip, message_id = coalesce(sender_emails.message_id, p_message_id), updated_at = now()
    WHERE id = p_email
    RETURNING sender_emails.message_id INTO message_id;
    PERFORM sender_event(p_email, 'attempt',
                         format('attempt %s via %s from %s', r.attempts + 1, p_mailbox, coalesce(p_source_ip, '-')));
    outcome := 'ok';
END
$$;

-- The server accepted the message: the send-log entry and `sent`, once. True when this call recorded it.
-- The one durable commit of a send is the attempt's start (sender_begin_attempt): it is what keeps a row from
-- ever being sent twice. This commit does not wait for the disk: if a database crash loses it, the row is left
-- `sending` with its attempt started, and the sweep settles it as unconfirmed, never resent, still counted
-- against the mailbox's cap (sends_since counts started attempts): the under-sending side of not knowing.
CREATE FUNCTION sender_record_sent(p_email bigint, p_reply text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    r sender_emails;
    logged bigint;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT * INTO r FROM sender_emails WHERE id = p_email FOR UPDATE;
    IF r.attempt_id IS NULL OR r.message_id IS NULL THEN
        RAISE EXCEPTION 'sender_record_sent: row % has no attempt', p_email;
    END IF;
    INSERT INTO sender_send_log (email_id, message_id, mailbox, source_ip, reply)
    VALUES (p_email, r.message_id, r.mailbox, r.source_ip, coalesce(p_reply, ''))
    ON CONFLICT (email_id) DO NOTHING
    RETURNING email_id INTO logged;
    UPDATE sender_emails SET status = 'sent', last_error = NULL, updated_at = now()
    WHERE id = p_email AND status <> 'sent';
    IF logged IS NOT NULL THEN
        PERFORM sender_event(p_email, 'sent', coalesce(p_reply, ''));
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
-- The rank guard: nothing here touches a row that is already sent.
CREATE FUNCTION sender_settle(p_email bigint, p_outcome text, p_detail text, p_delay_s double precision,
                              p_max_attempts integer) RETURNS sender_status LANGUAGE plpgsql AS $$
DECLARE
    r sender_emails;
    new_status sender_status;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email FOR UPDATE;
    IF r.id IS NULL THEN
        RAISE EXCEPTION 'sender_settle: no row %', p_email;
    END IF;
    IF r.status = 'sent' OR (r.status <> 'sending' AND sender_rank(r.status) >= 2) THEN
        RETURN r.status;
    END IF;
    IF p_outcome = 'suppress' THEN
        PERFORM sender_suppress(r.recipient, p_detail);
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
    SET status = new_status, last_error = p_detail, updated_at = now(),
        attempts = CASE WHEN p_outcome = 'reroute' AND r.attempt_id IS NOT NULL
                        THEN greatest(attempts - 1, 0) ELSE attempts END,
        -- a retry proves the last attempt did not leave: the next one may start
        attempt_id = CASE WHEN new_status = 'retry' THEN NULL ELSE attempt_id END,
        not_before = CASE WHEN new_status = 'retry' THEN now() + make_interval(secs => p_delay_s) ELSE not_before END,
        claimed_by = CASE WHEN new_status = 'retry' THEN NULL ELSE claimed_by END
    WHERE id = p_email;
    PERFORM sender_event(p_email, p_outcome, p_detail);
    RETURN new_status;
END
$$;

-- Rows whose agent died: back to the queue if the attempt never started, else unconfirmed (never resent).
CREATE FUNCTION sender_sweep(p_older_than_s double precision, OUT requeued integer, OUT unconfirmed integer)
LANGUAGE plpgsql AS $$
BEGIN
    WITH stale AS (
        UPDATE sender_emails
        SET status = CASE WHEN sender_is_suppressed(recipient) THEN 'suppressed'::sender_status
                          WHEN attempts = 0 THEN 'queued'::sender_status ELSE 'retry'::sender_status END,
            claimed_by = NULL, updated_at = now()
        WHERE status = 'sending' AND attempt_id IS NULL
          AND claimed_at < now() - make_interval(secs => p_older_than_s)
        RETURNING id
    )
    SELECT count(*) INTO requeued FROM (SELECT sender_event(id, 'swept', 'requeued: no attempt started') FROM stale) s;
    WITH stale AS (
        UPDATE sender_emails SET status = 'unconfirmed', updated_at = now()
        WHERE status = 'sending' AND attempt_id IS NOT NULL
          AND coalesce(attempt_started_at, claimed_at) < now() - make_interval(secs => p_older_than_s)
          AND NOT EXISTS (SELECT 1 FROM sender_send_log WHERE email_id = sender_emails.id)
        RETURNING id
    )
    SELECT count(*) INTO unconfirmed
    FROM (SELECT sender_event(id, 'swept', 'unconfirmed: the attempt had started; check Sent Items') FROM stale) s;
END
$$;

-- The HMAC key of unsubscribe tokens, created on first use and never changed.
CREATE FUNCTION sender_unsubscribe_key(p_new text) RETURNS text LANGUAGE sql AS $$
    INSERT INTO sender_settings (name, value) VALUES ('unsubscribe_key', p_new) ON CONFLICT (name) DO NOTHING;
    SELECT value FROM sender_settings WHERE name = 'unsubscribe_key';
$$;
