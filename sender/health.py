"""Mailbox health from feedback, into the warm-up gates: complaints as the mailbox's spam rate (0.1% holds the
ramp, 0.3% pauses: warmup.health), and a hard-bounce rate that pauses the mailbox.

Applied after an inbox pass for the mailboxes that got a new bounce or complaint, so a person who resumes a mailbox
is not overruled until new bad feedback arrives.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sender.events import Feedback
from warmup import Guard
from warmup.health import format_rate

log = logging.getLogger("sendhost.sender.health")

WINDOW = timedelta(days=7)
BOUNCE_PAUSE_AT = 0.05  # 5% hard bounces over the window: the list is bad or the mailbox looks like a spammer's
BOUNCE_MIN_SENT = 20  # below this many sends in the window one bounce says little about the mailbox


@dataclass(frozen=True)
class HealthAction:
    mailbox: str
    sent: int
    bounced: int
    complained: int
    verdict: str  # ok | hold | pause (the spam-rate gate's), or bounce-pause

    @property
    def bounce_rate(self) -> float:
        return self.bounced / self.sent if self.sent else 0.0

    @property
    def complaint_rate(self) -> float:
        return self.complained / self.sent if self.sent else float(self.complained > 0)


def apply_health(feedback: Feedback, guard: Guard, mailboxes: Iterable[str], now: datetime) -> list[HealthAction]:
    """Judge each of `mailboxes` on the last 7 days of feedback and tell the guard; mailboxes the guard does not
    know (not yet warmed up by this host) are skipped."""
    seen = {mailbox.lower(): counts for mailbox, counts in feedback.health_since(now - WINDOW).items()}
    actions = []
    for mailbox in mailboxes:
        address = mailbox.lower()
        counts = seen.get(address, {"sent": 0, "bounced": 0, "complained": 0})
        if not guard.knows(address):
            log.info("health: %s is not under the warm-up guard here; skipped", address)
            continue
        action = HealthAction(address, counts["sent"], counts["bounced"], counts["complained"], "ok")
        if action.complained:
            record = guard.record_spam_rate(action.complaint_rate, now.date(), mailbox=address)
            action = HealthAction(address, action.sent, action.bounced, action.complained, record.verdict)
            if record.verdict != "ok":
                log.warning("health: %s complaint rate %s over 7 days: %s", address,
                            format_rate(action.complaint_rate), record.verdict)
        if action.sent >= BOUNCE_MIN_SENT and action.bounce_rate >= BOUNCE_PAUSE_AT:
            guard.pause(address, f"hard-bounce rate {action.bounce_rate:.1%} over 7 days ({action.bounced} of "
                                 f"{action.sent}) is at or above {BOUNCE_PAUSE_AT:.0%}; clean the list, then resume")
            action = HealthAction(address, action.sent, action.bounced, action.complained, "bounce-pause")
            log.warning("health: %s paused: hard-bounce rate %.1f%%", address, 100 * action.bounce_rate)
        actions.append(action)
    return actions
