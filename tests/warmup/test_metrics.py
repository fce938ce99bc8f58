"""The warm-up guard's metrics, served by `sendhost pool exporter` from a real Redis: each paused mailbox with its
cause, and how many are paused by cause, so a refused OAuth grant (a person's job) can alert."""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import date

import redis

from sender.oauth.keeper import refused_reason
from tests.conftest import REPO_ROOT
from tests.ippool.test_metrics import scrape
from tests.support.net import free_port
from warmup import Guard
from warmup.metrics import pause_cause


def test_pause_reasons_are_told_apart_by_cause() -> None:
    assert pause_cause(refused_reason("invalid_grant", "a@ex.com")) == "oauth_refresh_refused"
    assert pause_cause("paused by hand") == "other"
    assert pause_cause(None) == "other"


def test_the_exporter_counts_mailboxes_paused_for_a_refused_grant(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    guard = Guard(client)
    for address in ("a@ex.com", "b@ex.com", "c@ex.com", "d@ex.com"):
        guard.add_mailbox(address, start=date(2026, 11, 1))
    guard.pause("a@ex.com", refused_reason("invalid_grant", "a@ex.com"))
    guard.pause("b@ex.com", refused_reason("invalid_client", "b@ex.com"))
    guard.pause("c@ex.com")  # by hand
    client.close()

    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "REDIS_URL": redis_url}
    process = subprocess.Popen([sys.executable, "-m", "toolkit", "pool", "exporter", "--listen", f"127.0.0.1:{port}"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        metrics = scrape(f"http://127.0.0.1:{port}/metrics")
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)
    paused = {dict(labels)["mailbox"]: dict(labels)["cause"] for (name, labels), value in metrics.items()
              if name == "sendhost_warmup_mailbox_paused" and value == 1}
    assert paused == {"a@ex.com": "oauth_refresh_refused", "b@ex.com": "oauth_refresh_refused", "c@ex.com": "other"}
    counts = {dict(labels)["cause"]: value for (name, labels), value in metrics.items()
              if name == "sendhost_warmup_mailboxes_paused"}
    assert counts == {"oauth_refresh_refused": 2, "breaker": 0, "other": 1}
