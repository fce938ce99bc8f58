"""Mutation checks: break one rule of the core logic at a time and see that a test notices.

    .venv/bin/python tools/mutate.py --list            # the catalogue
    .venv/bin/python tools/mutate.py                   # every mutation
    .venv/bin/python tools/mutate.py 'claim-*' spf-walk-ignores-void-limit   # a subset, by name or glob

Each mutation replaces one exact text in one file and names the tests that must fail with it. The checkout is
never touched: the tool copies the working tree (committed or not, ignored files left out) into a temporary
directory, first runs every named test there unmutated (a failing baseline makes every result meaningless), then
applies one mutation at a time to the copy, runs its tests with a timeout, and puts the file back. It reports each
mutation as caught (a named test failed), SURVIVED (they all passed), timeout (counted as caught: the tests did not
pass, but a test should fail, not hang) or error (the tests could not run: a stale node id, an import error).
Exit 0 when every mutation was caught, 1 when one survived or errored, 2 for bad arguments or a failing baseline.
Standard library only.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TIMEOUT_S = 300.0

# The files the catalogue mutates and the test files it names, each spelled once: a moved file is one line here.
LEDGER_SQL = "sender/sql/schema.sql"  # the current schema: what a fresh (test) database is made from
QUERIES_SQL = "sender/sql/queries.sql"
ATTEMPT = "sender/sending/attempt.py"
RESERVE = "sender/sending/reserve.py"
GATE = "sender/sending/gate.py"
THREAD_HEADERS = "sender/sending/thread_headers.py"
INBOX = "sender/feedback/inbox.py"
OUTCOMES = "sender/sending/outcomes.py"
RESERVE_LUA = "warmup/lua/reserve.lua"
CANCEL_LUA = "warmup/lua/cancel.lua"
DAY_COUNT_LUA = "warmup/lua/_day_count.lua"
LEASE_LUA = "ippool/lua/lease.lua"
REAP_LUA = "ippool/lua/reap.lua"
LIVE_LUA = "ippool/lua/_live.lua"
SPF = "dns_audit/spf.py"
SPF_EVAL = "dns_audit/spf_eval.py"
DKIM = "dns_audit/dkim.py"
DNSBL = "dns_audit/dnsbl.py"
WEB = "sender/feedback/web.py"
SIGNATURE = "sender/feedback/signature.py"
TOKENS = "sender/sending/tokens.py"
WINDOW = "sender/campaigns/window.py"
WINDOW_INTERVALS = "sender/ledger/window_intervals.py"

LEDGER_TESTS = "tests/sender/ledger/test_ledger.py"
EVENTS_TESTS = "tests/sender/ledger/test_events.py"
OUTCOMES_TESTS = "tests/sender/sending/test_outcomes.py"
REBUILD_TESTS = "tests/sender/sending/test_counters_rebuild.py"
AGENT_TESTS = "tests/sender/sending/test_agent.py"
CRASH_TESTS = "tests/sender/sending/test_crash.py"
SEQUENCE_TESTS = "tests/sender/campaigns/test_sequences.py"
SEQUENCE_DELIVERY_TESTS = "tests/sender/campaigns/test_sequence_delivery.py"
SEQUENCE_CRASH_TESTS = "tests/sender/campaigns/test_sequence_crashes.py"
SEQUENCE_INBOX_TESTS = "tests/sender/campaigns/test_sequence_inbox.py"
SEQUENCE_PROPERTY_TESTS = "tests/sender/campaigns/test_sequence_property.py"
FOLLOWUPS_FIRST_TESTS = "tests/sender/ledger/test_followups_first.py"
WINDOW_TESTS = "tests/sender/campaigns/test_window.py"
WINDOW_CLAIM_TESTS = "tests/sender/ledger/test_window_intervals.py"
GUARD_TESTS = "tests/warmup/test_guard.py"
GUARD_FAILURE_TESTS = "tests/warmup/test_failures_guard.py"
CAMPAIGN_CAP_AGENT_TESTS = "tests/sender/sending/test_campaign_cap_agent.py"
CAMPAIGN_CAP_TESTS = "tests/warmup/test_campaign_cap.py"
POOL_TESTS = "tests/ippool/test_pool.py"
SLOT_STORE_TESTS = "tests/ippool/test_slot_store.py"
THRESHOLD_TESTS = "tests/dns_audit/test_thresholds.py"
CODES_TESTS = "tests/dns_audit/test_codes.py"
WEB_TESTS = "tests/sender/feedback/test_web.py"
MESSAGE_TESTS = "tests/sender/sending/test_message.py"


@dataclass(frozen=True)
class Mutation:
    """One change to one rule: `original` (exactly once in `path`) becomes `replacement`; `tests` must fail."""

    name: str
    path: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    description: str


def _m(name: str, path: str, original: str, replacement: str, tests: Sequence[str], description: str) -> Mutation:
    return Mutation(name, path, original, replacement, tuple(tests), description)


# Issue 31: rules that no test pinned until each of these mutations had a test that fails with it.
ISSUE_31 = (
    _m("claim-waits-for-locked-rows", LEDGER_SQL,
       "        FOR UPDATE SKIP LOCKED\n", "        FOR UPDATE\n",
       [f"{LEDGER_TESTS}::test_claim_skips_rows_another_claim_holds"],
       "the claim waits for rows another open claim holds instead of skipping them"),
    _m("feedback-race-unguarded", LEDGER_SQL,
       "    ON CONFLICT (email_id, event, ref) DO NOTHING\n    RETURNING id INTO recorded;",
       "    RETURNING id INTO recorded;",
       [f"{EVENTS_TESTS}::test_two_first_arrivals_at_once_answer_both_and_leave_one_feedback_row"],
       "two first arrivals of one event at once: the second gets a unique violation, not an answer"),
    _m("rank-guard-starts-above-sent", LEDGER_SQL,
       "WHEN sender_rank(p_old) >= sender_rank('sent') AND", "WHEN sender_rank(p_old) > sender_rank('sent') AND",
       [f"{EVENTS_TESTS}::test_the_guard_holds_a_row_that_is_only_sent"],
       "the rank guard starts one rank above sent: a sent row can be queued again by hand"),
    _m("sends-since-forgets-unconfirmed", QUERIES_SQL,
       "WHERE accepted_at >= %(since)s AND lower(mailbox) = ANY (%(mailboxes)s)\nUNION ALL\n"
       "SELECT lower(e.mailbox), e.attempt_started_at FROM sender_emails e\n"
       "WHERE e.attempt_id IS NOT NULL AND e.status NOT IN ('failed', 'suppressed', 'cancelled')\n"
       "  AND e.attempt_started_at >= %(since)s AND lower(e.mailbox) = ANY (%(mailboxes)s)\n"
       "  AND NOT EXISTS (SELECT 1 FROM sender_sent s WHERE s.email_id = e.id);",
       "WHERE accepted_at >= %(since)s AND lower(mailbox) = ANY (%(mailboxes)s);",
       [f"{OUTCOMES_TESTS}::test_an_unknown_outcome_counts_against_the_day_rebuilt_from_the_ledger"],
       "counters rebuilt from the ledger forget attempts whose outcome is unknown"),
    _m("suppress-spares-retries", LEDGER_SQL,
       "        WHERE status IN ('waiting', 'queued', 'retry')\n          AND CASE WHEN left(entry, 1)",
       "        WHERE status IN ('waiting', 'queued')\n          AND CASE WHEN left(entry, 1)",
       [f"{LEDGER_TESTS}::test_suppression_withdraws_a_row_waiting_to_retry"],
       "suppression withdraws queued rows only, leaving rows that wait to retry"),
    _m("failed-send-keeps-its-lease", RESERVE,
       "        if self.lease is not None:\n            side_tasks.submit(",
       "        if self.lease is not None and self.accepted:\n            side_tasks.submit(",
       [f"{AGENT_TESTS}::test_a_refused_send_releases_its_lease_so_a_retiring_slot_is_ready_at_once"],
       "the agent releases a lease only after an accepted send; a refused one holds it until its TTL"),
    _m("undo-after-attempt-started", RESERVE,
       "if not self.cancelled and not self.attempt_started:", "if not self.cancelled:",
       [f"{CRASH_TESTS}::test_an_exception_after_the_attempt_started_undoes_nothing"],
       "an exception after the attempt started gives the mailbox's reservation back"),
    _m("handoff-ignores-suppression", ATTEMPT,
       'if outcome != "ok" or message_id is None:', 'if outcome == "lost":',
       [f"{AGENT_TESTS}::test_a_recipient_suppressed_after_the_claim_receives_nothing"],
       "the agent stops only on `lost`, handing over a row the last check found suppressed"),
    _m("spf-walk-ignores-void-limit", SPF,
       "return self.lookups > LOOKUP_LIMIT or self.voids > VOID_LIMIT", "return self.lookups > LOOKUP_LIMIT",
       [f"{THRESHOLD_TESTS}::test_the_spf_walk_stops_at_the_void_limit_and_follows_nothing_after_it"],
       "the SPF walk goes on past the third void lookup"),
)

# Rules whose tests already caught these before issue 31: kept here so they stay caught.
CAUGHT = (
    _m("enqueue-ignores-suppression", LEDGER_SQL,
       "    IF sender_is_suppressed(p_address) THEN\n        outcome := 'suppressed';\n        RETURN;\n"
       "    END IF;\n", "",
       [f"{LEDGER_TESTS}::test_suppressed_address_is_refused_and_withdrawn"],
       "enqueue accepts a suppressed address"),
    _m("begin-attempt-skips-suppression", LEDGER_SQL,
       "    IF sender_is_suppressed(r.address) THEN\n        UPDATE sender_emails SET status = 'suppressed'",
       "    IF false THEN\n        UPDATE sender_emails SET status = 'suppressed'",
       [f"{LEDGER_TESTS}::test_suppression_right_before_the_handoff"],
       "the attempt's start skips the last suppression check"),
    _m("send-log-twice", LEDGER_SQL,
       "waiting\n    IF NOT EXISTS (SELECT 1 FROM sender_sent WHERE email_id = p_email) THEN",
       "waiting\n    IF true THEN",
       [f"{LEDGER_TESTS}::test_a_sent_row_is_never_downgraded"],
       "recording a send twice is an error instead of a no-op"),
    _m("retry-one-attempt-more", LEDGER_SQL,
       "ELSIF p_outcome = 'retry' AND r.attempts >= p_max_attempts THEN",
       "ELSIF p_outcome = 'retry' AND r.attempts > p_max_attempts THEN",
       [f"{LEDGER_TESTS}::test_retry_stops_after_three_attempts_and_reroute_refunds"],
       "a row is retried after its third attempt"),
    _m("reroute-costs-an-attempt", LEDGER_SQL,
       "THEN greatest(attempts - 1, 0) ELSE attempts END", "THEN attempts ELSE attempts END",
       [f"{LEDGER_TESTS}::test_retry_stops_after_three_attempts_and_reroute_refunds"],
       "a reroute (the mailbox's fault) uses up one of the lead's attempts"),
    _m("sweep-requeues-started-attempts", LEDGER_SQL,
       "                     WHERE status = 'sending' AND attempt_id IS NULL\n                       AND claimed_at",
       "                     WHERE status = 'sending'\n                       AND claimed_at",
       [f"{LEDGER_TESTS}::test_sweep_requeues_unstarted_and_never_resends_started"],
       "the sweep puts a row whose attempt had started back in the queue"),
    _m("sweep-waits-for-held-rows", LEDGER_SQL,
       "FOR NO KEY UPDATE SKIP LOCKED)\n        RETURNING id\n    )\n    SELECT count(*) INTO requeued",
       "FOR NO KEY UPDATE)\n        RETURNING id\n    )\n    SELECT count(*) INTO requeued",
       [f"{LEDGER_TESTS}::test_a_sweep_never_waits_for_a_row_someone_holds"],
       "a sweep waits for a row another agent holds, and two sweeps deadlock"),
    _m("claim-ignores-not-before", LEDGER_SQL,
       "AND due_at <= now_at AND not_before <= now_at", "AND due_at <= now_at",
       [f"{LEDGER_TESTS}::test_retry_waits_thirty_minutes"],
       "the claim takes rows before they are due"),
    # Issue 44: the sending window decided in the claim, from intervals the window's one arithmetic writes.
    _m("claim-ignores-window", LEDGER_SQL,
       "AND (campaign_id <> ALL (windowed) OR coalesce((", "AND (true OR coalesce((",
       [f"{WINDOW_CLAIM_TESTS}::test_a_closed_row_is_not_claimed_and_is_claimed_once_its_window_opens"],
       "the claim takes a row outside its lead's sending window"),
    _m("window-unknown-is-open", LEDGER_SQL,
       "ORDER BY w.opens DESC LIMIT 1), false))", "ORDER BY w.opens DESC LIMIT 1), true))",
       [f"{WINDOW_CLAIM_TESTS}::test_without_intervals_the_row_is_not_claimed"],
       "a row whose window's intervals are not known (never written, or a file that no longer parses) is claimed"),
    _m("next-due-ignores-window", LEDGER_SQL,
       "(SELECT greatest(w.opens, p_at) FROM sender_window_intervals w", "(SELECT p_at FROM sender_window_intervals w",
       [f"{WINDOW_CLAIM_TESTS}::test_next_due_counts_a_closed_row_at_its_windows_opening"],
       "an idle agent wakes for a row whose window is closed, and `run --once` spins on it"),
    _m("defer-moves-open-rows", LEDGER_SQL,
       "FROM closed WHERE e.id = closed.id AND closed.opens > now_at;", "FROM closed WHERE e.id = closed.id;",
       [f"{WINDOW_CLAIM_TESTS}::test_the_sweep_cycle_moves_a_closed_row_to_its_windows_opening"],
       "the sweep cycle rewrites the not_before of every due row, those of a window open now too"),
    _m("intervals-never-extended", WINDOW_INTERVALS,
       "if known_until is not None and known_until >= now + EXTEND_BEFORE:", "if known_until is not None:",
       [f"{WINDOW_CLAIM_TESTS}::test_the_sweep_cycle_extends_the_intervals_before_they_run_out"],
       "the intervals run out two weeks after a campaign is applied, and its rows stop"),
    _m("intervals-miss-the-dst-change", WINDOW,
       "            if change is not None:\n                cuts.add(change)\n",
       "            if change is not None:\n                pass\n",
       [f"{WINDOW_TESTS}::test_a_range_ending_in_the_spring_gap_closes_when_the_clock_jumps_past_it"],
       "a range that ends in the spring-forward gap stays open past the jump, outside the documented window"),
    _m("bounce-does-not-suppress", LEDGER_SQL,
       "    IF p_event IN ('bounced', 'unsubscribed', 'complained') THEN",
       "    IF p_event IN ('unsubscribed', 'complained') THEN",
       [f"{EVENTS_TESTS}::test_nothing_overwrites_a_bounce"],
       "a hard bounce leaves its recipient unsuppressed"),
    _m("reply-spares-the-sequence", LEDGER_SQL,
       "'cancelled',\n                                      'replied', 'bounced',",
       "'cancelled',\n                                      'bounced',",
       [f"{EVENTS_TESTS}::test_a_reply_cancels_the_leads_later_steps"],
       "a reply leaves the lead's later steps queued"),
    _m("rank-replied-above-bounced", LEDGER_SQL,
       "('replied', 6), ('bounced', 7)", "('replied', 7), ('bounced', 6)",
       [f"{EVENTS_TESTS}::test_the_documented_rank_is_the_databases"],
       "a reply outranks a bounce"),
    _m("redelivered-attempt-retried", GATE,
       "ledger.settle(row.id, Settle.UNCONFIRMED,\n", "ledger.settle(row.id, Settle.RETRY,\n",
       [f"{AGENT_TESTS}::test_a_redelivered_row_with_an_attempt_takes_the_crash_path"],
       "a row claimed again after its attempt had started is queued to retry, not settled unconfirmed"),
    _m("unknown-outcome-retried", OUTCOMES,
       'return Disposition(Settle.UNCONFIRMED, None, True, 0.0, detail + "; check Sent Items")',
       "return Disposition(Settle.RETRY, None, True, 0.0, detail)",
       [f"{OUTCOMES_TESTS}::test_unconfirmed_is_never_retried"],
       "a timeout after the end of DATA is retried (a possible second delivery)"),
    _m("unknown-outcome-frees-the-slot", OUTCOMES,
       'return Disposition(Settle.UNCONFIRMED, None, True, 0.0, detail + "; check Sent Items")',
       'return Disposition(Settle.UNCONFIRMED, None, False, 0.0, detail + "; check Sent Items")',
       [f"{OUTCOMES_TESTS}::test_provider_reply_drives_the_outcome[timeout after DATA]"],
       "a timeout after the end of DATA gives the mailbox's reservation back"),
    _m("auth-failure-costs-an-attempt", OUTCOMES,
       "address, or make smtp.username the mailbox's own address\")\n        return Disposition(Settle.REROUTE,",
       "address, or make smtp.username the mailbox's own address\")\n        return Disposition(Settle.RETRY,",
       [f"{OUTCOMES_TESTS}::test_auth_failure_disconnects_the_mailbox_and_reroutes"],
       "a mailbox's failed login costs the lead an attempt and waits 30 minutes"),
    _m("daily-cap-one-more", RESERVE_LUA,
       "    elseif count >= cap then", "    elseif count > cap then",
       [f"{GUARD_TESTS}::test_reserve_counts_against_the_cap_and_confirm_keeps_it"],
       "the guard reserves one send past the day's cap"),
    _m("gap-not-enforced", RESERVE_LUA,
       "    elseif last >= 0 and now < eligible then", "    elseif false then",
       [f"{GUARD_TESTS}::test_gap_plus_jitter_is_enforced_and_the_wait_is_stored"],
       "the guard ignores the minimum gap between sends"),
    _m("pick-most-used", RESERVE_LUA,
       "elseif best == nil or count < best_count or", "elseif best == nil or count > best_count or",
       [f"{GUARD_TESTS}::test_pick_takes_the_least_used_eligible_mailbox"],
       "pick takes the most-used eligible mailbox"),
    _m("paused-mailbox-reserves", RESERVE_LUA,
       '    if f[2] == "1" then\n      consider_skip(i, "skipped-paused"',
       '    if false then\n      consider_skip(i, "skipped-paused"',
       [f"{GUARD_TESTS}::test_paused_mailbox_is_skipped_until_resumed"],
       "a paused mailbox still reserves sends"),
    _m("campaign-cap-one-more", RESERVE_LUA,
       "  if c_count == nil or (c_cap and c_count >= c_cap) then",
       "  if c_count == nil or (c_cap and c_count > c_cap) then",
       [f"{CAMPAIGN_CAP_TESTS}::test_the_campaign_cap_is_exact_and_refuses_until_its_day_ends"],
       "a campaign reserves one send past its daily cap"),
    _m("campaign-share-ignored", RESERVE_LUA,
       "    elseif c_share and (share_count(address) or c_share) >= c_share then",
       "    elseif false then",
       [f"{CAMPAIGN_CAP_TESTS}::test_a_mailbox_at_its_share_is_skipped_and_the_group_takes_the_send"],
       "a mailbox over its share of a campaign still takes the campaign's sends"),
    _m("cancel-keeps-campaign-slot", CANCEL_LUA,
       "if freed == 1 and KEYS[5] then", "if false then",
       [f"{CAMPAIGN_CAP_TESTS}::test_a_definite_refusal_frees_both_slots_once"],
       "a definite refusal frees the mailbox's slot but not the campaign's"),
    _m("campaign-counters-not-rebuilt", "sender/sending/counters.py",
       "        _restore_campaigns(guard, ledger, group, since)\n", "",
       [f"{CAMPAIGN_CAP_AGENT_TESTS}::test_a_redis_that_lost_the_campaigns_count_gets_it_back_from_the_ledger"],
       "a Redis that lost a campaign's counters lets it send its whole daily cap again the same day"),
    _m("restore-lowers", DAY_COUNT_LUA,
       "    count = math.max(count, tonumber(f[2] or \"0\"))", "    count = count",
       [f"{CAMPAIGN_CAP_TESTS}::test_a_rebuild_from_the_senders_log_raises_the_campaigns_day_and_shares_never_lowers",
        f"{GUARD_TESTS}::test_import_sends_raises_todays_counters_never_lowers"],
       "counters rebuilt from a shorter log go down: a campaign's or a mailbox's day is spent twice"),
    _m("pace-ignored", RESERVE_LUA,
       "if window_left and window_left > 0 and best_cap > count then",
       "if false then",
       [f"{CAMPAIGN_CAP_TESTS}::test_the_pace_spreads_the_remaining_cap_over_the_window_left",
        f"{CAMPAIGN_CAP_TESTS}::test_the_pace_keeps_a_cap_of_forty_from_draining_in_the_first_hour"],
       "a mailbox's sends are not spread over its window: a backlog drains at the minimum gap"),
    _m("campaign-pace-ignored", RESERVE_LUA,
       "if c_cap and ARGV[2] and ARGV[2] ~= \"\" and c_next > now then",
       "if false then",
       [f"{CAMPAIGN_CAP_TESTS}::test_a_campaign_cap_below_its_mailboxes_caps_is_spread_over_the_window"],
       "a campaign's cap far below its mailboxes' caps is spent in its window's first hour"),
    _m("cancel-settles-twice", CANCEL_LUA,
       'if redis.call("ZADD", KEYS[1], "NX", now, ARGV[2]) == 0 then',
       'if redis.call("ZADD", KEYS[1], now, ARGV[2]) == -1 then',
       [f"{GUARD_FAILURE_TESTS}::test_an_unknown_outcome_is_settled_once"],
       "a reservation can be settled twice: a late cancel frees a slot an unknown outcome kept"),
    _m("lease-past-budget", LEASE_LUA,
       "if used ~= nil and used < tonumber(f[2]) and", "if used ~= nil and used <= tonumber(f[2]) and",
       [f"{POOL_TESTS}::test_slot_at_budget_retires_and_gets_no_new_lease"],
       "a slot is leased once more after its budget is spent"),
    _m("lease-most-used-slot", LEASE_LUA,
       "(best == nil or used < best_used)", "(best == nil or used > best_used)",
       [f"{POOL_TESTS}::test_lease_takes_the_least_used_active_slot"],
       "the lease takes the most-used slot"),
    _m("reap-ignores-live-leases", REAP_LUA,
       "if state == 'retiring' and not live[index] then", "if state == 'retiring' then",
       [f"{POOL_TESTS}::test_release_of_the_last_live_lease_of_a_retiring_slot_makes_it_ready"],
       "a retiring slot is ready to rotate while a send still holds a lease on it"),
    _m("spf-lookup-limit-at-ten", SPF,
       "    if walk.lookups > LOOKUP_LIMIT:", "    if walk.lookups >= LOOKUP_LIMIT:",
       [f"{THRESHOLD_TESTS}::test_spf_with_exactly_10_lookups_passes_the_audit"],
       "the audit reports 10 SPF lookups (the limit itself) as over it"),
    _m("check-host-void-limit-at-two", SPF_EVAL,
       "            if self.voids > VOID_LIMIT:", "            if self.voids >= VOID_LIMIT:",
       [f"{THRESHOLD_TESTS}::test_check_host_allows_2_void_lookups_and_permerrors_at_3"],
       "check_host permerrors at 2 void lookups (the limit itself)"),
    _m("dkim-1024-bits-weak", DKIM,
       "elif key.bits is not None and key.bits < MIN_RSA_BITS:",
       "elif key.bits is not None and key.bits <= MIN_RSA_BITS:",
       [f"{THRESHOLD_TESTS}::test_dkim_key_size_thresholds"],
       "a 1024-bit DKIM key (the minimum) is reported as rejected"),
    _m("dnsbl-refusal-is-a-listing", DNSBL,
       'return address.startswith("127.255.255.")', "return False",
       [f"{CODES_TESTS}::test_a_listed_ip_is_an_error_and_a_refusal_is_only_a_warning"],
       "a blocklist's 127.255.255.x refusal is reported as a listing"),
)

# Survivors this catalogue found itself, each caught since by a test written for it.
FOUND = (
    # reap.lua drops expired leases before it counts live ones, so it hides this; retire.lua does not.
    _m("expired-leases-stay-live", LIVE_LUA,
       "ZRANGEBYSCORE', leases_key, '(' .. now, '+inf'", "ZRANGEBYSCORE', leases_key, '-inf', '+inf'",
       [f"{SLOT_STORE_TESTS}::test_retire_does_not_wait_for_a_lease_whose_holder_died"],
       "an expired lease (its sender died) still counts as live: a retired slot waits for it"),
)

# Issue 24: the sequence rules, each caught by a test against real services (the SMTP server, dovecot) or by the
# property test of the ledger.
SEQUENCE_RUN = f"{SEQUENCE_DELIVERY_TESTS}::test_every_lead_gets_its_steps_in_order_threaded_from_one_mailbox_and_" \
               "nothing_after_an_end"
PROPERTY = f"{SEQUENCE_PROPERTY_TESTS}::test_any_interleaving_hands_over_no_step_after_its_end_and_each_after_its_" \
           "predecessor"
ISSUE_24 = (
    _m("due-guard-ignores-the-previous-step", LEDGER_SQL,
       "    ELSIF NEW.step > 1 AND NOT sender_step_was_sent(NEW.lead_id, NEW.step - 1) THEN\n"
       "        NEW.status := 'waiting';\n", "",
       [PROPERTY],
       "a follow-up enqueued ahead is due (claimable) while the lead's previous step is not sent"),
    _m("begin-attempt-skips-the-previous-step", LEDGER_SQL,
       "    IF r.step > 1 AND NOT sender_step_was_sent(r.lead_id, r.step - 1) THEN",
       "    IF false THEN",
       [f"{SEQUENCE_TESTS}::test_a_follow_up_a_person_marks_sending_is_not_handed_over_before_its_step"],
       "the attempt's start hands over a follow-up whose previous step is not sent"),
    _m("claim-ignores-the-pin", LEDGER_SQL,
       "(pinned_mailbox IS NOT NULL, coalesce(pinned_mailbox, mailbox_group))\n"
       "                          = (route.pinned, route.name)",
       "(CASE WHEN route.pinned THEN pinned_mailbox ELSE mailbox_group END) = route.name",
       [f"{SEQUENCE_TESTS}::test_an_enqueued_follow_up_is_released_by_its_steps_send_and_pinned_to_its_mailbox",
        PROPERTY],
       "an agent claims a lead's follow-up pinned to a mailbox it does not have"),
    _m("begin-attempt-ignores-the-pin", LEDGER_SQL,
       "    IF r.pinned_mailbox IS NOT NULL AND lower(p_mailbox) <> r.pinned_mailbox THEN", "    IF false THEN",
       [PROPERTY],
       "a follow-up's attempt starts from another mailbox than the one that sent the lead's previous step"),
    _m("follow-up-not-pinned", LEDGER_SQL,
       "lower(r.mailbox), p_at, p_at)", "NULL, p_at, p_at)",
       [SEQUENCE_RUN],
       "a campaign's follow-up is created pinned to no mailbox: it goes from the group's least used"),
    _m("follow-up-due-from-the-first-queueing", LEDGER_SQL,
       "greatest(sent_at + make_interval(secs => next_step.delay_s), l.held_until),\n"
       "            greatest(sent_at + make_interval(secs => next_step.delay_s), l.held_until),",
       "greatest(r.created_at + make_interval(secs => next_step.delay_s), l.held_until),\n"
       "            greatest(r.created_at + make_interval(secs => next_step.delay_s), l.held_until),",
       [f"{SEQUENCE_DELIVERY_TESTS}::test_a_first_step_deferred_then_accepted_is_followed_up_from_its_real_send"],
       "a follow-up's delay counts from when its step was first queued, not from the send that succeeded"),
    _m("failure-spares-the-sequence", LEDGER_SQL,
       "AND NEW.status IN ('sent', 'delivered', 'failed', 'unconfirmed',",
       "AND NEW.status IN ('sent', 'delivered', 'unconfirmed',",
       [SEQUENCE_RUN],
       "a step refused for good (5xx) does not end its lead's sequence"),
    _m("unconfirmed-spares-the-sequence", LEDGER_SQL,
       "AND NEW.status IN ('sent', 'delivered', 'failed', 'unconfirmed', 'suppressed'",
       "AND NEW.status IN ('sent', 'delivered', 'failed', 'suppressed'",
       [SEQUENCE_RUN],
       "a step whose end is unknown (timeout after DATA) does not end its lead's sequence"),
    _m("bounce-spares-the-sequence", LEDGER_SQL,
       "'replied', 'bounced', 'unsubscribed', 'complained'))\nEXECUTE FUNCTION sender_sequence_rule();",
       "'replied', 'unsubscribed', 'complained'))\nEXECUTE FUNCTION sender_sequence_rule();",
       [SEQUENCE_RUN],
       "a hard bounce ends its lead's sequence only through the suppression it causes, for the wrong reason"),
    _m("resolved-send-stays-ended", LEDGER_SQL,
       "    IF l.ended = 'unconfirmed' THEN\n"
       "        UPDATE sender_leads SET ended = NULL, ended_at = NULL WHERE id = l.id;\n"
       "    ELSIF l.ended IS NOT NULL THEN",
       "    IF l.ended IS NOT NULL THEN",
       [f"{SEQUENCE_CRASH_TESTS}::test_agents_killed_at_every_step_still_send_each_step_once_and_in_order"],
       "an unconfirmed step a person resolves as sent leaves the sequence ended: its next step never comes"),
    _m("one-address-two-sequences", LEDGER_SQL,
       "WHEN NOT c.allow_other_campaigns AND EXISTS (", "WHEN false AND EXISTS (",
       [f"{SEQUENCE_DELIVERY_TESTS}::test_one_address_in_two_campaigns_however_spelled_gets_one_sequence"],
       "an address already in an active campaign is added to another, and mailed by both"),
    _m("step-subject-not-recorded", ATTEMPT,
       "message_id_for(row.idempotency_key, mailbox.address), content.headers.subject)",
       "message_id_for(row.idempotency_key, mailbox.address), None)",
       [SEQUENCE_RUN],
       "the agent does not record the Subject it sent, so a follow-up has no thread subject to reply to"),
    _m("references-only-the-previous-step", THREAD_HEADERS,
       "return ThreadHeaders(reply_subject(first_subject), ids[-1], ids)",
       "return ThreadHeaders(reply_subject(first_subject), ids[-1], ids[-1:])",
       [SEQUENCE_RUN],
       "a follow-up's References name only the previous step, not every earlier one"),
    _m("inbox-reply-is-an-auto-reply", INBOX,
       "    return Event.REPLIED, parsed.detail\n", "    return Event.AUTO_REPLIED, parsed.detail\n",
       [f"{SEQUENCE_INBOX_TESTS}::test_a_reply_read_from_the_inbox_before_step_two_is_due_means_step_two_is_never_"
        "sent"],
       "a lead's reply read from the inbox is taken for an automatic one: the sequence goes on"),
)

# Issue 25: follow-ups first.
FOLLOWUPS_SHARE_TEST = (f"{FOLLOWUPS_FIRST_TESTS}::test_with_too_little_capacity_follow_ups_get_their_share_oldest_"
                        "first_and_first_steps_the_rest")
ISSUE_25 = (
    _m("claim-ignores-the-followups-share", LEDGER_SQL,
       "    SELECT floor((p_turn + 1) * p_share) > floor(p_turn * p_share)", "    SELECT true",
       [FOLLOWUPS_SHARE_TEST],
       "every turn goes to a follow-up while one is due: a backlog of follow-ups starves the new leads"),
    _m("give-back-loses-the-place", LEDGER_SQL,
       "        due_at = least(due_at, now_at + make_interval(secs => p_delay_s))\n",
       "        due_at = now_at + make_interval(secs => p_delay_s)\n",
       [FOLLOWUPS_SHARE_TEST,
        f"{FOLLOWUPS_FIRST_TESTS}::test_a_row_given_back_keeps_its_place_ahead_of_rows_due_after_it"],
       "a row given back (its mailbox at its cap) goes behind every row that became due after it"),
)

# Issue 26: what a relay or a stranger sends the web service.
ISSUE_26_WEB = (
    _m("relay-replay-keyed-on-time", WEB,
       '"ref": RELAY_REF_PREFIX + event_id,', '"ref": at.isoformat(),',
       [f"{WEB_TESTS}::test_a_replay_is_the_relays_event_id_whatever_its_time"],
       "a relay's retry of one event, stamped anew, counts as a second event (replays keyed on `at`, not the id)"),
    _m("relay-signature-never-expires", SIGNATURE,
       "    if abs(skew) > tolerance_s:\n", "    if skew < -tolerance_s:\n",
       [f"{WEB_TESTS}::test_bad_events_change_nothing[signature-expired]"],
       "a signed request captured once verifies forever: the signature's time is checked only for being ahead"),
    _m("token-any-spelling", TOKENS,
       "    return raw if _encode(raw) == token else None\n", "    return raw\n",
       [f"{MESSAGE_TESTS}::test_only_the_canonical_spelling_of_a_token_is_accepted"],
       "a token with its last character's spare bits set (another spelling of the same bytes) is accepted"),
)

# Issue 39: the counters' rebuild counts every send handed over or that may have been, once.
ISSUE_39 = (
    _m("sends-since-by-status", QUERIES_SQL,
       "WHERE e.attempt_id IS NOT NULL AND e.status NOT IN ('failed', 'suppressed', 'cancelled')\n"
       "  AND e.attempt_started_at >= %(since)s AND lower(e.mailbox) = ANY (%(mailboxes)s)\n",
       "WHERE e.status IN ('unconfirmed', 'sending')\n"
       "  AND e.attempt_started_at >= %(since)s AND lower(e.mailbox) = ANY (%(mailboxes)s)\n",
       [f"{REBUILD_TESTS}::test_a_rebuild_counts_each_handed_over_send_once_whatever_was_said_of_it_later"],
       "counters rebuilt from the ledger drop an attempt a relay later called delivered or sent (issue 39)"),
    _m("sends-since-counts-the-log-twice", QUERIES_SQL,
       "  AND e.attempt_started_at >= %(since)s AND lower(e.mailbox) = ANY (%(mailboxes)s)\n"
       "  AND NOT EXISTS (SELECT 1 FROM sender_sent s WHERE s.email_id = e.id);",
       "  AND e.attempt_started_at >= %(since)s AND lower(e.mailbox) = ANY (%(mailboxes)s);",
       [f"{REBUILD_TESTS}::test_a_rebuild_counts_each_handed_over_send_once_whatever_was_said_of_it_later"],
       "counters rebuilt from the ledger count an accepted send twice: its log entry and its attempt"),
    _m("sends-since-as-spelled", QUERIES_SQL,
       "SELECT lower(mailbox), accepted_at FROM sender_send_log\n"
       "WHERE accepted_at >= %(since)s AND lower(mailbox) = ANY (%(mailboxes)s)\n",
       "SELECT mailbox, accepted_at FROM sender_send_log\n"
       "WHERE accepted_at >= %(since)s AND mailbox = ANY (%(mailboxes)s)\n",
       [f"{REBUILD_TESTS}::test_a_mailbox_written_with_capitals_in_the_inventory_gets_its_sends_back"],
       "counters rebuilt from the ledger miss the sends of a mailbox the inventory spells with capitals"),
)

ENGAGEMENT_TESTS = "tests/sender/feedback/test_engagement.py"
TRACKING_DELIVERY_TESTS = "tests/sender/feedback/test_tracking_delivery.py"
CAMPAIGNS_SQL = "sender/sql/campaigns.sql"
# Issue 41: clicks and opens, humans told from scanners, only a person's clicks counted.
ISSUE_41 = (
    _m("click-head-counts-as-a-person", "sender/feedback/engagement.py",
       'lambda hit: hit.method.upper() == "HEAD"),', 'lambda hit: False),',
       [f"{ENGAGEMENT_TESTS}::test_each_click_rule_and_its_order"],
       "a HEAD request (a link checker) is judged a person's click"),
    _m("click-at-delivery-is-a-person", "sender/feedback/engagement.py",
       "hit.seconds_after_acceptance < AT_DELIVERY_S", "hit.seconds_after_acceptance < 0",
       [f"{ENGAGEMENT_TESTS}::test_each_click_rule_and_its_order"],
       "a click seconds after the provider's acceptance is judged a person's"),
    _m("worked-counts-scanner-clicks", CAMPAIGNS_SQL,
       "bool_or(y.kind = 'click' AND y.verdict = 'human') AS clicked",
       "bool_or(y.kind = 'click') AS clicked",
       [f"{TRACKING_DELIVERY_TESTS}::test_a_link_followed_from_the_delivered_message_redirects_and_counts_once_a_"
        "person_clicks"],
       "what worked counts a scanner's clicks as clicks"),
    _m("click-redirects-past-the-rows-links", "sender/feedback/clicks.py",
       "if index >= len(links):", "if index > len(links):",
       [f"{TRACKING_DELIVERY_TESTS}::test_tokens_that_are_not_a_rows_own_link_get_a_bare_404"],
       "a token naming an index past the row's links is answered (not a bare 404)"),
)

CATALOGUE = ISSUE_31 + CAUGHT + FOUND + ISSUE_24 + ISSUE_25 + ISSUE_26_WEB + ISSUE_39 + ISSUE_41


@dataclass(frozen=True)
class Outcome:
    mutation: Mutation
    verdict: str  # caught | SURVIVED | timeout | error
    seconds: float
    detail: str  # the first failing test, or why the tests could not run
    output: str


def select(patterns: Sequence[str]) -> list[Mutation]:
    """The mutations whose names match any of `patterns` (names or globs), in catalogue order; all for none."""
    if not patterns:
        return list(CATALOGUE)
    unknown = [p for p in patterns if not any(fnmatch.fnmatchcase(m.name, p) for m in CATALOGUE)]
    if unknown:
        raise SystemExit(f"mutate: no mutation named {', '.join(unknown)}; see --list")
    return [m for m in CATALOGUE if any(fnmatch.fnmatchcase(m.name, p) for p in patterns)]


def copy_tree(source: Path, target: Path) -> None:
    """The working tree as it is (tracked and untracked files, ignored ones left out), symlinks as symlinks."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=source,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        origin, copy = source / name, target / name
        if not origin.is_symlink() and not origin.is_file():
            continue  # deleted in the working tree, or a submodule
        copy.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_symlink():
            copy.symlink_to(os.readlink(origin))
        else:
            shutil.copy2(origin, copy)


@contextmanager
def mutated(tree: Path, mutation: Mutation) -> Iterator[None]:
    """`mutation` applied to its file under `tree` for the block; the file's bytes put back however it ends."""
    path = tree / mutation.path
    before = path.read_bytes()
    text = before.decode()
    found = text.count(mutation.original)
    if found != 1:
        raise ValueError(f"{mutation.name}: its original text occurs {found} times in {mutation.path}, not once")
    try:
        path.write_bytes(text.replace(mutation.original, mutation.replacement).encode())
        yield
    finally:
        path.write_bytes(before)


def _environment(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)  # the copy's packages, never the checkout's (the venv has it installed editable)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def run_tests(tree: Path, tests: Sequence[str], timeout_s: float) -> tuple[int | None, str, float]:
    """pytest on `tests` in `tree`: (exit code or None on timeout, output, seconds). Stops at the first failure."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-rfE", "-p", "no:cacheprovider", *tests]
    began = time.monotonic()
    # A session of its own, so a timeout (or Ctrl-C here) ends pytest and every server its fixtures started.
    process = subprocess.Popen(command, cwd=tree, env=_environment(tree), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout_s)
        return process.returncode, output, time.monotonic() - began
    except subprocess.TimeoutExpired:
        output = _stop(process)
        return None, output, time.monotonic() - began
    except BaseException:
        _stop(process)
        raise


def _stop(process: subprocess.Popen[str]) -> str:
    """End a pytest run we started: SIGINT first (its fixtures stop their servers), SIGKILL if it lingers."""
    for sig, grace_s in ((signal.SIGINT, 30.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            output, _ = process.communicate(timeout=grace_s)
            return output or ""
        except (subprocess.TimeoutExpired, KeyboardInterrupt):  # a second Ctrl-C: on to SIGKILL
            continue
    return ""


def _first_failure(output: str) -> str:
    """The first FAILED or ERROR line of pytest's short summary, else its last line."""
    lines = output.strip().splitlines()
    summary = next((n for n, line in enumerate(lines) if "short test summary info" in line), len(lines))
    for line in lines[summary:]:
        if line.startswith(("FAILED ", "ERROR ")):
            return line
    return lines[-1] if lines else ""


def check(tree: Path, mutation: Mutation, timeout_s: float) -> Outcome:
    with mutated(tree, mutation):
        code, output, seconds = run_tests(tree, mutation.tests, timeout_s)
    if code is None:
        verdict, detail = "timeout", f"the tests ran longer than {timeout_s:.0f}s"
    elif code == 0:
        verdict, detail = "SURVIVED", "every named test passed"
    elif code == 1:
        verdict, detail = "caught", _first_failure(output)
    else:  # 2 interrupted or a collection error, 3 internal error, 4 usage error (a stale node id), 5 no tests
        verdict, detail = "error", f"pytest exited {code}: {_first_failure(output)}"
    return Outcome(mutation, verdict, seconds, detail, output)


def _check_imports_from(tree: Path) -> None:
    """Refuse to go on when the copy's interpreter would import the checkout's packages instead of the copy's."""
    probe = subprocess.run([sys.executable, "-c", "import sender; print(sender.__file__)"], cwd=tree,
                           env=_environment(tree), capture_output=True, text=True, check=False)
    found = Path(probe.stdout.strip() or ".").resolve()
    if probe.returncode != 0 or not found.is_relative_to(tree.resolve()):
        raise SystemExit(f"mutate: the copy imports `sender` from {found}, not from {tree}: {probe.stderr.strip()}")


def _list(mutations: Sequence[Mutation]) -> None:
    width = max(len(m.name) for m in mutations)
    for mutation in mutations:
        print(f"{mutation.name:<{width}}  {mutation.path}: {mutation.description}")
        for test in mutation.tests:
            print(f"{'':<{width}}    {test}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("names", nargs="*", help="mutations to run, by name or glob (default: all)")
    parser.add_argument("--list", action="store_true", help="list the catalogue and exit")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help=f"per mutation (default {DEFAULT_TIMEOUT_S:.0f})")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run of the named tests")
    parser.add_argument("-v", "--verbose", action="store_true", help="print pytest's output of each run")
    args = parser.parse_args(argv)
    mutations = select(args.names)
    if args.list:
        _list(mutations)
        return 0
    # Ctrl-C, a kill or a closed terminal all unwind the same way: pytest stopped, the copy deleted.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    try:
        return _run(mutations, args.timeout, baseline=not args.no_baseline, verbose=args.verbose)
    except KeyboardInterrupt:
        print("mutate: interrupted; the checkout was never touched and the copy is deleted", file=sys.stderr)
        return 130


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _run(mutations: Sequence[Mutation], timeout_s: float, *, baseline: bool, verbose: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="sendhost-mutate-") as scratch:
        tree = Path(scratch) / "tree"
        copy_tree(ROOT, tree)
        _check_imports_from(tree)
        if baseline:
            tests = list(dict.fromkeys(t for m in mutations for t in m.tests))
            print(f"baseline: {len(tests)} test(s) unmutated ...", flush=True)
            code, output, seconds = run_tests(tree, tests, timeout_s * 2)
            if code != 0:
                print(output)
                print(f"mutate: the tests fail without any mutation (pytest exited {code}); fix that first",
                      file=sys.stderr)
                return 2
            print(f"baseline: passed in {seconds:.0f}s", flush=True)
        outcomes = []
        for mutation in mutations:
            outcome = check(tree, mutation, timeout_s)
            outcomes.append(outcome)
            print(f"{outcome.verdict:<8}  {mutation.name}  ({outcome.seconds:.0f}s)  {outcome.detail}", flush=True)
            if verbose:
                print(outcome.output)
    bad = [o for o in outcomes if o.verdict in ("SURVIVED", "error")]
    timeouts = sum(o.verdict == "timeout" for o in outcomes)
    print(f"{len(outcomes) - len(bad)} of {len(outcomes)} caught" + (f" ({timeouts} by timeout)" if timeouts else "")
          + (f"; not caught: {', '.join(o.mutation.name for o in bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
