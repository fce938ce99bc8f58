"""Mailbox health from feedback, into the warm-up gates: complaints as the mailbox's spam rate (0.1% holds the
ramp, 0.3% pauses: warmup.health), and a hard-bounce rate that pauses the mailbox.

`judge` is the one place these numbers and the gate they make are computed: `apply_health` tells the guard after an
inbox pass, and `sender health`, `sender status` and `warmup status` show the same judgement. It is applied only for
the mailboxes that got a new bounce or complaint, so a person who resumes a mailbox is not overruled until new bad
feedback arrives.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sender.ledger.events import Feedback
from warmup import Guard
from warmup.health import RateGate, format_rate, verdict

log = logging.getLogger("sendhost.sender.health")

WINDOW = timedelta(days=7)
BOUNCE_PAUSE_AT = 0.05  # 5% hard bounces over the window: the list is bad or the mailbox looks like a spammer's
BOUNCE_MIN_SENT = 20  # below this many sends in the window one bounce says little about the mailbox


class Gate(StrEnum):
    """What the health gates make of a mailbox's window, as the status commands show it."""

    OK = "ok"
    HOLDING_RAMP = "holding-ramp"  # complaint rate at or over 0.1%: the daily cap stops rising
    PAUSED = "paused"  # complaint rate at or over 0.3%, or hard bounces at or over 5%
    UNAVAILABLE = "unavailable"  # the ledger could not be read: a check never reports fine when it could not look


_GATE_OF: dict[RateGate, Gate] = {"ok": Gate.OK, "hold": Gate.HOLDING_RAMP, "pause": Gate.PAUSED}


@dataclass(frozen=True)
class MailboxHealth:
    """A mailbox's last 7 days: sends, hard bounces and complaints, and what the gates make of them."""

    mailbox: str
    sent: int
    bounced: int
    complained: int

    @property
    def bounce_rate(self) -> float:
        return self.bounced / self.sent if self.sent else 0.0

    @property
    def complaint_rate(self) -> float:
        return self.complained / self.sent if self.sent else float(self.complained > 0)

    @property
    def bounce_pauses(self) -> bool:
        """Whether the hard-bounce rate pauses the mailbox (only over enough sends to say something)."""
        return self.sent >= BOUNCE_MIN_SENT and self.bounce_rate >= BOUNCE_PAUSE_AT

    @property
    def verdict(self) -> RateGate:
        """The spam-rate gate's verdict, or pause when the hard-bounce rate pauses."""
        return "pause" if self.bounce_pauses else verdict(self.complaint_rate)

    @property
    def gate(self) -> Gate:
        return _GATE_OF[self.verdict]

    def to_json(self) -> dict[str, object]:
        return {"mailbox": self.mailbox, "sent_7d": self.sent, "hard_bounces_7d": self.bounced,
                "hard_bounce_rate": round(self.bounce_rate, 6), "complaints_7d": self.complained,
                "complaint_rate": round(self.complaint_rate, 6), "verdict": self.verdict, "gate": str(self.gate)}


def judge(counts: Mapping[str, Mapping[str, int]], mailbox: str) -> MailboxHealth:
    """`mailbox`'s health from `Feedback.health_since` counts (keyed by lower-case address); none counted: zeros."""
    address = mailbox.lower()
    seen = counts.get(address, {})
    return MailboxHealth(address, seen.get("sent", 0), seen.get("bounced", 0), seen.get("complained", 0))


def read_health(feedback: Feedback, now: datetime) -> dict[str, Mapping[str, int]]:
    """The window's counts per lower-case mailbox, for `judge`."""
    return {mailbox.lower(): counts for mailbox, counts in feedback.health_since(now - WINDOW).items()}


@dataclass(frozen=True)
class HealthAction:
    """What `apply_health` judged of a mailbox, and told the guard."""

    health: MailboxHealth
    verdict: str  # ok | hold | pause (the spam-rate gate's record), or bounce-pause


def apply_health(feedback: Feedback, guard: Guard, mailboxes: Iterable[str], now: datetime) -> list[HealthAction]:
    """Judge each of `mailboxes` on the last 7 days of feedback and tell the guard; mailboxes the guard does not
    know (not yet warmed up by this host) are skipped."""
    seen = read_health(feedback, now)
    actions = []
    for mailbox in mailboxes:
        health = judge(seen, mailbox)
        address = health.mailbox
        if not guard.knows(address):
            log.info("health: %s is not under the warm-up guard here; skipped", address)
            continue
        told = "ok"
        if health.complained:
            record = guard.record_spam_rate(health.complaint_rate, now.date(), mailbox=address)
            told = record.verdict
            if record.verdict != "ok":
                log.warning("health: %s complaint rate %s over 7 days: %s", address,
                            format_rate(health.complaint_rate), record.verdict)
        if health.bounce_pauses:
            guard.pause(address, f"hard-bounce rate {health.bounce_rate:.1%} over 7 days ({health.bounced} of "
                                 f"{health.sent}) is at or above {BOUNCE_PAUSE_AT:.0%}; clean the list, then resume")
            told = "bounce-pause"
            log.warning("health: %s paused: hard-bounce rate %.1f%%", address, 100 * health.bounce_rate)
        actions.append(HealthAction(health, told))
    return actions
