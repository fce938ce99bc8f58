"""The claim query reads the claimed row's lead by its key, whatever the size of the ledger: planned for a
set-returning function's default 1,000 rows, sender_claim's one row was joined by hashing every lead of the
ledger, at each claim (bench/claim.py: 13 ms a claim beside 50,000 leads). And inside sender_claim, each pass (a
follow-up, a first step: ledger v8) reads the oldest due row of its kind from sender_emails_due_kind, without a
sort, its time bounds checked in the index (auto_explain shows the plans of the function's own statements)."""

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
    assert reads == [("Index Scan", "sender_leads_campaign_id_lead_key")]


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
def test_each_pass_of_the_claim_reads_the_oldest_of_its_kind_from_the_kind_index_without_a_sort(
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
            ("Index Scan", "sender_emails_due_kind"), ("Index Scan", "sender_emails_pkey")]
        bounds = reads[0]["Index Cond"]
        assert "LEAST(step, 2) = " in bounds and "due_at <= " in bounds and "not_before <= " in bounds
        assert not [node for node in _nodes(plan) if node["Node Type"] in ("Sort", "Incremental Sort")]
