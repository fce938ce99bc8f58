-- The send ledger as it is now, version 22: what a fresh database gets from `sendhost sender migrate`.
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
    'waiting',      -- not due yet: its lead's previous step is not sent, or its campaign is not running
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

CREATE TYPE sender_campaign_state AS ENUM ('draft', 'running', 'paused', 'stopped');

CREATE TABLE sender_campaigns (
    id bigserial PRIMARY KEY,
    name text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    kind text NOT NULL DEFAULT 'file' CHECK (kind IN ('file', 'enqueue')),
    mailbox_group text CHECK (mailbox_group <> ''),  -- NULL only for `enqueue`, whose rows name their own group
    state sender_campaign_state NOT NULL DEFAULT 'draft',
    allow_other_campaigns boolean NOT NULL DEFAULT false,
    source text NOT NULL DEFAULT '',  -- the campaign file as last applied: what the next apply is compared with
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- of what a claim sends while both are due, the least share that goes to follow-ups (steps >= 2; version 8):
    -- the campaign file's `followups_share`; `enqueue` keeps the default
    followups_share numeric NOT NULL DEFAULT 0.8 CHECK (followups_share BETWEEN 0 AND 1),
    -- a reply from another address at a lead's domain ends the lead's sequence (version 16): the file's
    -- `stop_on_domain_reply`
    stop_on_domain_reply boolean NOT NULL DEFAULT false,
    -- its sending window as the claim reads it (version 21, sender_window_intervals): true when it has none (no
    -- window and no skip dates, or `enqueue`); false until sender.ledger.window_intervals has read the file, so a
    -- file campaign's rows wait (fail closed) until its intervals are written
    always_open boolean NOT NULL DEFAULT false,
    window_hash text,  -- md5 of the file as applied that always_open and the intervals were written from
    CONSTRAINT sender_campaigns_id_kind_key UNIQUE (id, kind),  -- what a lead's (campaign_id, kind) references
    CHECK ((kind = 'enqueue') = (mailbox_group IS NULL)),
    CONSTRAINT sender_campaigns_enqueue_always_open CHECK (kind = 'file' OR always_open)
);
INSERT INTO sender_campaigns (name, kind, state, always_open) VALUES ('enqueue', 'enqueue', 'running', true);

-- The sending window as data the claim reads (version 21): the instants a campaign's window is open, per lead time
-- zone (the lead's `timezone` column as stored, '' for none: the campaign's), from sender.campaigns.window.Schedule,
-- the one place the window's rules live (DST gaps and repeats, skip dates). Written by sender.ledger.window_intervals
-- when a campaign is applied and when leads are added, for two weeks ahead, and extended by the agent's sweep cycle.
-- The intervals of one campaign and zone never overlap. No interval at an instant: closed (or not known: closed).
CREATE TABLE sender_window_intervals (
    campaign_id bigint NOT NULL REFERENCES sender_campaigns (id),
    lead_timezone text NOT NULL,
    opens timestamptz NOT NULL,
    closes timestamptz NOT NULL CHECK (closes > opens),
    PRIMARY KEY (campaign_id, lead_timezone, opens)
);
-- How far ahead each campaign's zone is known: instants before known_until are open exactly inside an interval.
CREATE TABLE sender_window_horizons (
    campaign_id bigint NOT NULL REFERENCES sender_campaigns (id),
    lead_timezone text NOT NULL,
    known_until timestamptz NOT NULL,
    PRIMARY KEY (campaign_id, lead_timezone)
);

-- A campaign file's steps as last applied. A row copies its step's templates when it is created, so a change
-- applies to the steps not yet queued.
CREATE TABLE sender_campaign_steps (
    campaign_id bigint NOT NULL REFERENCES sender_campaigns (id),
    step integer NOT NULL CHECK (step BETWEEN 1 AND 20),
    delay_s integer NOT NULL CHECK (delay_s >= 0),
    subject text,  -- NULL: a reply in the thread
    body text NOT NULL,
    PRIMARY KEY (campaign_id, step),
    CHECK (step > 1 OR (subject IS NOT NULL AND delay_s = 0))
);

-- A person in a campaign: the lead record, `id`, which every row of its sequence names (sender_emails.lead_id).
-- One per address in a campaign file's campaign, one per caller's id in `enqueue` (version 22: the two partial
-- unique indexes below; before, one column held the address in one and the id in the other).
CREATE TABLE sender_leads (
    id bigserial PRIMARY KEY,
    campaign_id bigint NOT NULL,
    kind text NOT NULL,  -- its campaign's kind (file | enqueue), which says what makes a lead one
    address text NOT NULL CHECK (address = lower(address) AND address LIKE '%_@_%'),
    lead text CHECK (lead <> ''),  -- the caller's id for the person (the leads CSV's `lead` column, enqueue's)
    timezone text,
    fields jsonb,    -- merge fields; NULL: the lead's rows carry their own text
    -- NULL: it goes on; `left` (the lead is gone or the wrong person) and `colleague_replied` since version 16
    ended text CHECK (ended IN ('completed', 'failed', 'unconfirmed', 'suppressed', 'cancelled', 'replied',
                                'bounced', 'unsubscribed', 'complained', 'stopped', 'left', 'colleague_replied')),
    ended_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- what the reply that ended it named (version 16): the addresses a `left` reply gives (shown, never mailed),
    -- who replied for `colleague_replied`
    ended_note text,
    -- an automatic reply's hold (version 16, sender_hold): no step of the lead is due before held_until
    held_until timestamptz,
    held_why text,
    -- what a row's (campaign_id, lead_id) references: a row is of its lead's campaign
    CONSTRAINT sender_leads_campaign_id_id_key UNIQUE (campaign_id, id),
    CONSTRAINT sender_leads_campaign_id_kind_fkey FOREIGN KEY (campaign_id, kind)
        REFERENCES sender_campaigns (id, kind),
    CONSTRAINT sender_leads_enqueue_lead_has_id CHECK (kind = 'file' OR lead IS NOT NULL),
    CHECK ((ended IS NULL) = (ended_at IS NULL))
);
CREATE UNIQUE INDEX sender_leads_file_address ON sender_leads (campaign_id, address) WHERE kind = 'file';
CREATE UNIQUE INDEX sender_leads_enqueue_lead ON sender_leads (campaign_id, lead) WHERE kind = 'enqueue';
CREATE INDEX sender_leads_address ON sender_leads (address);
CREATE INDEX sender_leads_lead ON sender_leads (lead) WHERE lead IS NOT NULL;
-- The leads still going at a domain (version 16): whom a colleague's reply may be about (sender_colleague_reply).
CREATE INDEX sender_leads_domain ON sender_leads ((split_part(address, '@', 2))) WHERE ended IS NULL;

-- One active sequence per address (version 15): the leads whose sequence goes on (not ended) in a campaign that is
-- not stopped, by address. What `campaign add-leads` (other_campaign) and `sender enqueue` (same_person) refuse a
-- second of.
CREATE VIEW sender_active_leads AS
SELECT l.id, l.address, l.campaign_id, l.lead, c.kind
FROM sender_leads l JOIN sender_campaigns c ON c.id = l.campaign_id
WHERE l.ended IS NULL AND c.state <> 'stopped';

CREATE TABLE sender_emails (
    id bigserial PRIMARY KEY,
    lead_id bigint NOT NULL,  -- the lead record (sender_leads.id) whose sequence the row is a step of
    step integer NOT NULL CHECK (step >= 1),
    address text NOT NULL CHECK (address = lower(address) AND address LIKE '%_@_%'),
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
    -- No key of its own to sender_campaigns: (campaign_id, lead_id) references sender_leads, whose campaign_id does;
    -- a second check of the same thing on every row inserted cost ~8% of a lead import (bench/import.py).
    campaign_id bigint NOT NULL,
    pinned_mailbox text,  -- a later step's: the mailbox that sent the step before (lower-case)
    own_subject boolean NOT NULL DEFAULT true,  -- false: a reply in the thread (subject '')
    sent_subject text,  -- the Subject as the last attempt rendered it
    -- when the row first became due (version 8): its not_before when created or released by its previous step's
    -- send; a give-back, a retry's backoff or a sweep leave it, so the claim's "oldest first" keeps its place
    due_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sender_emails_lead_id_step_key UNIQUE (lead_id, step),
    CONSTRAINT sender_emails_campaign_id_lead_id_fkey FOREIGN KEY (campaign_id, lead_id)
        REFERENCES sender_leads (campaign_id, id),
    CHECK (own_subject OR subject = '')
);
CREATE INDEX sender_emails_due ON sender_emails (not_before, id) WHERE status IN ('queued', 'retry');
-- The claim's (version 12): by route (the mailbox a row is pinned to, else its group), then of each kind (1 a first
-- step, 2 a follow-up) the oldest due first; not_before a key column so that a row given back (due, but not before
-- later) is skipped in the index, without a heap read.
CREATE INDEX sender_emails_due_route ON sender_emails ((pinned_mailbox IS NOT NULL),
                                                        (coalesce(pinned_mailbox, mailbox_group)),
                                                        (least(step, 2)), due_at, id, not_before)
WHERE status IN ('queued', 'retry');
CREATE INDEX sender_emails_sending ON sender_emails (claimed_at) WHERE status = 'sending';
CREATE INDEX sender_emails_address ON sender_emails (address);

-- Written only after the submission server accepted the message; one per row. Partitioned by month of
-- accepted_at (version 13), so `sendhost sender retire-history` drops whole months and no cost grows with the
-- years: a key of a partitioned table must hold the partition key, so the one-entry-per-row rule is sender_sent's
-- (below), written by the same insert. The Message-ID is unique as sender_emails.message_id, which it copies.
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

-- What the sequence rules read of a send, kept forever (version 13): one per row (the send log's rule), when it
-- was accepted and from which mailbox. Written by every insert into sender_send_log, in its transaction.
CREATE TABLE sender_sent (
    email_id bigint PRIMARY KEY REFERENCES sender_emails (id),
    accepted_at timestamptz NOT NULL,
    mailbox text NOT NULL
);

CREATE FUNCTION sender_log_sent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- a second entry for the row fails here, on sender_sent's key
    INSERT INTO sender_sent (email_id, accepted_at, mailbox) VALUES (NEW.email_id, NEW.accepted_at, NEW.mailbox);
    RETURN NULL;
END
$$;

CREATE TRIGGER sender_log_sent AFTER INSERT ON sender_send_log FOR EACH ROW EXECUTE FUNCTION sender_log_sent();

CREATE TABLE sender_suppressions (
    address text PRIMARY KEY CHECK (address = lower(address)),
    reason text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The row's history: the answer to "what happened to this lead's step 2?". Partitioned by month of `at`
-- (version 13), as the send log, so old months are dropped whole; the key holds the partition key.
CREATE TABLE sender_events (
    id bigserial,
    email_id bigint NOT NULL REFERENCES sender_emails (id),
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind text NOT NULL,
    detail text NOT NULL DEFAULT '',
    PRIMARY KEY (id, at)
) PARTITION BY RANGE (at);
CREATE TABLE sender_events_default PARTITION OF sender_events DEFAULT;
CREATE INDEX sender_events_email ON sender_events (email_id, id);

CREATE TABLE sender_settings (
    name text PRIMARY KEY,
    value text NOT NULL
);

-- Every piece of feedback, once per (row, event, reference): the replay guard and the health counters' source.
CREATE TABLE sender_feedback (
    id bigserial PRIMARY KEY,
    email_id bigint NOT NULL REFERENCES sender_emails (id),
    -- opened and clicked (version 17): a relay's, recorded only
    event text NOT NULL CHECK (event IN ('sent', 'delivered', 'deferred', 'auto_replied', 'replied', 'bounced',
                                         'unsubscribed', 'complained', 'left', 'colleague_replied', 'opened',
                                         'clicked')),
    source text NOT NULL,          -- agent | inbox | one-click | webhook | person
    ref text NOT NULL,             -- what makes a replay a replay: the webhook's time, the IMAP message, ...
    mailbox text,                  -- the sending mailbox of the row, for health per mailbox
    occurred_at timestamptz NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    detail text NOT NULL DEFAULT '',
    -- how sure the source is (version 7): the DMARC result of a mail's From domain in the mailbox provider's own
    -- Authentication-Results, or `none` (no result, no trusted header, not a mail); `fail` changed nothing
    verdict text NOT NULL DEFAULT 'none' CHECK (verdict IN ('pass', 'none', 'fail')),
    UNIQUE (email_id, event, ref)
);
CREATE INDEX sender_feedback_mailbox ON sender_feedback (mailbox, event, occurred_at);
CREATE INDEX sender_feedback_occurred ON sender_feedback (occurred_at);  -- the health window's (version 10)
-- A colleague's reply by its reference (version 16): read again, it names the lead it ended (sender_colleague_reply).
CREATE INDEX sender_feedback_colleague ON sender_feedback (ref) WHERE event = 'colleague_replied';

-- Clicks on tracked links and loads of the open image (version 17, docs/tracking.md), with their verdict and the
-- rule that gave it: informational, no status is ever read from here.
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

-- Where each mailbox's inbox reader got to: a message is read once per (mailbox, UIDVALIDITY).
CREATE TABLE sender_inbox_marks (
    mailbox text PRIMARY KEY,
    uidvalidity bigint NOT NULL,
    last_uid bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Each sending domain's days as Google Postmaster Tools reports them (version 18, sender.postmaster): a day with no
-- ratio is NULL, never 0; applied_ratio is what the warm-up gates were told of.
CREATE TABLE sender_postmaster_days (
    domain text NOT NULL CHECK (domain = lower(domain) AND domain <> ''),
    day date NOT NULL,
    -- user-reported spam / mail to the inbox, a fraction (0.003 is 0.3%); NULL: Google reported no ratio that day
    spam_ratio double precision CHECK (spam_ratio >= 0 AND spam_ratio <= 1),
    reputation text CHECK (reputation IN ('HIGH', 'MEDIUM', 'LOW', 'BAD')),  -- NULL: none reported
    fetched_at timestamptz NOT NULL,
    applied_ratio double precision,  -- the ratio the warm-up gates were told of; NULL: none yet
    PRIMARY KEY (domain, day)
);

-- One day's figures as read from Postmaster Tools: written, or rewritten when Google revised them.
CREATE FUNCTION sender_postmaster_record(p_domain text, p_day date, p_spam_ratio double precision,
                                         p_reputation text, p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO sender_postmaster_days AS d (domain, day, spam_ratio, reputation, fetched_at)
    VALUES (lower(p_domain), p_day, p_spam_ratio, p_reputation, coalesce(p_now, now()))
    ON CONFLICT (domain, day) DO UPDATE
        SET spam_ratio = excluded.spam_ratio, reputation = excluded.reputation, fetched_at = excluded.fetched_at;
$$;

-- The warm-up gates were told of p_ratio for the domain's day (unless the day was revised meanwhile).
CREATE FUNCTION sender_postmaster_applied(p_domain text, p_day date, p_ratio double precision)
RETURNS void LANGUAGE sql AS $$
    UPDATE sender_postmaster_days SET applied_ratio = p_ratio
    WHERE domain = lower(p_domain) AND day = p_day AND spam_ratio = p_ratio;
$$;

CREATE FUNCTION sender_status_ranks() RETURNS TABLE (status text, rank integer) LANGUAGE sql IMMUTABLE AS $$
    VALUES ('waiting', 0), ('queued', 0), ('retry', 0), ('sending', 1), ('failed', 2), ('cancelled', 2),
           ('suppressed', 2), ('unconfirmed', 3), ('sent', 4), ('delivered', 5), ('replied', 6), ('bounced', 7),
           ('unsubscribed', 8), ('complained', 9)
$$;

-- PL/pgSQL (version 11), as sender_is_suppressed and sender_event: it keeps its plan for the session, where a sql
-- function that cannot be inlined is planned again at every call, several times a message.
CREATE FUNCTION sender_rank(s sender_status) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN (SELECT rank FROM sender_status_ranks() WHERE status = s::text);
END
$$;

-- The guard on every status change, from any function or a person at psql: once a row was handed over
-- (rank >= sent), its status only moves up. Before the handoff the agent's own moves (sending -> retry) stand.
CREATE FUNCTION sender_guarded_status(p_old sender_status, p_new sender_status) RETURNS sender_status
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN sender_rank(p_old) >= sender_rank('sent') AND sender_rank(p_new) < sender_rank(p_old)
                THEN p_old ELSE p_new END
$$;

-- One exception (version 7): a row that only a relay's `sent` made sent (no send-log entry: the submission server
-- never told us it accepted it) still takes the agent's own definite answer that it did not leave (failed, or
-- suppressed for a refused recipient), so that the answer stands whichever of the two arrived first; and since
-- version 14 the same holds for a row only a relay's `delivered` moved.
CREATE FUNCTION sender_rank_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status IN ('sent', 'delivered') AND NEW.status IN ('failed', 'suppressed')
       AND NOT EXISTS (SELECT 1 FROM sender_sent WHERE email_id = NEW.id) THEN
        RETURN NEW;
    END IF;
    NEW.status := sender_guarded_status(OLD.status, NEW.status);
    RETURN NEW;
END
$$;

CREATE TRIGGER sender_rank_guard BEFORE UPDATE OF status ON sender_emails
FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION sender_rank_guard();

-- The one suppression check: called by enqueue, add-leads, each requeue, and right before the SMTP handoff. An
-- entry is an address or a whole domain (`@bigco.example`).
CREATE FUNCTION sender_is_suppressed(p_address text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM sender_suppressions
                   WHERE address IN (lower(p_address), '@' || split_part(lower(p_address), '@', 2)));
END
$$;

CREATE FUNCTION sender_event(p_email bigint, p_kind text, p_detail text, p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sender_events (email_id, at, kind, detail)
    VALUES (p_email, coalesce(p_now, clock_timestamp()), p_kind, coalesce(p_detail, ''));
END
$$;

-- queued | waiting (an earlier step of the lead is not sent yet) | duplicate | suppressed | ended (the lead's
-- sequence ended: a reply, a bounce, a step that failed) | same_person (version 15: a lead id new to the ledger for
-- an address another lead of `enqueue` holds an active sequence at, named in first_lead; p_allow_same_person queues
-- it all the same); a row of the `enqueue` campaign, the lead being the caller's id. A duplicate (lead, step) is
-- refused by the unique constraint. One active sequence per address as for campaign files (sender_active_leads):
-- new leads are added one enqueue at a time (a transaction lock of enqueue's own, taken only for a new lead), so
-- that two concurrent enqueues cannot both add one address under two ids.
CREATE FUNCTION sender_enqueue(p_lead text, p_step integer, p_address text, p_group text,
                               p_subject text, p_body text, p_not_before timestamptz,
                               p_allow_same_person boolean DEFAULT false, p_now timestamptz DEFAULT NULL,
                               OUT outcome text, OUT first_lead text)
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    campaign bigint := (SELECT id FROM sender_campaigns WHERE name = 'enqueue');
    the_lead bigint := (SELECT id FROM sender_leads WHERE campaign_id = campaign AND kind = 'enqueue'
                                                     AND lead = p_lead);
    new_id bigint;
    new_status sender_status;
BEGIN
    IF sender_is_suppressed(p_address) THEN
        outcome := 'suppressed';
        RETURN;
    END IF;
    IF the_lead IS NULL THEN
        PERFORM pg_advisory_xact_lock(hashtext('sender_enqueue'));
        IF NOT coalesce(p_allow_same_person, false) THEN
            SELECT a.lead INTO first_lead FROM sender_active_leads a
            WHERE a.address = lower(p_address) AND a.campaign_id = campaign AND a.lead <> p_lead
            ORDER BY a.id LIMIT 1;
            IF first_lead IS NOT NULL THEN
                outcome := 'same_person';
                RETURN;
            END IF;
        END IF;
        -- a new lead, or the one an enqueue of the same id added while this one waited for the lock
        INSERT INTO sender_leads (campaign_id, kind, lead, address, created_at)
        VALUES (campaign, 'enqueue', p_lead, lower(p_address), now_at)
        ON CONFLICT (campaign_id, lead) WHERE kind = 'enqueue' DO NOTHING
        RETURNING id INTO the_lead;
        IF the_lead IS NULL THEN
            SELECT id INTO the_lead FROM sender_leads WHERE campaign_id = campaign AND kind = 'enqueue'
                                                        AND lead = p_lead;
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM sender_emails WHERE lead_id = the_lead AND step = p_step) THEN
        outcome := 'duplicate';
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM sender_leads WHERE id = the_lead AND ended IS NOT NULL) THEN
        outcome := 'ended';
        RETURN;
    END IF;
    INSERT INTO sender_emails (campaign_id, lead_id, step, address, mailbox_group, subject, body, not_before,
                               due_at, pinned_mailbox, created_at, updated_at)
    SELECT campaign, the_lead, p_step, lower(p_address), p_group, p_subject, p_body, due.at, due.at,
           lower(sent.mailbox), now_at, now_at
    FROM (SELECT NULL) AS one
    LEFT JOIN LATERAL (SELECT e.mailbox, g.accepted_at FROM sender_emails e
                       JOIN sender_sent g ON g.email_id = e.id
                       WHERE e.lead_id = the_lead AND e.step = p_step - 1
                         AND e.status IN ('sent', 'delivered')) AS sent ON true
    CROSS JOIN LATERAL (SELECT greatest(coalesce(p_not_before, now_at), coalesce(sent.accepted_at, now_at)) AS at)
        AS due
    ON CONFLICT (lead_id, step) DO NOTHING
    RETURNING id, status INTO new_id, new_status;
    IF new_id IS NULL THEN
        outcome := 'duplicate';
        RETURN;
    END IF;
    PERFORM sender_event(new_id, new_status::text, '', p_now);
    outcome := new_status::text;
END
$$;

-- Suppress an address, or a whole domain written `@bigco.example`, for good; its rows not sent yet are withdrawn
-- (and their sequences end). Returns how many rows it withdrew.
CREATE FUNCTION sender_suppress(p_address text, p_reason text, p_now timestamptz DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    entry text := lower(p_address);
    withdrawn integer;
BEGIN
    INSERT INTO sender_suppressions (address, reason, created_at)
    VALUES (entry, coalesce(p_reason, ''), now_at)
    ON CONFLICT (address) DO NOTHING;
    WITH hit AS (
        UPDATE sender_emails SET status = 'suppressed', updated_at = now_at
        WHERE status IN ('waiting', 'queued', 'retry')
          AND CASE WHEN left(entry, 1) = '@' THEN split_part(address, '@', 2) = substr(entry, 2)
                   ELSE address = entry END
        RETURNING id
    )
    SELECT count(*) INTO withdrawn FROM (SELECT sender_event(id, 'suppressed', p_reason, p_now) FROM hit) AS logged;
    RETURN withdrawn;
END
$$;

-- Sequences (version 6): when a row may be due, what its status means for its lead's sequence, and the
-- commands of people and campaigns.

-- The rule of a row becoming due, from any function or a person at psql (sender_due_guard): a row of a lead whose
-- sequence ended is cancelled; a row of a campaign that is not running, or whose lead's previous step is not
-- sent, waits.
CREATE FUNCTION sender_due_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    lead_ended text;
BEGIN
    SELECT ended INTO lead_ended FROM sender_leads WHERE id = NEW.lead_id;
    IF lead_ended IS NOT NULL THEN
        NEW.status := 'cancelled';
        NEW.last_error := 'the sequence ended: ' || lead_ended;
    ELSIF NOT EXISTS (SELECT 1 FROM sender_campaigns WHERE id = NEW.campaign_id AND state = 'running') THEN
        NEW.status := 'waiting';
    ELSIF NEW.step > 1 AND NOT sender_step_was_sent(NEW.lead_id, NEW.step - 1) THEN
        NEW.status := 'waiting';
    END IF;
    RETURN NEW;
END
$$;

CREATE FUNCTION sender_step_was_sent(p_lead bigint, p_step integer) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM sender_emails WHERE lead_id = p_lead AND step = p_step
                   AND status IN ('sent', 'delivered'))
$$;

CREATE TRIGGER sender_due_guard BEFORE UPDATE OF status ON sender_emails
FOR EACH ROW WHEN (NEW.status IN ('queued', 'retry') AND OLD.status IS DISTINCT FROM NEW.status)
EXECUTE FUNCTION sender_due_guard();
-- An inserted step 1 is written by functions that know its campaign's state; a later step is checked.
CREATE TRIGGER sender_due_guard_insert BEFORE INSERT ON sender_emails
FOR EACH ROW WHEN (NEW.status IN ('queued', 'retry') AND NEW.step > 1) EXECUTE FUNCTION sender_due_guard();

-- End a lead's sequence: its reason, once (a reply, bounce, unsubscribe or complaint still replaces `completed`
-- and `unconfirmed`, which say less), and every step of it not sent yet cancelled. Except for `unconfirmed`: that
-- step may yet prove sent (`sendhost sender resolve --sent`, sender_advance), so the steps enqueued behind it go on
-- waiting for the verdict; a verdict of not sent (`failed`) cancels them.
CREATE FUNCTION sender_end_sequence(p_lead bigint, p_reason text, p_at timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    withdrawn integer;
BEGIN
    UPDATE sender_leads SET ended = p_reason, ended_at = p_at
    WHERE id = p_lead
      AND (ended IS NULL OR (ended IN ('completed', 'unconfirmed')
                             AND p_reason IN ('replied', 'bounced', 'unsubscribed', 'complained', 'left',
                                              'colleague_replied')));
    IF p_reason = 'unconfirmed' THEN
        RETURN;
    END IF;
    WITH withdrawn AS (
        UPDATE sender_emails SET status = 'cancelled', last_error = 'the sequence ended: ' || p_reason,
                                 updated_at = p_at
        WHERE lead_id = p_lead AND status IN ('waiting', 'queued', 'retry')
        RETURNING id
    )
    SELECT count(*) FROM (SELECT sender_event(id, 'cancelled', 'the sequence ended: ' || p_reason, p_at)
                          FROM withdrawn) AS logged INTO withdrawn;
END
$$;

-- Step N was sent: release step N+1 if it was enqueued ahead (it waited), else create it from the campaign file's
-- step N+1, due the step's delay after step N's send time, from the mailbox that sent step N; no step N+1 of a
-- campaign file: the sequence is complete. A send that was `unconfirmed` is known now: its lead goes on.
-- A lead held by an automatic reply (version 16, sender_hold) has its next step due no earlier than the hold's end.
CREATE FUNCTION sender_advance(p_email bigint, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r sender_emails;
    l sender_leads;
    next_step sender_campaign_steps;
    sent_at timestamptz;
    new_id bigint;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email;
    SELECT * INTO l FROM sender_leads WHERE id = r.lead_id FOR UPDATE;
    IF l.ended = 'unconfirmed' THEN
        UPDATE sender_leads SET ended = NULL, ended_at = NULL WHERE id = l.id;
    ELSIF l.ended IS NOT NULL THEN
        RETURN;
    END IF;
    -- Suppressed while this step was in flight (version 14): no follow-up is queued for it, the sequence ends.
    IF sender_is_suppressed(r.address) THEN
        PERFORM sender_end_sequence(r.lead_id, 'suppressed', p_at);
        RETURN;
    END IF;
    SELECT coalesce((SELECT accepted_at FROM sender_sent WHERE email_id = p_email), p_at) INTO sent_at;
    SELECT * INTO next_step FROM sender_campaign_steps WHERE campaign_id = r.campaign_id AND step = r.step + 1;
    UPDATE sender_emails
    SET status = CASE WHEN attempts = 0 THEN 'queued'::sender_status ELSE 'retry'::sender_status END,
        pinned_mailbox = lower(r.mailbox), updated_at = p_at,
        not_before = greatest(not_before, sent_at + make_interval(secs => coalesce(next_step.delay_s, 0)),
                              l.held_until),
        due_at = greatest(not_before, sent_at + make_interval(secs => coalesce(next_step.delay_s, 0)),
                          l.held_until)
    WHERE lead_id = r.lead_id AND step = r.step + 1 AND status = 'waiting';
    IF FOUND OR EXISTS (SELECT 1 FROM sender_emails WHERE lead_id = r.lead_id AND step = r.step + 1) THEN
        RETURN;
    END IF;
    IF next_step.step IS NULL THEN
        IF EXISTS (SELECT 1 FROM sender_campaigns WHERE id = r.campaign_id AND kind = 'file') THEN
            PERFORM sender_end_sequence(r.lead_id, 'completed', p_at);
        END IF;
        RETURN;
    END IF;
    INSERT INTO sender_emails (campaign_id, lead_id, step, address, mailbox_group, subject, body, own_subject,
                               not_before, due_at, pinned_mailbox, created_at, updated_at)
    VALUES (r.campaign_id, r.lead_id, next_step.step, l.address, r.mailbox_group, coalesce(next_step.subject, ''),
            next_step.body, next_step.subject IS NOT NULL,
            greatest(sent_at + make_interval(secs => next_step.delay_s), l.held_until),
            greatest(sent_at + make_interval(secs => next_step.delay_s), l.held_until), lower(r.mailbox), p_at, p_at)
    RETURNING id INTO new_id;
    PERFORM sender_event(new_id, 'queued', format('step %s: due %s after step %s was sent', next_step.step,
                                                  make_interval(secs => next_step.delay_s), r.step), p_at);
END
$$;

-- What a row's new status means for its lead's sequence, whoever changed it. A relay's `delivered` may come
-- before the agent's `sent` (which the rank guard then keeps out): either one handed over is what advances.
CREATE FUNCTION sender_sequence_rule() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('sent', 'delivered') THEN
        IF OLD.status <> 'sent' THEN
            PERFORM sender_advance(NEW.id, NEW.updated_at);
        END IF;
    ELSE
        PERFORM sender_end_sequence(NEW.lead_id, NEW.status::text, NEW.updated_at);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER sender_sequence_rule AFTER UPDATE OF status ON sender_emails
FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                   AND NEW.status IN ('sent', 'delivered', 'failed', 'unconfirmed', 'suppressed', 'cancelled',
                                      'replied', 'bounced', 'unsubscribed', 'complained'))
EXECUTE FUNCTION sender_sequence_rule();





-- A person's verdict on an `unconfirmed` row (`sendhost sender resolve`): sent (the send-log entry is written at
-- the attempt's time and the sequence goes on) or not sent (failed: its sequence ends, nothing is resent).
-- resolved | not_unconfirmed (the row is in another status: nothing changed) | no_row.
CREATE FUNCTION sender_resolve(p_email bigint, p_sent boolean, p_note text, p_now timestamptz DEFAULT NULL)
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
        WHERE id = r.lead_id AND ended = 'unconfirmed';
    END IF;
    RETURN 'resolved';
END
$$;

-- Rows in `retry` made due now (`sendhost sender retry`): one row, or every one due before p_before.
CREATE FUNCTION sender_retry_now(p_email bigint, p_before timestamptz, p_now timestamptz DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    moved integer;
BEGIN
    WITH due AS (
        UPDATE sender_emails SET not_before = now_at, due_at = least(due_at, now_at), updated_at = now_at
        WHERE status = 'retry' AND (p_email IS NULL OR id = p_email)
          AND (p_before IS NULL OR not_before < p_before)
        RETURNING id
    )
    SELECT count(*) INTO moved FROM (SELECT sender_event(id, 'retry_now', 'made due now by a person', p_now)
                                     FROM due) AS logged;
    RETURN moved;
END
$$;

-- Move the leads of a campaign that wait for mailbox p_from to p_to (`sendhost campaign reassign`): their steps
-- not sent yet go from p_to. Returns how many rows moved.
CREATE FUNCTION sender_reassign(p_campaign text, p_from text, p_to text, p_now timestamptz DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    moved integer;
BEGIN
    WITH hit AS (
        UPDATE sender_emails e SET pinned_mailbox = lower(p_to), updated_at = now_at
        FROM sender_campaigns c
        WHERE c.name = p_campaign AND e.campaign_id = c.id AND e.pinned_mailbox = lower(p_from)
          AND e.status IN ('waiting', 'queued', 'retry')
        RETURNING e.id
    )
    SELECT count(*) INTO moved
    FROM (SELECT sender_event(id, 'reassigned', format('from %s to %s', lower(p_from), lower(p_to)), p_now)
          FROM hit) AS logged;
    RETURN moved;
END
$$;

-- Create or update a campaign from its file (`sendhost campaign apply`): its group, its steps (p_steps: a JSON
-- list of {delay_s, subject, body}, in order), its follow-ups' share (version 8), whether a colleague's reply
-- ends a lead's sequence (version 16) and the file's text. Rows already
-- created keep the templates they copied; the steps not created yet take the new ones. created | updated |
-- unchanged (the same text: the share is still written, for a campaign applied before version 8 stored it).
CREATE FUNCTION sender_campaign_apply(p_name text, p_group text, p_allow_other boolean, p_source text,
                                      p_steps jsonb, p_followups_share numeric, p_stop_on_domain_reply boolean,
                                      p_now timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    c sender_campaigns;
    answer text;
BEGIN
    SELECT * INTO c FROM sender_campaigns WHERE name = p_name FOR UPDATE;
    IF c.id IS NULL THEN
        INSERT INTO sender_campaigns (name, mailbox_group, allow_other_campaigns, source, followups_share,
                                      stop_on_domain_reply, created_at, updated_at)
        VALUES (p_name, p_group, p_allow_other, p_source, p_followups_share, p_stop_on_domain_reply, now_at, now_at)
        RETURNING * INTO c;
        answer := 'created';
    ELSIF c.kind <> 'file' THEN
        RAISE EXCEPTION 'campaign % is built in (sendhost sender enqueue); name the file''s campaign otherwise',
                        p_name USING ERRCODE = 'check_violation';
    ELSIF c.source = p_source THEN
        UPDATE sender_campaigns SET followups_share = p_followups_share,
                                    stop_on_domain_reply = p_stop_on_domain_reply
        WHERE id = c.id AND (followups_share <> p_followups_share
                             OR stop_on_domain_reply <> p_stop_on_domain_reply);
        RETURN 'unchanged';
    ELSE
        UPDATE sender_campaigns SET mailbox_group = p_group, allow_other_campaigns = p_allow_other,
                                    source = p_source, followups_share = p_followups_share,
                                    stop_on_domain_reply = p_stop_on_domain_reply, updated_at = now_at
        WHERE id = c.id;
        -- rows not handed over yet follow the group; their templates stay those they were created with
        UPDATE sender_emails SET mailbox_group = p_group
        WHERE campaign_id = c.id AND status IN ('waiting', 'queued', 'retry') AND mailbox_group <> p_group;
        answer := 'updated';
    END IF;
    DELETE FROM sender_campaign_steps WHERE campaign_id = c.id;
    INSERT INTO sender_campaign_steps (campaign_id, step, delay_s, subject, body)
    SELECT c.id, s.ordinality, (s.value ->> 'delay_s')::integer, s.value ->> 'subject', s.value ->> 'body'
    FROM jsonb_array_elements(p_steps) WITH ORDINALITY AS s;
    RETURN answer;
END
$$;

-- start (draft -> running), pause (running -> paused), resume (paused -> running), stop (any -> stopped: every
-- sequence still going ends as `stopped`). Returns the state the campaign is in; an exception names a move the
-- state does not allow.
CREATE FUNCTION sender_campaign_move(p_name text, p_move text, p_now timestamptz DEFAULT NULL)
RETURNS sender_campaign_state LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    c sender_campaigns;
    target sender_campaign_state;
    lead_row record;
    logged integer;
BEGIN
    SELECT * INTO c FROM sender_campaigns WHERE name = p_name FOR UPDATE;
    IF c.id IS NULL OR c.kind <> 'file' THEN
        RAISE EXCEPTION 'no campaign %; `sendhost campaign status` lists them', p_name
            USING ERRCODE = 'check_violation';
    END IF;
    target := CASE p_move WHEN 'start' THEN 'running' WHEN 'resume' THEN 'running' WHEN 'pause' THEN 'paused'
                          WHEN 'stop' THEN 'stopped' END;
    IF target IS NULL THEN
        RAISE EXCEPTION 'sender_campaign_move: unknown move %', p_move;
    END IF;
    IF c.state = target THEN
        RETURN c.state;
    END IF;
    IF c.state = 'stopped' OR (p_move = 'start' AND c.state <> 'draft')
       OR (p_move = 'resume' AND c.state <> 'paused') OR (p_move = 'pause' AND c.state <> 'running') THEN
        -- the move that does what was meant, where there is one: a paused campaign is resumed, a draft started
        RAISE EXCEPTION 'campaign % is %: it cannot %', p_name, c.state, p_move ||
            CASE WHEN c.state = 'paused' AND p_move = 'start'
                     THEN format('; `start` is for a draft: `sendhost campaign resume %s` runs it again', p_name)
                 WHEN c.state = 'draft' AND p_move IN ('resume', 'pause')
                     THEN format('; a draft is started: `sendhost campaign start %s`', p_name)
                 WHEN c.state = 'stopped' THEN '; a stopped campaign stays stopped: apply a new one to send again'
                 ELSE '' END
            USING ERRCODE = 'check_violation';
    END IF;
    UPDATE sender_campaigns SET state = target, updated_at = now_at WHERE id = c.id;
    IF target = 'running' THEN
        -- what waited for the campaign is due again; what waits for an earlier step goes on waiting (the guard)
        WITH moved AS (
            UPDATE sender_emails SET status = CASE WHEN attempts = 0 THEN 'queued'::sender_status
                                                   ELSE 'retry'::sender_status END, updated_at = now_at
            WHERE campaign_id = c.id AND status = 'waiting'
            RETURNING id, status
        )
        SELECT count(*) INTO logged
        FROM (SELECT sender_event(id, status::text, format('campaign %s: %s', p_name, p_move), p_now)
              FROM moved WHERE status <> 'waiting') AS events;
    ELSIF target = 'paused' THEN
        WITH moved AS (
            UPDATE sender_emails SET status = 'waiting', updated_at = now_at
            WHERE campaign_id = c.id AND status IN ('queued', 'retry')
            RETURNING id
        )
        SELECT count(*) INTO logged
        FROM (SELECT sender_event(id, 'waiting', format('campaign %s: paused', p_name), p_now) FROM moved) AS events;
    ELSE
        FOR lead_row IN SELECT id FROM sender_leads WHERE campaign_id = c.id AND ended IS NULL LOOP
            PERFORM sender_end_sequence(lead_row.id, 'stopped', now_at);
        END LOOP;
    END IF;
    RETURN target;
END
$$;

-- Add the leads a caller copied into the temporary table sender_leads_import (line, address, lead, timezone,
-- fields) to campaign p_name (`sendhost campaign add-leads`). Each staged row's outcome: added | already (in this
-- campaign) | suppressed | other_campaign (the address is in another active campaign, and this one does not allow
-- it). Each added lead gets its step 1, due now (waiting while the campaign is not running), and the step's
-- history event. One import at a time (a transaction lock of imports' own: agents and feedback, which also write
-- sender_leads, never wait for an import), so that two cannot both add one address to two campaigns.
-- One statement classifies every row once and writes what it adds, set-based (bench/import.py): a row's cost is
-- its writes (three rows, their indexes and foreign keys) and one call of sender_is_suppressed. Without JIT, whose
-- compiling costs more than it saves here; with the memory to sort and hash a file's rows (at most 250,000).
CREATE FUNCTION sender_add_leads(p_name text, p_now timestamptz DEFAULT NULL)
RETURNS TABLE (outcome text, leads bigint, first_line integer) LANGUAGE plpgsql
SET jit = off
SET work_mem = '64MB'
AS $$
#variable_conflict use_column
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    c sender_campaigns;
    first sender_campaign_steps;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('sender_add_leads'));
    SELECT * INTO c FROM sender_campaigns WHERE name = p_name FOR UPDATE;
    IF c.id IS NULL OR c.kind <> 'file' THEN
        RAISE EXCEPTION 'no campaign %; `sendhost campaign status` lists them', p_name
            USING ERRCODE = 'check_violation';
    END IF;
    IF c.state = 'stopped' THEN
        RAISE EXCEPTION 'campaign % is stopped: it takes no leads', p_name USING ERRCODE = 'check_violation';
    END IF;
    SELECT * INTO first FROM sender_campaign_steps WHERE campaign_id = c.id AND step = 1;
    -- The writes below see none of each other's rows (one snapshot): each reads `classified`; the foreign keys,
    -- checked at the statement's end, see them all.
    RETURN QUERY
    WITH classified AS MATERIALIZED (
        SELECT i.line, i.address, i.lead, i.timezone, i.fields, CASE
            WHEN here.id IS NOT NULL THEN 'already'
            WHEN sender_is_suppressed(i.address) THEN 'suppressed'
            WHEN NOT c.allow_other_campaigns AND EXISTS (
                SELECT 1 FROM sender_active_leads a
                WHERE a.address = i.address AND a.campaign_id <> c.id AND a.kind = 'file') THEN 'other_campaign'
            ELSE 'added' END AS outcome
        FROM sender_leads_import i
        LEFT JOIN sender_leads here ON here.campaign_id = c.id AND here.kind = 'file' AND here.address = i.address
    ), added_leads AS (
        INSERT INTO sender_leads (campaign_id, kind, address, lead, timezone, fields, created_at)
        SELECT c.id, 'file', a.address, a.lead, a.timezone, a.fields, now_at FROM classified a
        WHERE a.outcome = 'added'
        RETURNING id, address
    ), created AS (
        INSERT INTO sender_emails (campaign_id, lead_id, step, address, mailbox_group, subject, body, status,
                                   not_before, due_at, created_at, updated_at)
        SELECT c.id, l.id, 1, a.address, c.mailbox_group, first.subject, first.body,
               CASE WHEN c.state = 'running' THEN 'queued'::sender_status ELSE 'waiting'::sender_status END,
               now_at, now_at, now_at, now_at
        FROM classified a JOIN added_leads l ON l.address = a.address
        WHERE a.outcome = 'added' ORDER BY a.line
        RETURNING id, status
    ), logged AS (
        INSERT INTO sender_events (email_id, at, kind, detail)
        SELECT e.id, coalesce(p_now, clock_timestamp()), e.status::text, 'added to campaign ' || p_name
        FROM created e
    )
    SELECT a.outcome, count(*), min(a.line) FROM classified a GROUP BY a.outcome;
END
$$;

-- Follow-ups first (version 8): each row a claim takes has a turn, the next number of one SEQUENCE (nextval takes no
-- lock that lasts and is never rolled back: concurrent claimers never wait for each other over it). A campaign whose
-- share is s gives turn n to its follow-ups (steps >= 2) when floor((n + 1) * s) > floor(n * s): of any k
-- consecutive turns, floor(k * s) or ceil(k * s). Exact arithmetic (numeric), so 0.8 is four turns in five.
CREATE SEQUENCE sender_claim_turns;

CREATE FUNCTION sender_followups_turn(p_turn bigint, p_share numeric) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT floor((p_turn + 1) * p_share) > floor(p_turn * p_share)
$$;

-- When a lead's window is next open at or after `p_at` (version 21): `p_at` itself when open; the opening of the
-- first interval after it; else, when nothing is known that far, the end of what is known (the sweep cycle extends
-- it; nothing sooner can be claimed), or NULL when that is past (or nothing was ever written: fail closed).
CREATE FUNCTION sender_window_next(p_campaign bigint, p_lead_timezone text, p_at timestamptz, p_now timestamptz)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT greatest(w.opens, p_at) FROM sender_window_intervals w
         WHERE w.campaign_id = p_campaign AND w.lead_timezone = p_lead_timezone AND w.closes > p_at
         ORDER BY w.opens LIMIT 1),
        (SELECT greatest(h.known_until, p_at) FROM sender_window_horizons h
         WHERE h.campaign_id = p_campaign AND h.lead_timezone = p_lead_timezone AND h.known_until > p_now))
$$;

-- The sweep cycle's share of the window (version 21): each due row of a campaign with a window that is closed now
-- for its lead waits, not_before, until the window next opens (sender_window_next), so the claim's index passes it
-- over with the rows put back instead of looking it up again at every claim until then (each look, a lead and an
-- interval read: 20-26 ms a claim beside 5,000 such rows, 3 ms once moved). Never claimed, so no event. A row
-- whose zone has nothing known stays as it is (closed: the claim still passes over it). The count moved.
CREATE FUNCTION sender_window_defer(p_now timestamptz DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    moved integer;
BEGIN
    WITH closed AS (
        SELECT e.id, sender_window_next(e.campaign_id, coalesce(l.timezone, ''), now_at, now_at) AS opens
        FROM sender_emails e
        JOIN sender_campaigns c ON c.id = e.campaign_id AND NOT c.always_open
        JOIN sender_leads l ON l.id = e.lead_id
        WHERE e.status IN ('queued', 'retry') AND e.not_before <= now_at
        FOR NO KEY UPDATE OF e SKIP LOCKED
    )
    UPDATE sender_emails e SET not_before = closed.opens, updated_at = now_at
    FROM closed WHERE e.id = closed.id AND closed.opens > now_at;
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN moved;
END
$$;

-- Due rows, each claimed by exactly one agent; a later step of a lead only by an agent that has the mailbox it is
-- pinned to (p_mailboxes, lower-case; NULL: any). One row at a time, each with a turn (above): the oldest due row
-- (by due_at, when it first became due, then id) of the kind its campaign's share gives the turn to, else the
-- oldest of the other kind. The running campaigns are split by what the turn gives: when they all agree (every
-- campaign has the default share, or one campaign runs) one pass looks at both kinds, the turn's first; when their
-- shares disagree, the follow-ups of the campaigns the turn gives to follow-ups go first, then the first steps of
-- the others, then what is left of each. A share a kind does not use (none of it due for this agent) goes to the
-- other.
-- Where a pass looks (version 12): each row is on one route, the mailbox it is pinned to or else its group, and the
-- due index is ordered by route first (sender_emails_due_route), so a pass reads, of each route the agent serves,
-- its oldest due row of each kind: one index step each, the row locked (SKIP LOCKED: one another claim holds is
-- passed over for the next), and claims the oldest of those. What other groups and other hosts' mailboxes hold,
-- however old, is never read; version 8's one index for every route walked past each such row older than the
-- agent's (500,006 index entries a claim beside 1,000,000 due rows of another group). The heads not taken stay
-- locked until the claim commits, a moment later: another agent takes the next row of their route meanwhile.
-- Its commit does not wait for the disk (synchronous_commit off for this transaction only): a claim lost in a
-- database crash only puts the row back in the queue, and the attempt's start, which must survive, is a durable
-- commit that flushes the claim's WAL with it. PL/pgSQL keeps each statement's plan between calls.
-- On a table whose statistics are stale (a fresh ledger, a bulk enqueue that autovacuum has not analyzed yet) the
-- planner believes the queue holds a handful of rows and reads every due row to sort them instead (version 3):
-- sorting is never what a claim wants, so the function plans without it, whatever the statistics say (the heads
-- are ordered in an aggregate, not by a Sort node, which enable_sort = off would price into a JIT compilation).
-- Planned once per session (force_generic_plan): PL/pgSQL's choice kept planning the claim's statement again at
-- every call, 0.5 ms of a 1.1 ms claim (its generic plan reads the same index steps; test_claim_plan checks it).
-- The sending window (version 21): a row of a campaign with a window is claimed only at an instant inside one of
-- its lead's intervals (sender_window_intervals); one closed is passed over, as one given back (not_before later) is, and
-- waits in the queue for its window to open. Nothing after the claim checks the window again.
-- ROWS 1: the agent claims a row at a time. With a set-returning function's default (1,000 rows) the planner of
-- the claim query (queries.sql `claim`) hashed all of sender_leads to join the claimed row's lead, each claim: 13 ms
-- on a ledger of 50,000 leads (bench/claim.py), where probing its key takes microseconds.
CREATE FUNCTION sender_claim(p_worker text, p_limit integer, p_groups text[], p_mailboxes text[],
                             p_now timestamptz DEFAULT NULL)
RETURNS SETOF sender_emails
LANGUAGE plpgsql
ROWS 1
SET enable_sort = off
SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    -- the routes the agent serves: a mailbox's (pinned: the follow-ups pinned to it, and since version 19 a placement
    -- test's first steps) or a group's (its rows that no mailbox is pinned to)
    route_pinned boolean[] := array_fill(false, ARRAY[coalesce(cardinality(p_groups), 0)])
                              || array_fill(true, ARRAY[coalesce(cardinality(p_mailboxes), 0)]);
    route_names text[] := p_groups || p_mailboxes;
    turn bigint;
    followups_turn bigint[];  -- the running campaigns whose share gives this turn to a follow-up
    first_turn bigint[];      -- the others: to a first step
    agreed boolean;           -- one of the two is empty: no campaign filter
    kinds integer[];          -- the kinds a pass looks at, least(step, 2): 1 a first step, 2 a follow-up
    first_kind integer;       -- of those, the one whose rows go first
    campaigns bigint[];
    claimed boolean;
    windowed bigint[];        -- the campaigns with a sending window: their rows go only inside an interval
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT coalesce(array_agg(id), '{}') INTO windowed FROM sender_campaigns WHERE NOT always_open;
    IF p_groups IS NULL OR p_mailboxes IS NULL THEN
        -- any group or any mailbox: the routes that hold rows to claim, one index step each (a skip scan)
        WITH RECURSIVE queued(pinned, name) AS (
            (SELECT pinned_mailbox IS NOT NULL, coalesce(pinned_mailbox, mailbox_group) FROM sender_emails
             WHERE status IN ('queued', 'retry') ORDER BY 1, 2 LIMIT 1)
            UNION ALL
            SELECT next_route.* FROM queued CROSS JOIN LATERAL (
                SELECT pinned_mailbox IS NOT NULL, coalesce(pinned_mailbox, mailbox_group) FROM sender_emails
                WHERE status IN ('queued', 'retry')
                  AND (pinned_mailbox IS NOT NULL, coalesce(pinned_mailbox, mailbox_group)) > (queued.pinned,
                                                                                              queued.name)
                ORDER BY 1, 2 LIMIT 1) AS next_route
        )
        SELECT array_agg(pinned), array_agg(name) INTO route_pinned, route_names FROM queued
        WHERE CASE WHEN pinned THEN p_mailboxes IS NULL OR name = ANY (p_mailboxes)
                   ELSE p_groups IS NULL OR name = ANY (p_groups) END;
    END IF;
    FOR n IN 1 .. p_limit LOOP
        turn := nextval('sender_claim_turns');
        SELECT array_agg(id) FILTER (WHERE sender_followups_turn(turn, followups_share)),
               array_agg(id) FILTER (WHERE NOT sender_followups_turn(turn, followups_share))
        INTO followups_turn, first_turn
        FROM sender_campaigns WHERE state = 'running';
        agreed := followups_turn IS NULL OR first_turn IS NULL;
        claimed := false;
        FOR pass IN 1 .. CASE WHEN agreed THEN 1 ELSE 4 END LOOP
            IF agreed THEN
                EXIT WHEN followups_turn IS NULL AND first_turn IS NULL;  -- no campaign running
                first_kind := CASE WHEN followups_turn IS NOT NULL THEN 2 ELSE 1 END;
                kinds := ARRAY[first_kind, 3 - first_kind];
            ELSE  -- the turn's kind of each campaign, then the other kind of each
                first_kind := CASE WHEN pass IN (1, 3) THEN 2 ELSE 1 END;
                kinds := ARRAY[first_kind];
                campaigns := CASE WHEN pass IN (1, 4) THEN followups_turn ELSE first_turn END;
            END IF;
            RETURN QUERY
            UPDATE sender_emails SET status = 'sending', claimed_at = now_at, claimed_by = p_worker,
                                     updated_at = now_at
            WHERE id = (
                SELECT (array_agg(head.id ORDER BY head.kind <> first_kind, head.due_at, head.id))[1]
                FROM unnest(route_pinned, route_names) AS route(pinned, name)
                CROSS JOIN unnest(kinds) AS k(kind)
                CROSS JOIN LATERAL (
                    SELECT id, due_at, k.kind FROM sender_emails
                    WHERE status IN ('queued', 'retry')
                      AND (pinned_mailbox IS NOT NULL, coalesce(pinned_mailbox, mailbox_group))
                          = (route.pinned, route.name)
                      AND least(step, 2) = k.kind AND due_at <= now_at AND not_before <= now_at
                      AND (agreed OR campaign_id = ANY (campaigns))
                      AND (p_groups IS NULL OR mailbox_group = ANY (p_groups))  -- a pinned row's group too
                      -- inside its lead's window (version 21): the last interval of its lead's zone that opened
                      -- by now (they never overlap), one index step, still open; none known: closed
                      AND (campaign_id <> ALL (windowed) OR coalesce((
                          SELECT w.closes > now_at FROM sender_window_intervals w
                          WHERE w.campaign_id = sender_emails.campaign_id
                            AND w.lead_timezone = (SELECT coalesce(l.timezone, '') FROM sender_leads l
                                                   WHERE l.id = sender_emails.lead_id)
                            AND w.opens <= now_at
                          ORDER BY w.opens DESC LIMIT 1), false))
                    ORDER BY due_at, id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                ) AS head
            )
            RETURNING *;
            IF FOUND THEN
                claimed := true;
                EXIT;
            END IF;
        END LOOP;
        EXIT WHEN NOT claimed;
    END LOOP;
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
    SET status = CASE WHEN sender_is_suppressed(address) THEN 'suppressed'::sender_status
                      WHEN attempts = 0 THEN 'queued'::sender_status ELSE 'retry'::sender_status END,
        not_before = now_at + make_interval(secs => p_delay_s), claimed_by = NULL, updated_at = now_at,
        -- its place in the queue stays (due_at), unless the delay is shorter than the time it was to become due
        due_at = least(due_at, now_at + make_interval(secs => p_delay_s))
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

-- The last checks before the handoff, and the attempt's start, in one call: ok (with the row's fixed
-- Message-ID) | suppressed | ended (the lead's sequence ended meanwhile: cancelled) | lost (the row is no longer
-- ours to send, or its previous step is not sent: it waits again). A later step goes only from its pinned mailbox.
CREATE FUNCTION sender_begin_attempt(p_email bigint, p_attempt uuid, p_mailbox text, p_source_ip text,
                                     p_message_id text, p_subject text, p_now timestamptz DEFAULT NULL,
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
    IF r.pinned_mailbox IS NOT NULL AND lower(p_mailbox) <> r.pinned_mailbox THEN
        RAISE EXCEPTION 'sender_begin_attempt: row % goes from mailbox %, not %', p_email, r.pinned_mailbox,
                        p_mailbox;
    END IF;
    IF EXISTS (SELECT 1 FROM sender_leads WHERE id = r.lead_id AND ended IS NOT NULL) THEN
        UPDATE sender_emails SET status = 'cancelled', updated_at = now_at WHERE id = p_email;
        PERFORM sender_event(p_email, 'cancelled', 'the sequence ended before the handoff', p_now);
        outcome := 'ended';
        RETURN;
    END IF;
    IF r.step > 1 AND NOT sender_step_was_sent(r.lead_id, r.step - 1) THEN
        UPDATE sender_emails SET status = 'waiting', claimed_by = NULL, updated_at = now_at WHERE id = p_email;
        PERFORM sender_event(p_email, 'waiting', format('step %s is not sent', r.step - 1), p_now);
        outcome := 'lost';
        RETURN;
    END IF;
    IF sender_is_suppressed(r.address) THEN
        UPDATE sender_emails SET status = 'suppressed', updated_at = now_at WHERE id = p_email;
        PERFORM sender_event(p_email, 'suppressed', 'suppressed before the handoff', p_now);
        outcome := 'suppressed';
        RETURN;
    END IF;
    UPDATE sender_emails
    SET attempt_id = p_attempt, attempt_started_at = now_at, attempts = attempts + 1, mailbox = p_mailbox,
        source_ip = p_source_ip, message_id = coalesce(sender_emails.message_id, p_message_id),
        sent_subject = p_subject, updated_at = now_at
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

-- Settle a failed or unknown attempt. p_outcome:
--   retry       a clear retryable failure: back in p_delay_s, unless out of attempts (then failed)
--   reroute     the mailbox's fault (auth, quota, rate): back in p_delay_s, the attempt refunded
--   failed      permanent (content)
--   suppress    the recipient's address is bad: suppress it everywhere
--   bounce      the recipient's server refused the address for good (550 5.1.1 at RCPT): as suppress, and it is
--               a hard bounce of the mailbox (a `bounced` feedback entry, source `agent`, that health counts)
--   unconfirmed we do not know whether it left: never resent
-- The rank guard: nothing here touches a row that is already sent, or settled (ranked above sending); except that
-- a definite failure (failed, suppress, bounce) still settles a row that only a relay's `sent` made sent (no
-- send-log entry), as it would have had it come first: a late `sent` never overwrites `failed`; nor does a
-- relay's `delivered` (version 14), either way round.
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
    IF r.status <> 'sending' AND sender_rank(r.status) > sender_rank('sending')
       AND NOT (r.status IN ('sent', 'delivered') AND p_outcome IN ('failed', 'suppress', 'bounce')
                AND NOT EXISTS (SELECT 1 FROM sender_sent WHERE email_id = p_email)) THEN
        RETURN r.status;
    END IF;
    IF p_outcome IN ('suppress', 'bounce') THEN
        PERFORM sender_suppress(r.address, p_detail, p_now);
        new_status := 'suppressed';
    ELSIF p_outcome = 'unconfirmed' THEN
        new_status := 'unconfirmed';
    ELSIF p_outcome = 'failed' THEN
        new_status := 'failed';
    ELSIF p_outcome IN ('retry', 'reroute') THEN
        IF sender_is_suppressed(r.address) THEN
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

-- Rows whose agent died: back to the queue if the attempt never started, else unconfirmed (never resent).
-- A row someone holds is left for the next sweep: its owner is settling it, or another sweep is, and a sweep that
-- waited would deadlock with the next one, each holding rows the other reached first.
CREATE FUNCTION sender_sweep(p_older_than_s double precision, p_now timestamptz DEFAULT NULL,
                             OUT requeued integer, OUT unconfirmed integer)
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
BEGIN
    WITH stale AS (
        UPDATE sender_emails
        SET status = CASE WHEN sender_is_suppressed(address) THEN 'suppressed'::sender_status
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

-- The one function every piece of feedback goes through. p_verdict says how sure the source is that the event is
-- what it claims (version 7): for mail, the DMARC result of its From domain in the mailbox provider's own
-- Authentication-Results (`pass`, `fail`, or `none`: no result, no trusted header, or not a mail). Answers:
--   applied   the row's status moved
--   recorded  a new event that changed no status (lower rank, or an event with no status of its own)
--   forged    p_verdict is `fail`: recorded with its verdict and in the row's history, nothing else changed
--   replay    this (row, event, reference) was already recorded: nothing changed
--   no_row    no such row
-- A `sent` or `delivered` never moves a row the agent settled as not handed over (failed, suppressed, cancelled):
-- the agent's own answer from the submission server outranks a relay's report.
CREATE FUNCTION sender_apply_event(p_email bigint, p_event text, p_at timestamptz, p_source text, p_ref text,
                                   p_detail text, p_verdict text DEFAULT 'none', p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    verdict text := coalesce(p_verdict, 'none');
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
    -- rank guard; `left` sets replied; the others (deferred, auto_replied, colleague_replied) are recorded only.
    IF EXISTS (SELECT 1 FROM sender_status_ranks() WHERE status = p_event) THEN
        target := p_event::sender_status;
    ELSIF p_event = 'left' THEN
        target := 'replied';  -- a reply, that ends its lead's sequence as `left` (below)
    END IF;
    INSERT INTO sender_feedback (email_id, event, source, ref, mailbox, occurred_at, received_at, detail, verdict)
    VALUES (p_email, p_event, p_source, coalesce(p_ref, ''), r.mailbox, coalesce(p_at, now_at), now_at,
            left(coalesce(p_detail, ''), 500), verdict)
    ON CONFLICT (email_id, event, ref) DO NOTHING
    RETURNING id INTO recorded;
    IF recorded IS NULL THEN
        RETURN 'replay';
    END IF;
    IF verdict = 'fail' THEN
        PERFORM sender_event(p_email, 'forged', format('%s %s, DMARC fail: %s', p_source, p_event,
                                                       left(coalesce(p_detail, ''), 300)), p_now);
        RETURN 'forged';
    END IF;
    PERFORM sender_event(p_email, p_event, format('%s%s: %s', p_source,
                                                  CASE WHEN verdict = 'pass' THEN ' (DMARC pass)' ELSE '' END,
                                                  left(coalesce(p_detail, ''), 300)), p_now);
    -- Nor a `delivered` (version 14): a relay's late report never overturns a refusal the agent saw (554 at DATA);
    -- the event stays recorded, in the feedback and the row's history, for a person.
    IF target IN ('sent', 'delivered') AND r.status IN ('failed', 'suppressed', 'cancelled') THEN
        target := NULL;
    END IF;
    -- What a reply says of its lead (version 16): gone or the wrong person (`left`), or a colleague answered
    -- (`colleague_replied`): the sequence ends for that reason, before the row's own status can end it as a reply,
    -- and keeps what the reply named (the addresses it gives, who replied) for `lead show`.
    IF p_event IN ('left', 'colleague_replied') THEN
        PERFORM sender_end_sequence(r.lead_id, p_event, now_at);
        UPDATE sender_leads SET ended_note = left(coalesce(p_detail, ''), 500)
        WHERE id = r.lead_id AND ended = p_event;
    END IF;
    IF target IS NOT NULL THEN
        UPDATE sender_emails SET status = target, updated_at = now_at
        WHERE id = p_email AND status IS DISTINCT FROM target
        RETURNING status INTO after;
    END IF;
    -- What the event means beyond the row, whatever the row's status ends as (after the row's own status, so that
    -- its sequence ends for the event's reason, not for the suppression it causes).
    IF p_event IN ('bounced', 'unsubscribed', 'complained') THEN
        PERFORM sender_suppress(r.address, p_event || ' (' || p_source || ')', p_now);
    END IF;
    IF target IS NOT NULL AND after IS NOT NULL AND after = target THEN
        RETURN 'applied';
    END IF;
    RETURN 'recorded';
END
$$;

-- The same, naming the row by the Message-ID it was sent with (angle brackets optional).
CREATE FUNCTION sender_apply_event_by_message_id(p_message_id text, p_event text, p_at timestamptz, p_source text,
                                                 p_ref text, p_detail text, p_verdict text DEFAULT 'none',
                                                 p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    found bigint;
BEGIN
    SELECT id INTO found FROM sender_emails
    WHERE message_id = '<' || btrim(p_message_id, '<> ') || '>';
    IF found IS NULL THEN
        RETURN 'no_row';
    END IF;
    RETURN sender_apply_event(found, p_event, p_at, p_source, p_ref, p_detail, p_verdict, p_now);
END
$$;

-- A click or an open (version 17): recorded with its verdict and in the row's history, never a status or a
-- sequence change. p_relabel_since: the row's earlier ones since then get this verdict too (a scanner's burst).
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

-- Replies as a person reads them (version 16, docs/feedback.md).

-- An automatic reply says its author is away until p_until: the lead's steps not sent yet wait until then, and so
-- does a step created later (sender_advance reads sender_leads.held_until). The first open window after it is the
-- agent's to find: a row claimed outside its lead's window goes back until the window opens. A hold is never
-- shortened (the later of two stands); a lead whose sequence ended is left alone. Returns how many rows it moved.
CREATE FUNCTION sender_hold(p_email bigint, p_until timestamptz, p_why text, p_now timestamptz DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
    l sender_leads;
    moved integer;
BEGIN
    SELECT * INTO r FROM sender_emails WHERE id = p_email;
    SELECT * INTO l FROM sender_leads WHERE id = r.lead_id FOR UPDATE;
    IF l.id IS NULL OR l.ended IS NOT NULL THEN
        RETURN 0;
    END IF;
    IF l.held_until IS NULL OR p_until > l.held_until THEN
        UPDATE sender_leads SET held_until = p_until, held_why = left(coalesce(p_why, ''), 500) WHERE id = l.id;
    END IF;
    WITH held AS (
        UPDATE sender_emails SET not_before = p_until, due_at = greatest(due_at, p_until), updated_at = now_at
        WHERE lead_id = r.lead_id AND status IN ('waiting', 'queued', 'retry')
          AND not_before < p_until
        RETURNING id
    )
    SELECT count(*) INTO moved
    FROM (SELECT sender_event(id, 'held', format('until %s: %s', p_until, coalesce(p_why, '')), p_now)
          FROM held) AS logged;
    RETURN moved;
END
$$;

-- A reply from another address at a lead's domain that names no row of ours (version 16): in the campaigns whose
-- file says `stop_on_domain_reply: true`, of the leads at p_sender's domain whose sequences go on and that mailbox
-- p_mailbox has mailed, the one it mailed last ends as `colleague_replied`, naming p_sender (p_detail). The caller
-- has decided that the domain is a company's, not a free-mail provider's. The event goes through
-- sender_apply_event on that lead's last row from p_mailbox: answer is its answer, or no_row when no lead
-- qualifies.
CREATE FUNCTION sender_colleague_reply(p_mailbox text, p_sender text, p_ref text, p_detail text,
                                       p_verdict text DEFAULT 'none', p_now timestamptz DEFAULT NULL,
                                       OUT email_id bigint, OUT answer text)
LANGUAGE plpgsql AS $$
BEGIN
    -- read before (a restored inbox mark): the lead it ended, never the next one at the domain
    SELECT f.email_id INTO email_id FROM sender_feedback f WHERE f.event = 'colleague_replied' AND f.ref = p_ref
    LIMIT 1;
    IF email_id IS NOT NULL THEN
        answer := 'replay';
        RETURN;
    END IF;
    SELECT e.id INTO email_id
    FROM sender_leads l
    JOIN sender_campaigns c ON c.id = l.campaign_id
    JOIN sender_emails e ON e.lead_id = l.id
    JOIN sender_sent g ON g.email_id = e.id
    WHERE split_part(l.address, '@', 2) = split_part(lower(p_sender), '@', 2) AND l.ended IS NULL
      AND l.address <> lower(p_sender) AND c.stop_on_domain_reply AND lower(g.mailbox) = lower(p_mailbox)
    ORDER BY g.accepted_at DESC, e.id DESC
    LIMIT 1;
    IF email_id IS NULL THEN
        answer := 'no_row';
        RETURN;
    END IF;
    answer := sender_apply_event(email_id, 'colleague_replied', NULL, 'inbox', p_ref, p_detail, p_verdict, p_now);
END
$$;

-- A person's correction of what came back about row p_email (`sendhost sender reclassify`, version 16): p_as
-- (replied, auto_replied, unsubscribed, bounced, left) applied as feedback from a person, with its effect, under
-- the rank guard: a row never moves down, so a row `replied` called an automatic reply stays replied and its
-- sequence stays ended (answer outranked), while an unsubscribe or a bounce still suppresses the address. An
-- automatic reply holds the lead 7 days (the default of an automatic reply naming no date); `left` also replaces
-- a sequence that ended as `replied`. Answers: applied (the row or its lead's sequence changed) | recorded |
-- outranked | not_sent (no attempt ever started: nothing came back about it) | no_row.
CREATE FUNCTION sender_reclassify(p_email bigint, p_as text, p_note text, p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    r sender_emails;
    effect sender_status;  -- the status the verdict gives a row, for the rank guard's answer
    answer text;
    held integer;
BEGIN
    IF p_as IS NULL OR p_as NOT IN ('replied', 'auto_replied', 'unsubscribed', 'bounced', 'left') THEN
        RAISE EXCEPTION 'sender_reclassify: % is not a verdict a person gives', p_as
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    effect := CASE p_as WHEN 'auto_replied' THEN 'delivered' WHEN 'left' THEN 'replied'
                        ELSE p_as::sender_status END;
    SELECT * INTO r FROM sender_emails WHERE id = p_email;
    IF r.id IS NULL THEN
        RETURN 'no_row';
    END IF;
    IF r.attempt_started_at IS NULL THEN
        RETURN 'not_sent';
    END IF;
    answer := sender_apply_event(p_email, p_as, now_at, 'person', 'person:' || clock_timestamp()::text,
                                 coalesce(p_note, ''), 'none', p_now);
    IF p_as = 'left' THEN
        UPDATE sender_leads SET ended = 'left', ended_at = now_at, ended_note = left(coalesce(p_note, ''), 500)
        WHERE id = r.lead_id AND ended IN ('replied', 'left');
        IF FOUND THEN
            answer := 'applied';
        END IF;
    ELSIF p_as = 'auto_replied' THEN
        held := sender_hold(p_email, now_at + interval '7 days',
                            'an automatic reply, said a person: ' || coalesce(p_note, ''), p_now);
        IF held > 0 THEN
            answer := 'applied';
        END IF;
    END IF;
    IF answer = 'recorded' AND sender_rank(r.status) > sender_rank(effect) THEN
        RETURN 'outranked';
    END IF;
    RETURN answer;
END
$$;

-- The HMAC key of unsubscribe tokens, created on first use and never changed.
CREATE FUNCTION sender_unsubscribe_key(p_new text) RETURNS text LANGUAGE sql AS $$
    INSERT INTO sender_settings (name, value) VALUES ('unsubscribe_key', p_new) ON CONFLICT (name) DO NOTHING;
    SELECT value FROM sender_settings WHERE name = 'unsubscribe_key';
$$;

-- Counts that cost the same at 10 thousand rows as at 10 million (version 10): what `sender status` and /metrics
-- show (rows per status, history entries per kind) without counting the ledger. Every insert, status change and
-- delete of a row, and every history entry, appends one line to sender_count_changes in its own transaction; a
-- fold moves the lines into sender_counts. Appending takes no lock another writer waits for: a counter row
-- updated by every claim would serialize the claims, and rows kept per slot would still deadlock, as one
-- transaction changes several rows (a claim of many, a settle and the next step it releases) in no fixed order.
-- The one writer of sender_counts is a fold holding a transaction lock that no other fold waits for.
CREATE TABLE sender_counts (
    counter text NOT NULL CHECK (counter IN ('rows', 'events')),  -- rows: by status; events: by kind
    key text NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (counter, key)
);

-- What changed since the last fold: one line per change, old_key counted out and new_key counted in (NULL: none).
CREATE TABLE sender_count_changes (
    counter text NOT NULL,
    old_key text,
    new_key text
);

CREATE FUNCTION sender_count_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO sender_count_changes VALUES ('rows', NULL, NEW.status::text);
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO sender_count_changes VALUES ('rows', OLD.status::text, NEW.status::text);
    ELSE
        INSERT INTO sender_count_changes VALUES ('rows', OLD.status::text, NULL);
    END IF;
    -- Now and then a writer folds too, so the lines stay few however long no one reads the counts.
    IF coalesce(NEW.id, OLD.id) % 1024 = 0 THEN
        PERFORM sender_fold_counts();
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION sender_count_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO sender_count_changes VALUES ('events', NULL, NEW.kind);
    ELSE
        INSERT INTO sender_count_changes VALUES ('events', OLD.kind, NULL);
    END IF;
    RETURN NULL;
END
$$;

-- The history entries that `sendhost sender retire-history` dropped with their month (version 13), per kind: still
-- counted, by sender_counts as before and by a recount from here.
CREATE TABLE sender_events_retired (
    kind text PRIMARY KEY,
    n bigint NOT NULL
);

-- TRUNCATE fires no row trigger: the table's counter starts again from nothing (a truncated history has no
-- retired months either).
CREATE FUNCTION sender_count_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM sender_count_changes WHERE counter = TG_ARGV[0];
    DELETE FROM sender_counts WHERE counter = TG_ARGV[0];
    IF TG_ARGV[0] = 'events' THEN
        DELETE FROM sender_events_retired;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER sender_count_rows AFTER INSERT OR DELETE ON sender_emails
FOR EACH ROW EXECUTE FUNCTION sender_count_row();
CREATE TRIGGER sender_count_row_status AFTER UPDATE OF status ON sender_emails
FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION sender_count_row();
CREATE TRIGGER sender_count_rows_truncated AFTER TRUNCATE ON sender_emails
FOR EACH STATEMENT EXECUTE FUNCTION sender_count_truncated('rows');
CREATE TRIGGER sender_count_event AFTER INSERT OR DELETE ON sender_events
FOR EACH ROW EXECUTE FUNCTION sender_count_event();
CREATE TRIGGER sender_count_events_truncated AFTER TRUNCATE ON sender_events
FOR EACH STATEMENT EXECUTE FUNCTION sender_count_truncated('events');

-- Move the committed lines into sender_counts, unless another fold is at it (it will have them, or the next
-- will): no one waits. A line whose transaction has not committed is not seen, so it stays for a later fold. A
-- read-only transaction (a standby's, a read-only role's) folds nothing and still reads the counts right.
CREATE FUNCTION sender_fold_counts() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_read_only')::boolean
       OR NOT pg_try_advisory_xact_lock(hashtext('sender_fold_counts')) THEN
        RETURN;
    END IF;
    WITH moved AS (DELETE FROM sender_count_changes RETURNING counter, old_key, new_key),
    delta AS (SELECT counter, new_key AS key, 1 AS n FROM moved WHERE new_key IS NOT NULL
              UNION ALL
              SELECT counter, old_key, -1 FROM moved WHERE old_key IS NOT NULL)
    INSERT INTO sender_counts AS c (counter, key, n)
    SELECT counter, key, sum(n) FROM delta GROUP BY counter, key
    ON CONFLICT (counter, key) DO UPDATE SET n = c.n + excluded.n;
END
$$;

-- A counter's counts: the fold's and the lines since, both read in one snapshot (a fold commits both at once).
CREATE FUNCTION sender_counted(p_counter text) RETURNS TABLE (key text, n bigint) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sender_fold_counts();
    RETURN QUERY
    SELECT d.key, sum(d.n)::bigint FROM (
        SELECT c.key, c.n FROM sender_counts c WHERE c.counter = p_counter
        UNION ALL
        SELECT l.new_key, 1 FROM sender_count_changes l WHERE l.counter = p_counter AND l.new_key IS NOT NULL
        UNION ALL
        SELECT l.old_key, -1 FROM sender_count_changes l WHERE l.counter = p_counter AND l.old_key IS NOT NULL
    ) AS d GROUP BY d.key HAVING sum(d.n) <> 0;
END
$$;

-- Count again from the tables themselves: what the upgrade to version 10 does, and the repair should a person
-- ever doubt the counters. Writers wait meanwhile, so no change falls between the count and the lines dropped.
-- The history entries of retired months are counted from their tally (version 13).
CREATE FUNCTION sender_recount() RETURNS void LANGUAGE plpgsql AS $$
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


-- History by month (version 13): sender_events and sender_send_log are partitioned by the UTC month of their time,
-- <table>_yYYYYmMM, so that what a send costs does not grow with the years and old months are dropped whole
-- (`sendhost sender retire-history`). What is kept forever: the rows, their leads, sender_sent (what the sequence
-- rules read of a send), the suppressions, the feedback and the counters.

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

-- Placement tests (version 19, issue 42): one message from a mailbox to each seed of the inventory, through the
-- agent's send path, then looked for in the seed's folders by IMAP. A test, its results (one per mailbox and seed,
-- with where the message landed and the receiver's verdicts), and the rests they put on mailboxes.
CREATE TABLE sender_placement_tests (
    id bigserial PRIMARY KEY,
    started_at timestamptz NOT NULL,
    wait_s integer NOT NULL CHECK (wait_s >= 0),
    campaign text,  -- the campaign whose step was rendered for the seeds; NULL: a neutral text
    step integer CHECK (step >= 1),
    finished_at timestamptz
);

CREATE TABLE sender_placement_results (
    id bigserial PRIMARY KEY,
    test_id bigint NOT NULL REFERENCES sender_placement_tests (id),
    mailbox text NOT NULL CHECK (mailbox = lower(mailbox)),
    seed text NOT NULL CHECK (seed = lower(seed)),
    provider text NOT NULL,
    token text NOT NULL UNIQUE,  -- in the message's text: how it is found in the seed
    email_id bigint REFERENCES sender_emails (id),  -- the row the agent sends; NULL: refused at enqueue
    -- pending: not looked for yet; not_sent: the agent never handed it over; not_found: not in any folder when the
    -- wait ended (never `spam`: nobody saw it there); unknown: the seed could not be searched
    placement text NOT NULL DEFAULT 'pending'
        CHECK (placement IN ('pending', 'inbox', 'spam', 'category', 'other', 'not_found', 'not_sent', 'unknown')),
    folder text,
    category text,  -- Gmail's category (X-GM-LABELS), when the server offers it
    found_after_s double precision,  -- from the submission's acceptance to the seed's arrival time
    spf text,
    dkim text,
    dkim_domain text,  -- the signing domain (header.d) of the DKIM result read
    dmarc text,
    arc text,
    auth_results text,  -- the trusted Authentication-Results header(s) as the seed's provider wrote them
    detail text NOT NULL DEFAULT '',
    checked_at timestamptz,
    UNIQUE (test_id, mailbox, seed)
);
CREATE INDEX sender_placement_results_mailbox ON sender_placement_results (mailbox, test_id);

-- Queue one placement message: the seed is no lead of any campaign file; its row is an `enqueue` row of its own
-- lead (`placement:<token>`), pinned to the mailbox under test, so only that mailbox sends it, through the
-- agent's send path (its warm-up reservation counts as any send's). A suppressed seed is recorded `not_sent`.
CREATE FUNCTION sender_placement_enqueue(p_test bigint, p_token text, p_mailbox text, p_group text, p_seed text,
                                         p_provider text, p_subject text, p_body text, p_fields jsonb,
                                         p_now timestamptz DEFAULT NULL, OUT outcome text, OUT email_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := coalesce(p_now, now());
    campaign bigint := (SELECT id FROM sender_campaigns WHERE name = 'enqueue');
    placement_lead text := 'placement:' || p_token;
    the_lead bigint;
BEGIN
    IF sender_is_suppressed(p_seed) THEN
        outcome := 'suppressed';
        INSERT INTO sender_placement_results (test_id, mailbox, seed, provider, token, placement, detail, checked_at)
        VALUES (p_test, lower(p_mailbox), lower(p_seed), p_provider, p_token, 'not_sent',
                'the seed is suppressed in the ledger', now_at);
        RETURN;
    END IF;
    -- p_fields: a campaign step's merge fields for the seed as a lead (the agent renders the step with them and the
    -- unsubscribe link, as any lead's); NULL: the row's text as it is
    INSERT INTO sender_leads (campaign_id, kind, lead, address, fields, created_at)
    VALUES (campaign, 'enqueue', placement_lead, lower(p_seed), p_fields, now_at)
    RETURNING id INTO the_lead;
    INSERT INTO sender_emails (campaign_id, lead_id, step, address, mailbox_group, subject, body, not_before, due_at,
                               pinned_mailbox, created_at, updated_at)
    VALUES (campaign, the_lead, 1, lower(p_seed), p_group, p_subject, p_body, now_at, now_at, lower(p_mailbox),
            now_at, now_at)
    RETURNING id INTO email_id;
    PERFORM sender_event(email_id, 'queued', 'placement test', p_now);
    INSERT INTO sender_placement_results (test_id, mailbox, seed, provider, token, email_id)
    VALUES (p_test, lower(p_mailbox), lower(p_seed), p_provider, p_token, email_id);
    outcome := 'queued';
END
$$;

-- What a seed's folders said of one placement message.
CREATE FUNCTION sender_placement_record(p_token text, p_placement text, p_folder text, p_category text,
                                        p_found_after_s double precision, p_spf text, p_dkim text, p_dkim_domain text,
                                        p_dmarc text, p_arc text, p_auth_results text, p_detail text,
                                        p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE sql AS $$
    UPDATE sender_placement_results
    SET placement = p_placement, folder = p_folder, category = p_category, found_after_s = p_found_after_s,
        spf = p_spf, dkim = p_dkim, dkim_domain = p_dkim_domain, dmarc = p_dmarc, arc = p_arc,
        auth_results = p_auth_results, detail = coalesce(p_detail, ''), checked_at = coalesce(p_now, now())
    WHERE token = p_token;
$$;

-- A mailbox rested by its placement (sendhost_placement.rest_below): why, on which tests, and when it was lifted.
CREATE TABLE sender_placement_rests (
    id bigserial PRIMARY KEY,
    mailbox text NOT NULL CHECK (mailbox = lower(mailbox)),
    rested_at timestamptz NOT NULL,
    how text NOT NULL CHECK (how IN ('halved', 'paused')),
    reason text NOT NULL,
    tests bigint[] NOT NULL,
    lifted_at timestamptz,
    lifted_by text
);
CREATE UNIQUE INDEX sender_placement_rests_open ON sender_placement_rests (mailbox) WHERE lifted_at IS NULL;

-- A test begins, and ends (every job role writes only through functions, sql/roles.sql).
CREATE FUNCTION sender_placement_begin(p_wait_s integer, p_campaign text, p_step integer,
                                       p_now timestamptz DEFAULT NULL) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO sender_placement_tests (started_at, wait_s, campaign, step)
    VALUES (coalesce(p_now, now()), p_wait_s, p_campaign, p_step) RETURNING id;
$$;

CREATE FUNCTION sender_placement_finish(p_test bigint, p_now timestamptz DEFAULT NULL) RETURNS void
LANGUAGE sql AS $$
    UPDATE sender_placement_tests SET finished_at = coalesce(p_now, now()) WHERE id = p_test;
$$;

-- Rest a mailbox (one open rest at a time: true when this one is new), or lift its open rest (true when it had one).
CREATE FUNCTION sender_placement_rest(p_mailbox text, p_how text, p_reason text, p_tests bigint[],
                                      p_now timestamptz DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sender_placement_rests (mailbox, rested_at, how, reason, tests)
    VALUES (lower(p_mailbox), coalesce(p_now, now()), p_how, p_reason, p_tests)
    ON CONFLICT (mailbox) WHERE lifted_at IS NULL DO NOTHING;
    RETURN FOUND;
END
$$;

CREATE FUNCTION sender_placement_lift(p_mailbox text, p_by text, p_now timestamptz DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sender_placement_rests SET lifted_at = coalesce(p_now, now()), lifted_by = p_by
    WHERE mailbox = lower(p_mailbox) AND lifted_at IS NULL;
    RETURN FOUND;
END
$$;

SELECT sender_make_partitions(now() + interval '2 months');  -- this month and the next two, as migrate makes them
