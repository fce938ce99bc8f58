-- Version 2: feedback into the ledger. What happened after the handoff (delivered, replied, bounced, unsubscribed,
-- complained) becomes the row's status under one rank guard, whoever reports it: the agent, the inbox reader, the
-- one-click unsubscribe endpoint or a relay's webhook.
--
-- The rank order (higher wins; a status never moves to a lower rank once the row was handed over):
--   0 queued, retry   1 sending   2 failed, cancelled, suppressed   3 unconfirmed   4 sent   5 delivered
--   6 replied   7 bounced   8 unsubscribed   9 complained
-- So a late `sent` never overwrites `delivered`; nothing overwrites bounced, unsubscribed or complained except a
-- stronger one of those three (each of them suppresses the recipient, so which one the row shows changes no
-- sending; the order only makes every arrival order end in the same status: complaint is the signal the spam
-- rate counts, so it shows). Events that change no status (deferred = a soft bounce, auto_replied) are recorded.
-- A replay (the same event with the same reference for the same row) is a no-op.
--
-- New enum values cannot be used inside the transaction that adds them, so the functions below compare text
-- (sender_rank) or are PL/pgSQL (checked only when called, after this migration committed).

ALTER TYPE sender_status ADD VALUE IF NOT EXISTS 'delivered';
ALTER TYPE sender_status ADD VALUE IF NOT EXISTS 'replied';
ALTER TYPE sender_status ADD VALUE IF NOT EXISTS 'bounced';
ALTER TYPE sender_status ADD VALUE IF NOT EXISTS 'unsubscribed';
ALTER TYPE sender_status ADD VALUE IF NOT EXISTS 'complained';

CREATE OR REPLACE FUNCTION sender_rank(s sender_status) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE s::text WHEN 'queued' THEN 0 WHEN 'retry' THEN 0 WHEN 'sending' THEN 1
                        WHEN 'failed' THEN 2 WHEN 'cancelled' THEN 2 WHEN 'suppressed' THEN 2
                        WHEN 'unconfirmed' THEN 3 WHEN 'sent' THEN 4 WHEN 'delivered' THEN 5
                        WHEN 'replied' THEN 6 WHEN 'bounced' THEN 7 WHEN 'unsubscribed' THEN 8
                        WHEN 'complained' THEN 9 END
$$;

-- The guard on every status change, from any function or a person at psql: once a row was handed over
-- (rank >= sent), its status only moves up. Before the handoff the agent's own moves (sending -> retry) stand.
CREATE FUNCTION sender_guarded_status(p_old sender_status, p_new sender_status) RETURNS sender_status
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN sender_rank(p_old) >= 4 AND sender_rank(p_new) < sender_rank(p_old) THEN p_old ELSE p_new END
$$;

CREATE FUNCTION sender_rank_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.status := sender_guarded_status(OLD.status, NEW.status);
    RETURN NEW;
END
$$;

CREATE TRIGGER sender_rank_guard BEFORE UPDATE OF status ON sender_emails
FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION sender_rank_guard();

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

-- The one function every piece of feedback goes through. Answers:
--   applied   the row's status moved
--   recorded  a new event that changed no status (lower rank, or an event with no status of its own)
--   replay    this (row, event, reference) was already recorded: nothing changed
--   no_row    no such row
CREATE FUNCTION sender_apply_event(p_email bigint, p_event text, p_at timestamptz, p_source text, p_ref text,
                                   p_detail text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
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
    target := CASE p_event WHEN 'sent' THEN 'sent' WHEN 'delivered' THEN 'delivered' WHEN 'replied' THEN 'replied'
                           WHEN 'bounced' THEN 'bounced' WHEN 'unsubscribed' THEN 'unsubscribed'
                           WHEN 'complained' THEN 'complained' END::sender_status;
    INSERT INTO sender_feedback (email_id, event, source, ref, mailbox, occurred_at, detail)
    VALUES (p_email, p_event, p_source, coalesce(p_ref, ''), r.mailbox, coalesce(p_at, now()),
            left(coalesce(p_detail, ''), 500))
    ON CONFLICT (email_id, event, ref) DO NOTHING
    RETURNING id INTO recorded;
    IF recorded IS NULL THEN
        RETURN 'replay';
    END IF;
    PERFORM sender_event(p_email, p_event, format('%s: %s', p_source, left(coalesce(p_detail, ''), 300)));
    -- What the event means beyond the row, whatever the row's status ends as.
    IF p_event IN ('bounced', 'unsubscribed', 'complained') THEN
        PERFORM sender_suppress(r.recipient, p_event || ' (' || p_source || ')');
    END IF;
    IF p_event = 'replied' THEN  -- stop on reply: the lead's later steps are withdrawn
        UPDATE sender_emails SET status = 'cancelled', updated_at = now()
        WHERE lead = r.lead AND step > r.step AND status IN ('queued', 'retry');
    END IF;
    IF target IS NULL THEN
        RETURN 'recorded';
    END IF;
    UPDATE sender_emails SET status = target, updated_at = now()
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
                                                 p_ref text, p_detail text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    found bigint;
BEGIN
    SELECT id INTO found FROM sender_emails
    WHERE message_id = '<' || btrim(p_message_id, '<> ') || '>';
    IF found IS NULL THEN
        RETURN 'no_row';
    END IF;
    RETURN sender_apply_event(found, p_event, p_at, p_source, p_ref, p_detail);
END
$$;

-- Where each mailbox's inbox reader got to: a message is read once per (mailbox, UIDVALIDITY).
CREATE TABLE sender_inbox_marks (
    mailbox text PRIMARY KEY,
    uidvalidity bigint NOT NULL,
    last_uid bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);
