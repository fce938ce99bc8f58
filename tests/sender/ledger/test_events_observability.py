"""Observability of the sender, its feedback and the pools: the ledger's metrics as `sendhost sender web` serves
them, the alerting rules (sender and pool) under promtool (Debian's `prometheus` package), and a Grafana dashboard
naming only real metrics."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, date, datetime
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sender.ledger.events import Event, Feedback
from tests.conftest import REPO_ROOT
from tests.sender.web_server import WebServer, sent_row
from tests.support.net import on_ci

RULES = REPO_ROOT / "docs" / "prometheus" / "sendhost-sender.rules.yml"
POOL_RULES = REPO_ROOT / "docs" / "prometheus" / "sendhost-pool.rules.yml"
DASHBOARD = REPO_ROOT / "docs" / "grafana" / "sendhost-sender.json"
BOX = "box0@sender.example"


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if on_ci():
            pytest.fail("promtool is not installed on CI: .ci/run should install Debian's `prometheus` package")
        pytest.skip("install Debian's `prometheus` package (promtool) to check the alerting rules")
    return found


def _placement_rested(database_url: str, mailbox: str) -> None:
    from sender import Ledger
    from sender.placement import store

    with Ledger.from_url(database_url) as ledger:
        test = store.begin(ledger, wait_s=60, campaign=None, step=None)
        store.enqueue(ledger, test, token="tok", mailbox=mailbox, group="sales", seed="seed@gmail.com",
                      provider="google", subject="s", body="b")
        store.record(ledger, "tok", "spam")
        ledger.fetch_one("placement_rest", {"mailbox": mailbox, "how": "halved", "reason": "r", "tests": [test]},
                         "rest")


def _scrape(web: WebServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"{web.metrics_base}/metrics/").text
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_the_ledger_metrics_tell_what_the_ledger_holds(web: WebServer, feedback: Feedback) -> None:
    rows = [sent_row(feedback, f"L{n}", f"lead{n}@rcpt.example", mailbox=BOX)[0] for n in range(4)]
    feedback.apply(rows[0], Event.BOUNCED, source="inbox", ref="b")
    feedback.apply(rows[1], Event.COMPLAINED, source="webhook", ref="c")
    feedback.ledger.enqueue(lead="Q", step=1, address="q@rcpt.example", group="sales", subject="Hi", text="x")
    seen = _scrape(web)
    assert seen[("sendhost_sender_ledger_up", ())] == 1
    assert seen[("sendhost_sender_rows", (("status", "sent"),))] == 2
    assert seen[("sendhost_sender_rows", (("status", "bounced"),))] == 1
    assert seen[("sendhost_sender_rows", (("status", "queued"),))] == 1
    assert seen[("sendhost_sender_rows", (("status", "unconfirmed"),))] == 0
    assert seen[("sendhost_sender_events_total", (("kind", "sent"),))] == 4
    assert seen[("sendhost_sender_mailbox_sends_7d", (("mailbox", BOX),))] == 4
    assert seen[("sendhost_sender_mailbox_hard_bounces_7d", (("mailbox", BOX),))] == 1
    assert seen[("sendhost_sender_mailbox_complaints_7d", (("mailbox", BOX),))] == 1
    assert seen[("sendhost_sender_queue_oldest_due_age_seconds", ())] >= 0


def _postmaster_day(feedback: Feedback, domain: str, day: date, ratio: float | None, reputation: str | None) -> None:
    feedback.ledger.run("postmaster_record", {"domain": domain, "day": day, "spam_ratio": ratio,
                                              "reputation": reputation}, "test")


def test_the_ledger_metrics_show_each_domains_last_spam_rate_and_its_day(web: WebServer, feedback: Feedback) -> None:
    """As Postmaster Tools reported it (sender.postmaster): the last day with a ratio, never a later day without
    one (no data, never 0), and a domain with no ratio yet has no series."""
    _postmaster_day(feedback, "s.example", date(2026, 11, 28), 0.0015, "MEDIUM")
    _postmaster_day(feedback, "s.example", date(2026, 11, 29), None, None)  # too little mail that day
    _postmaster_day(feedback, "quiet.example", date(2026, 11, 29), None, "HIGH")
    seen = _scrape(web)
    assert seen[("sendhost_sender_postmaster_spam_ratio", (("domain", "s.example"),))] == 0.0015
    assert seen[("sendhost_sender_postmaster_spam_ratio_day_timestamp_seconds", (("domain", "s.example"),))] == \
        datetime(2026, 11, 28, tzinfo=UTC).timestamp()
    assert seen[("sendhost_sender_postmaster_reputation", (("domain", "s.example"), ("reputation", "MEDIUM")))] == 1
    assert not [key for key in seen if ("domain", "quiet.example") in key[1]]


def _followups_due(feedback: Feedback, *leads: tuple[str, str]) -> None:
    """Each (lead, mailbox)'s step 1 sent from the mailbox, then its step 2 queued behind it: due now, and only from
    that mailbox (every step 1 first: sent_row claims whatever is due)."""
    for lead, mailbox in leads:
        sent_row(feedback, lead, f"{lead.lower()}@rcpt.example", mailbox=mailbox)
    for lead, _mailbox in leads:
        assert feedback.ledger.enqueue(lead=lead, step=2, address=f"{lead.lower()}@rcpt.example", group="sales",
                                       subject="Again", text="x") == "queued"


def test_the_ledger_metrics_count_the_follow_ups_due_per_mailbox_they_wait_for(web: WebServer,
                                                                              feedback: Feedback) -> None:
    """What the SendhostFollowupsStalled rule joins with the paused mailboxes (issue 39): a follow-up goes only from
    the mailbox that sent its lead's step before."""
    sent_row(feedback, "N0", "n0@rcpt.example", mailbox=BOX)  # no step 2: nothing waits
    _followups_due(feedback, ("L0", BOX), ("L1", BOX), ("M0", "other@sender.example"))
    seen = _scrape(web)
    assert seen[("sendhost_sender_followups_due", (("mailbox", BOX),))] == 2
    assert seen[("sendhost_sender_followups_due", (("mailbox", "other@sender.example"),))] == 1
    assert 0 <= seen[("sendhost_sender_followups_oldest_due_age_seconds", (("mailbox", BOX),))] < 300


@pytest.mark.service
@pytest.mark.parametrize("rules", [RULES, POOL_RULES], ids=lambda path: path.stem)
def test_the_alerting_rules_pass_promtool_and_fire_on_their_series(rules: Path) -> None:
    promtool = _promtool()
    checked = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    unit_tests = rules.with_name(rules.name.replace(".rules.yml", ".rules.test.yml"))
    tested = subprocess.run([promtool, "test", "rules", str(unit_tests)], capture_output=True, text=True,
                            timeout=120)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bsendhost_[a-z0-9_]+", expr))


def test_the_rules_and_the_dashboard_name_only_metrics_that_exist(web: WebServer, feedback: Feedback,
                                                                   database_url: str) -> None:
    _followups_due(feedback, ("L1", BOX))  # a follow-up waiting, so its metrics have a sample
    _postmaster_day(feedback, "s.example", date(2026, 11, 28), 0.0015, "MEDIUM")  # and a domain's spam rate
    _placement_rested(database_url, BOX)  # and a placement test's result and rest, so theirs have one
    served = {name for name, _labels in _scrape(web)}
    # the pool's metrics come from `sendhost pool exporter` (ippool.metrics): counters get _total
    pool_source = (REPO_ROOT / "ippool" / "metrics.py").read_text()
    pool = {f"sendhost_pool{m}_total" for m in re.findall(r'CounterMetricFamily\(f"\{PREFIX\}(_[a-z_]+)"',
                                                             pool_source)}
    pool |= {f"sendhost_pool{m}" for m in re.findall(r'GaugeMetricFamily\(f"\{PREFIX\}(_[a-z_]+)"', pool_source)}
    # the warm-up guard's come from the same exporter (warmup.metrics): gauges
    warmup_source = (REPO_ROOT / "warmup" / "metrics.py").read_text()
    warmup = {f"sendhost_warmup{m}" for m in re.findall(r'GaugeMetricFamily\(f"\{PREFIX\}(_[a-z_]+)"',
                                                          warmup_source)}
    assert warmup
    known = served | pool | warmup
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    for rules in (RULES, POOL_RULES):
        exprs += re.findall(r"expr: [|>-]*\s*\n?((?:.+\n)+?)\s*(?:for|labels):", rules.read_text())
    used = set().union(*(_metric_names(e) for e in exprs))
    assert used and used <= known, used - known
