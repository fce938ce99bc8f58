-- Named queries of the provider's spam rate (sender.postmaster, version 18); loaded with queries.sql.
-- %(now)s is the ledger's clock (NULL: the database's now()).

-- name: postmaster_record
SELECT sender_postmaster_record(%(domain)s, %(day)s, %(spam_ratio)s, %(reputation)s, %(now)s);

-- name: postmaster_applied
SELECT sender_postmaster_applied(%(domain)s, %(day)s, %(ratio)s);

-- name: postmaster_ratios
-- A domain's days with a ratio since %(since)s, and whether the warm-up gates were told of that ratio; a day
-- without a ratio is never one of them: it changes nothing.
SELECT day, spam_ratio, applied_ratio IS NOT DISTINCT FROM spam_ratio AS told FROM sender_postmaster_days
WHERE domain = lower(%(domain)s) AND spam_ratio IS NOT NULL AND day >= %(since)s
ORDER BY day;

-- name: postmaster_latest
-- Per domain: the last day with a ratio, its ratio and reputation, and the last day Google reported at all.
SELECT d.domain, r.day, r.spam_ratio, r.reputation, max(d.day) AS last_reported, max(d.fetched_at) AS fetched_at
FROM sender_postmaster_days d
LEFT JOIN LATERAL (SELECT day, spam_ratio, reputation FROM sender_postmaster_days x
                   WHERE x.domain = d.domain AND x.spam_ratio IS NOT NULL
                   ORDER BY x.day DESC LIMIT 1) r ON true
GROUP BY d.domain, r.day, r.spam_ratio, r.reputation
ORDER BY d.domain;

-- name: postmaster_days
-- One domain's days, newest first.
SELECT day, spam_ratio, reputation, fetched_at FROM sender_postmaster_days
WHERE domain = lower(%(domain)s) AND day >= %(since)s ORDER BY day DESC;
