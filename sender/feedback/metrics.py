"""The send ledger's Prometheus metrics, read from PostgreSQL (the ledger is the record: any process serving them
tells the same numbers). `sendhost sender web` serves them on /metrics/ of its metrics listener, from a snapshot at
most CACHE_S seconds old: scrapes more often than that (several Prometheus servers, a dashboard's refresh) cost
the ledger nothing.

    sendhost_sender_rows{status}                          rows per status (unconfirmed ones wait for a person)
    sendhost_sender_queue_oldest_due_age_seconds          how late the oldest due row is (0: nothing overdue)
    sendhost_sender_events_total{kind}                    the rows' history by kind: sends by outcome, feedback
    sendhost_sender_mailbox_sends_7d{mailbox}             accepted sends over the last 7 days
    sendhost_sender_mailbox_hard_bounces_7d{mailbox}      hard bounces over the last 7 days
    sendhost_sender_mailbox_complaints_7d{mailbox}        spam complaints over the last 7 days
    sendhost_sender_followups_due{mailbox}                due follow-ups that may go only from this mailbox (the
                                                          one that sent the lead's step before)
    sendhost_sender_followups_oldest_due_age_seconds{mailbox}   since when the oldest of them is due
    sendhost_sender_postmaster_spam_ratio{domain}         the user-reported spam ratio of the domain's last day
                                                          with one, as Google Postmaster Tools reports it (a
                                                          fraction: 0.001 is 0.1%); no series before one was read
    sendhost_sender_postmaster_spam_ratio_day_timestamp_seconds{domain}   that day (its UTC midnight)
    sendhost_sender_postmaster_reputation{domain, reputation}   1 for that day's domain reputation (HIGH, MEDIUM,
                                                          LOW, BAD)
    sendhost_sender_step_rows{campaign,step,mailbox,outcome}    what worked (docs/tracking.md): rows sent, and of
                                                          those delivered, replied, bounced, unsubscribed, clicked
                                                          and opened (by a person; opens an estimate)
    sendhost_sender_placement_inbox_share{mailbox,provider}     the share of placement messages found in the seeds'
                                                          inboxes over the mailbox's last 3 tests per provider
    sendhost_sender_placement_rested{mailbox}             1 while placement tests keep the mailbox rested

A mailbox's follow-ups stall while the warm-up guard holds it paused or disconnected: the alerting rule
SendhostFollowupsStalled joins the first with `sendhost pool exporter`'s sendhost_warmup_mailbox_paused.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from datetime import time as time_of_day

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from psycopg_pool import ConnectionPool

from sender.feedback.health import WINDOW
from sender.ledger.campaigns import WORKED_COLUMNS, Campaigns
from sender.ledger.events import Feedback
from sender.ledger.stalled import pinned_due
from sender.ledger.store import Ledger
from sender.placement.rest import open_rests, shares
from sender.postmaster.sync import latest
from sendhost.model import DEFAULT_PLACEMENT_TESTS

log = logging.getLogger("sendhost.sender.metrics")

PREFIX = "sendhost_sender"
CACHE_S = 15.0  # Prometheus's default scrape interval: one ledger read per interval, however many scrapers


class LedgerCollector(Collector):
    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool

    def collect(self) -> Iterator[Metric]:
        rows = GaugeMetricFamily(f"{PREFIX}_rows", "Rows of the send ledger by status.", labels=["status"])
        oldest = GaugeMetricFamily(f"{PREFIX}_queue_oldest_due_age_seconds",
                                   "Seconds since the oldest due queued or retry row became due.")
        events = CounterMetricFamily(f"{PREFIX}_events", "Entries of the rows' history by kind (sent, retry, "
                                     "failed, unconfirmed, bounced, complained, ...).", labels=["kind"])
        sends = GaugeMetricFamily(f"{PREFIX}_mailbox_sends_7d", "Accepted sends over the last 7 days.",
                                  labels=["mailbox"])
        bounces = GaugeMetricFamily(f"{PREFIX}_mailbox_hard_bounces_7d", "Hard bounces over the last 7 days.",
                                    labels=["mailbox"])
        complaints = GaugeMetricFamily(f"{PREFIX}_mailbox_complaints_7d", "Spam complaints over the last 7 days.",
                                       labels=["mailbox"])
        followups = GaugeMetricFamily(f"{PREFIX}_followups_due", "Due follow-ups that may go only from this "
                                      "mailbox (it sent the lead's step before).", labels=["mailbox"])
        followups_age = GaugeMetricFamily(f"{PREFIX}_followups_oldest_due_age_seconds", "Seconds since the oldest "
                                          "due follow-up pinned to this mailbox became due.", labels=["mailbox"])
        spam_ratio = GaugeMetricFamily(f"{PREFIX}_postmaster_spam_ratio", "User-reported spam ratio of the "
                                       "domain's last day with one, as Google Postmaster Tools reports it.",
                                       labels=["domain"])
        spam_day = GaugeMetricFamily(f"{PREFIX}_postmaster_spam_ratio_day_timestamp_seconds", "The day of "
                                     "sendhost_sender_postmaster_spam_ratio (its UTC midnight).", labels=["domain"])
        reputation = GaugeMetricFamily(f"{PREFIX}_postmaster_reputation", "1 for the domain reputation Postmaster "
                                       "Tools reported on that day.", labels=["domain", "reputation"])
        worked = GaugeMetricFamily(f"{PREFIX}_step_rows", "Rows of a campaign's step sent from a mailbox (outcome "
                                   "sent), and of those delivered, replied, bounced, unsubscribed, clicked and opened "
                                   "by a person (opened: an estimate).", labels=["campaign", "step", "mailbox",
                                                                                  "outcome"])
        placement = GaugeMetricFamily(f"{PREFIX}_placement_inbox_share", "Share of placement messages found in "
                                      "the seeds' inboxes over the mailbox's last tests per provider.",
                                      labels=["mailbox", "provider"])
        rested = GaugeMetricFamily(f"{PREFIX}_placement_rested", "1 while placement tests keep the mailbox rested "
                                   "(its warm-up ramp halved, or paused).", labels=["mailbox"])
        up = GaugeMetricFamily(f"{PREFIX}_ledger_up", "1 when the ledger answered this scrape.")
        try:
            with self._pool.connection(timeout=5) as conn:
                ledger = Ledger(conn)
                feedback = Feedback(ledger)
                for status, count in sorted(ledger.counts().items()):
                    rows.add_metric([status], count)
                found = ledger.fetch_one("oldest_due_age", {}, "metrics")
                oldest.add_metric([], max(float(found[0]) if found else 0.0, 0.0))
                for kind, count in ledger.fetch_all("event_counts", {}, "metrics"):
                    events.add_metric([str(kind)], int(count))
                now = ledger.now() or datetime.now(UTC)
                pinned: dict[str, tuple[int, datetime]] = {}
                for _campaign, mailbox, count, since in pinned_due(ledger):
                    waiting, oldest_since = pinned.get(mailbox, (0, since))
                    pinned[mailbox] = (waiting + count, min(oldest_since, since))
                for mailbox, (count, since) in sorted(pinned.items()):
                    followups.add_metric([mailbox], count)
                    followups_age.add_metric([mailbox], max((now - since).total_seconds(), 0.0))
                for mailbox, seen in sorted(feedback.health_since(datetime.now(UTC) - WINDOW).items()):
                    sends.add_metric([mailbox], seen["sent"])
                    bounces.add_metric([mailbox], seen["bounced"])
                    complaints.add_metric([mailbox], seen["complained"])
                for last in latest(ledger):
                    if last.day is None or last.spam_ratio is None:
                        continue  # no day with a ratio yet: no data, never a 0
                    spam_ratio.add_metric([last.domain], last.spam_ratio)
                    spam_day.add_metric([last.domain], datetime.combine(last.day, time_of_day.min, UTC).timestamp())
                    if last.reputation:
                        reputation.add_metric([last.domain, last.reputation], 1)
                for line in Campaigns(ledger).worked():
                    labels = [line.campaign, str(line.step), line.mailbox]
                    worked.add_metric([*labels, "sent"], line.sent)
                    for column in WORKED_COLUMNS:
                        worked.add_metric([*labels, column], line.counts[column])
                for share in shares(ledger, DEFAULT_PLACEMENT_TESTS):
                    placement.add_metric([share.mailbox, share.provider], share.share)
                for mailbox in sorted(open_rests(ledger)):
                    rested.add_metric([mailbox], 1)
        except Exception as exc:  # a scrape must answer even when the ledger does not
            log.warning("metrics: the ledger did not answer: %s", str(exc).splitlines()[0] if str(exc) else exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield from (up, rows, oldest, events, sends, bounces, complaints, followups, followups_age, spam_ratio,
                    spam_day, reputation, worked, placement, rested)


class CachedCollector(Collector):
    """Another collector's metrics, collected at most once every `max_age_s` seconds; concurrent scrapes wait for
    the one read in flight rather than each starting their own."""

    def __init__(self, inner: Collector, max_age_s: float = CACHE_S) -> None:
        self._inner, self._max_age_s = inner, max_age_s
        self._lock = threading.Lock()
        self._at: float | None = None
        self._snapshot: list[Metric] = []

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            now = time.monotonic()
            if self._at is None or now - self._at >= self._max_age_s:
                self._snapshot = list(self._inner.collect())
                self._at = now
            snapshot = self._snapshot
        yield from snapshot
