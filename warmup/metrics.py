"""Prometheus metrics of the warm-up guard, read from Redis at each scrape (`sendhost pool exporter` serves them
beside the pool's): which mailboxes are paused and why, so that a pause a person must act on alerts.

    sendhost_warmup_mailbox_paused{mailbox, cause}   1 for each paused mailbox
    sendhost_warmup_mailboxes_paused{cause}          how many are paused, by cause

`cause` is `oauth_refresh_refused` (the provider refused the mailbox's OAuth grant: someone runs `sendhost mailbox
authorize BOX`, then `sendhost warmup resume BOX`), `breaker` (its failure breaker tripped) or `other` (by hand,
a health gate).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from warmup.guard import Guard

log = logging.getLogger("sendhost.warmup.metrics")

PREFIX = "sendhost_warmup"
# Pause reasons by how they start: sender.oauth.keeper's refused-grant reason, the breaker's (warmup.mailboxes).
CAUSES = (("oauth: refresh refused", "oauth_refresh_refused"),)
CAUSE_NAMES = ("oauth_refresh_refused", "breaker", "other")


def pause_cause(reason: str | None) -> str:
    """The `cause` label of a pause `reason`."""
    text = reason or ""
    for prefix, cause in CAUSES:
        if text.startswith(prefix):
            return cause
    return "breaker" if "breaker" in text else "other"


class WarmupCollector(Collector):
    """Collects the paused mailboxes from the guard on every scrape; nothing when Redis does not answer (the
    pool's own metrics say so)."""

    def __init__(self, guard: Guard) -> None:
        self._guard = guard

    def collect(self) -> Iterator[Metric]:
        paused = GaugeMetricFamily(f"{PREFIX}_mailbox_paused", "1 for each mailbox the warm-up guard holds paused, "
                                   "by cause.", labels=["mailbox", "cause"])
        counts = GaugeMetricFamily(f"{PREFIX}_mailboxes_paused", "Mailboxes the warm-up guard holds paused, by "
                                   "cause (oauth_refresh_refused, breaker, other).", labels=["cause"])
        try:
            statuses = self._guard.status()
        except Exception as exc:  # a scrape must answer even when Redis does not
            log.warning("metrics: the warm-up guard did not answer: %s", str(exc).splitlines()[0] if str(exc) else exc)
            return
        by_cause: Counter[str] = Counter()
        for status in statuses:
            if status.state == "paused":
                cause = pause_cause(status.reason)
                by_cause[cause] += 1
                paused.add_metric([status.address, cause], 1)
        for cause in CAUSE_NAMES:
            counts.add_metric([cause], by_cause[cause])
        yield from (paused, counts)
