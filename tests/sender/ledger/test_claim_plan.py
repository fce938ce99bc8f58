"""The claim query reads the claimed row's lead by its key, whatever the size of the ledger: planned for a
set-returning function's default 1,000 rows, sender_claim's one row was joined by hashing every lead of the
ledger, at each claim (bench/claim.py: 13 ms a claim beside 50,000 leads). And inside sender_claim, each pass (a
follow-up, a first step: ledger v8) reads the oldest due row of its kind on each of its routes from the due index
(ledger v12: sender_emails_due_route, by route, the mailbox a row is pinned to or else its group), without a sort,
its route and time bounds checked in the index (auto_explain shows the plans of the function's own statements);
so what other groups and other hosts' mailboxes hold is never read, however much of it is due."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from sender import Ledger
from sender.ledger.queries import query

ENQUEUE = ("SELECT sender_enqueue('L' || n, 1, 'lead' || n || '@rcpt.example', 'sales', 's', 't', NULL, NULL) "
           "FROM generate_series(1, 5000) AS n")


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
def test_the_claim_reads_its_lead_by_key_not_every_lead_of_the_ledger(ledger: Ledger, plan_cache_mode: str) -> None:
    conn = ledger._conn
    conn.execute(ENQUEUE)
    conn.execute("ANALYZE")
    conn.execute(f"SET plan_cache_mode = {plan_cache_mode}")
    params = {"worker": "w", "limit": 1, "groups": ["sales"], "mailboxes": None, "now": None}
    ((plan,),) = conn.execute("EXPLAIN (FORMAT JSON) " + query("claim"), params).fetchone()
    reads = [(node["Node Type"], node.get("Index Name")) for node in _nodes(plan["Plan"])
             if node.get("Relation Name") == "sender_leads"]
    assert reads == [("Index Scan", "sender_leads_pkey")]


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
def test_each_pass_of_the_claim_reads_the_oldest_of_its_kind_from_its_routes_index_without_a_sort(
        ledger: Ledger, plan_cache_mode: str) -> None:
    conn = ledger._conn
    conn.execute(ENQUEUE)
    conn.execute("ANALYZE")
    conn.execute(f"SET plan_cache_mode = {plan_cache_mode}")
    plans: list[dict[str, Any]] = []
    conn.add_notice_handler(lambda notice: plans.append(json.loads(notice.message_primary.split("plan:\n", 1)[1]))
                            if "plan:" in notice.message_primary else None)
    conn.execute("LOAD 'auto_explain'")
    for name, value in {"log_min_duration": "0", "log_nested_statements": "on", "log_format": "json",
                        "log_level": "notice"}.items():
        conn.execute(f"SET auto_explain.{name} = {value}")
    # only first steps are due: the turn's follow-up pass (if its turn is a follow-up's) finds none, the next reads
    # the first steps; either way, both kinds are read in two claims
    assert ledger.claim("w", 1, ["sales"]) and ledger.claim("w", 1, ["sales"])
    passes = [plan["Plan"] for plan in plans if plan["Query Text"].lstrip().startswith("UPDATE sender_emails SET "
                                                                                       "status = 'sending'")]
    assert len(passes) >= 2
    for plan in passes:
        reads = [node for node in _nodes(plan) if node.get("Relation Name") == "sender_emails"
                 and node["Node Type"] != "ModifyTable"]
        assert [(node["Node Type"], node.get("Index Name")) for node in reads] == [
            ("Index Scan", "sender_emails_due_route"), ("Index Scan", "sender_emails_pkey")]
        bounds = reads[0]["Index Cond"]
        assert "(pinned_mailbox IS NOT NULL) = " in bounds and "COALESCE(pinned_mailbox, mailbox_group) = " in bounds
        assert "LEAST(step, 2) = " in bounds and "due_at <= " in bounds and "not_before <= " in bounds
        assert not [node for node in _nodes(plan) if node["Node Type"] in ("Sort", "Incremental Sort")]


# Index entries read so far by the ledger's statements, every index of every table summed (pg_stat_user_indexes).
INDEX_ENTRIES_READ = "SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes"
LATER = "now() + interval '1 hour'"  # the claims' clock: every row made here is due by then


def _older_rows_of_other_routes(conn: Any, start: int, count: int) -> None:
    """`count` due first steps of the group `support`, and `count` follow-ups of `sales` pinned to another host's
    mailbox (step 1 sent from other@mail.example released each), all due before anything the test serves."""
    span = f"generate_series({start}, {start + count - 1}) AS n"
    conn.execute(f"SELECT sender_enqueue('S' || n, 1, 's' || n || '@rcpt.example', 'support', 's', 't', NULL, NULL) "
                 f"FROM {span}")
    for step in (1, 2):
        conn.execute(f"SELECT sender_enqueue('P' || n, {step}, 'p' || n || '@rcpt.example', 'sales', 's', 't', NULL, "
                     f"NULL) FROM {span}")
    firsts = [row[0] for row in conn.execute(
        "SELECT e.id FROM sender_emails e JOIN sender_leads l ON l.id = e.lead_id "
        "WHERE l.lead LIKE 'P%%' AND e.step = 1 AND e.status = 'queued'")]
    conn.execute("UPDATE sender_emails SET status = 'sending', claimed_at = now() WHERE id = ANY (%s)", (firsts,))
    conn.execute("SELECT sender_begin_attempt(id, gen_random_uuid(), 'other@mail.example', NULL, '<' || id || '@m>', "
                 "NULL) FROM unnest(%s::bigint[]) AS id", (firsts,))
    conn.execute("SELECT sender_record_sent(id, '250 ok') FROM unnest(%s::bigint[]) AS id", (firsts,))


def _claim_reads(conn: Any, groups: list[str], mailboxes: list[str]) -> tuple[str, int]:
    """The lead one claim (rolled back) takes for an agent serving `groups` and `mailboxes`, and how many index
    entries its statements read."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    (before,) = conn.execute(INDEX_ENTRIES_READ).fetchone()
    with conn.transaction(force_rollback=True):
        (lead_id,) = conn.execute(f"SELECT lead_id FROM sender_claim('w', 1, %s, %s, {LATER})",
                                  (groups, mailboxes)).fetchone()
    conn.execute("SELECT pg_stat_force_next_flush()")
    (after,) = conn.execute(INDEX_ENTRIES_READ).fetchone()
    (lead,) = conn.execute("SELECT lead FROM sender_leads WHERE id = %s", (lead_id,)).fetchone()
    return lead, int(after - before)


def test_a_claim_reads_no_more_index_entries_when_other_groups_and_other_mailboxes_hold_older_due_rows(
        ledger: Ledger) -> None:
    conn = ledger._conn
    conn.execute("SELECT sender_enqueue('mine', 1, 'mine@rcpt.example', 'sales', 's', 't', now() + interval "
                 "'1 minute', NULL)")  # the agent's only row, due after every other
    _older_rows_of_other_routes(conn, 1, 50)
    conn.execute("VACUUM ANALYZE")  # as autovacuum would: step 1 of each follow-up was claimed and sent
    served = (["sales"], ["me@mail.example"])
    lead, few = _claim_reads(conn, *served)
    assert lead == "mine"
    _older_rows_of_other_routes(conn, 51, 1000)  # 21 times as many older due rows it does not serve
    conn.execute("VACUUM ANALYZE")  # as autovacuum would: step 1 of each follow-up was claimed and sent
    lead, many = _claim_reads(conn, *served)
    assert lead == "mine"
    # Version 8's claim walked one index past each of them (and fetched each row to check its group): 2,100 here.
    assert many == few <= 10, (few, many)
    # Serving those routes too, the claim takes the oldest of them: of the first steps across the groups, of the
    # follow-ups across the mailboxes.
    assert _claim_reads(conn, ["sales", "support"], ["me@mail.example"])[0] == "S1"
    assert _claim_reads(conn, ["sales"], ["me@mail.example", "other@mail.example"])[0] == "P1"
