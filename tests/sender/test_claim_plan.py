"""The claim query reads the claimed row's lead by its key, whatever the size of the ledger: planned for a
set-returning function's default 1,000 rows, sender_claim's one row was joined by hashing every lead of the
ledger, at each claim (bench/claim.py: 13 ms a claim beside 50,000 leads)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sender import Ledger
from sender.ledger.queries import query


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
def test_the_claim_reads_its_lead_by_key_not_every_lead_of_the_ledger(ledger: Ledger, plan_cache_mode: str) -> None:
    conn = ledger._conn
    conn.execute("SELECT sender_enqueue('L' || n, 1, 'lead' || n || '@rcpt.example', 'sales', 's', 't', NULL, NULL) "
                 "FROM generate_series(1, 5000) AS n")
    conn.execute("ANALYZE")
    conn.execute(f"SET plan_cache_mode = {plan_cache_mode}")
    params = {"worker": "w", "limit": 1, "groups": ["sales"], "mailboxes": None, "now": None}
    ((plan,),) = conn.execute("EXPLAIN (FORMAT JSON) " + query("claim"), params).fetchone()
    reads = [(node["Node Type"], node.get("Index Name")) for node in _nodes(plan["Plan"])
             if node.get("Relation Name") == "sender_leads"]
    assert reads == [("Index Scan", "sender_leads_campaign_id_lead_key")]
