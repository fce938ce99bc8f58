-- Named queries of placement tests (sender.ledger.placement, version 19); loaded with queries.sql.

-- name: placement_begin
SELECT sender_placement_begin(%(wait_s)s, %(campaign)s, %(step)s, %(now)s);

-- name: placement_enqueue
SELECT outcome, email_id FROM sender_placement_enqueue(%(test)s, %(token)s, %(mailbox)s, %(group)s, %(seed)s,
                                                       %(provider)s, %(subject)s, %(body)s, %(fields)s, %(now)s);

-- name: placement_sends
-- Each result of a test with its row's status and, once the submission server accepted it, when.
SELECT r.token, r.mailbox, r.seed, r.provider, r.placement, e.status::text, g.accepted_at, e.last_error, r.detail
FROM sender_placement_results r
LEFT JOIN sender_emails e ON e.id = r.email_id
LEFT JOIN sender_sent g ON g.email_id = r.email_id
WHERE r.test_id = %(test)s
ORDER BY r.mailbox, r.seed;

-- name: placement_record
SELECT sender_placement_record(%(token)s, %(placement)s, %(folder)s, %(category)s, %(found_after_s)s, %(spf)s,
                               %(dkim)s, %(dkim_domain)s, %(dmarc)s, %(arc)s, %(auth_results)s, %(detail)s, %(now)s);

-- name: placement_finish
SELECT sender_placement_finish(%(test)s, %(now)s);

-- name: placement_results
SELECT r.test_id, r.mailbox, r.seed, r.provider, r.placement, r.folder, r.category, r.found_after_s, r.spf, r.dkim,
       r.dkim_domain, r.dmarc, r.arc, r.auth_results, r.detail
FROM sender_placement_results r
WHERE r.test_id = %(test)s
ORDER BY r.mailbox, r.seed;

-- name: placement_step
-- A campaign's step as last applied, and its first step's subject (a later step's is a reply in the thread).
SELECT s.subject, s.body, first.subject
FROM sender_campaigns c
JOIN sender_campaign_steps s ON s.campaign_id = c.id AND s.step = %(step)s
JOIN sender_campaign_steps first ON first.campaign_id = c.id AND first.step = 1
WHERE c.name = %(campaign)s;

-- name: placement_shares
-- Each mailbox's inbox share per provider over its last %(tests)s tests that reached a seed of the provider (a
-- message not sent or a seed that could not be searched says nothing of placement; one not found counts against
-- it), with those tests' ids. A message in INBOX under a Gmail category is in the inbox.
WITH judged AS (
    SELECT r.mailbox, r.provider, r.test_id, r.placement,
           dense_rank() OVER (PARTITION BY r.mailbox, r.provider ORDER BY r.test_id DESC) AS nth
    FROM sender_placement_results r
    WHERE r.placement IN ('inbox', 'category', 'spam', 'other', 'not_found')
      AND (%(mailbox)s::text IS NULL OR r.mailbox = lower(%(mailbox)s::text))
)
SELECT mailbox, provider, count(*) FILTER (WHERE placement IN ('inbox', 'category')), count(*),
       array_agg(DISTINCT test_id ORDER BY test_id)
FROM judged WHERE nth <= %(tests)s
GROUP BY mailbox, provider
ORDER BY mailbox, provider;

-- name: placement_open_rests
SELECT mailbox, rested_at, how, reason, tests FROM sender_placement_rests WHERE lifted_at IS NULL ORDER BY mailbox;

-- name: placement_rest
SELECT sender_placement_rest(%(mailbox)s, %(how)s, %(reason)s, %(tests)s, %(now)s);

-- name: placement_lift
SELECT sender_placement_lift(%(mailbox)s, %(by)s, %(now)s);

-- name: placement_latest_found
-- Each (mailbox, seed)'s latest message found in the seed, with the receiver's verdicts (`dns audit --placement`).
SELECT DISTINCT ON (r.mailbox, r.seed) r.mailbox, r.seed, r.provider, r.test_id, r.spf, r.dkim, r.dkim_domain, r.dmarc,
       r.auth_results
FROM sender_placement_results r
WHERE r.placement IN ('inbox', 'category', 'spam', 'other')
ORDER BY r.mailbox, r.seed, r.test_id DESC;
