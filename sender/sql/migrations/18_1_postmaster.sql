-- Version 18: the provider's spam rate (issue 41). Each sending domain's daily user-reported spam ratio and domain
-- reputation as Google Postmaster Tools reports them (`sendhost postmaster sync`, the agent once a day), one row per
-- domain and day: sender_postmaster_days. A day Google has no ratio for is a NULL, never a 0. `applied_ratio` is the
-- ratio the warm-up gates were last told of, so a sync tells them only of a new or changed figure (a person who
-- resumed a paused mailbox is not overruled by the same figure read again) and, when the guard could not be told,
-- tells them at the next sync. Independent of version 17.

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
