"""What became of the campaign's sequences, for the summary: per step (from `campaign status`, the ledger's own
count) and per lead (the end reasons, and how long after its previous step each step went, from the leads' rows).

`sent` counts every step handed over to the submission server, whatever came back; `replied`, `bounced` and
`unsubscribed` are the ones among them that got that answer (`campaign status` counts each row once, by its last
status, so its own `sent` column is what is left once those are taken out).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from sender.campaigns.durations import format_duration
from sender.campaigns.spec import CampaignSpec
from sender.ledger.campaigns import CampaignStatus
from simulation.campaign import SequenceRow

# Statuses of a row whose message was handed over (`campaign status` shows complained as unsubscribed).
ANSWERED = ("replied", "bounced", "unsubscribed")
# The sequences' end reasons (sender_leads.ended), in the order the summary shows them.
END_REASONS = ("completed", "replied", "left", "colleague_replied", "bounced", "unsubscribed", "complained", "failed",
               "unconfirmed", "suppressed", "cancelled", "stopped")


@dataclass(frozen=True)
class StepLine:
    """One step of a campaign at the end of the run."""

    step: int
    delay: str  # after the previous step was sent, as the campaign file says it
    subject: str | None  # None: a reply in step 1's thread
    sent: int  # handed over, whatever came back
    replied: int
    bounced: int
    unsubscribed: int
    failed: int  # failed, unconfirmed or suppressed: ended unsent
    cancelled: int  # never sent: its lead's sequence had ended
    queued: int  # due, or due later, at the end of the run
    waiting: int  # behind its lead's previous step, or its campaign not running
    min_after_previous_s: float | None  # the shortest gap between this step's send and the previous one's
    median_after_previous_s: float | None
    clicked: int = 0  # rows a person clicked a tracked link of (docs/tracking.md)
    scanned: int = 0  # rows a scanner clicked: never counted as clicked


@dataclass(frozen=True)
class CampaignLine:
    name: str
    group: str
    leads: int
    ended: dict[str, int]  # sequences ended, by reason
    going: int  # sequences not ended at the end of the run
    steps: list[StepLine]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "group": self.group, "leads": self.leads, "ended": self.ended,
                "going": self.going, "steps": [asdict(step) for step in self.steps]}


def campaign_lines(specs: list[CampaignSpec], statuses: list[CampaignStatus],
                   rows: list[SequenceRow]) -> list[CampaignLine]:
    """One line per campaign run, its steps in order."""
    by_name = {status.name: status for status in statuses}
    gaps = _gaps(rows)
    lines = []
    for spec in specs:
        status = by_name.get(spec.name)
        if status is None:
            continue
        steps = [_step_line(step.number, format_duration(step.delay_s),
                            step.subject.text if step.subject else None, status.steps.get(step.number, {}),
                            gaps.get((spec.name, step.number), []),
                            sum(w.counts["clicked"] for w in status.worked if w.step == step.number),
                            sum(w.scanned for w in status.worked if w.step == step.number))
                 for step in spec.steps]
        ended = {reason: status.ended[reason] for reason in (*END_REASONS, *sorted(status.ended))
                 if reason in status.ended}
        lines.append(CampaignLine(spec.name, status.group, status.leads, ended,
                                  status.leads - sum(status.ended.values()), steps))
    return lines


def _step_line(number: int, delay: str, subject: str | None, columns: dict[str, int],
               gaps: list[float], clicked: int = 0, scanned: int = 0) -> StepLine:
    count = columns.get
    return StepLine(
        number, delay, subject, sent=count("sent", 0) + sum(count(name, 0) for name in ANSWERED),
        replied=count("replied", 0), bounced=count("bounced", 0), unsubscribed=count("unsubscribed", 0),
        failed=count("failed", 0) + count("unconfirmed", 0) + count("suppressed", 0),
        cancelled=count("cancelled", 0), queued=count("queued", 0), waiting=count("waiting", 0),
        min_after_previous_s=min(gaps) if gaps else None,
        median_after_previous_s=statistics.median(gaps) if gaps else None, clicked=clicked, scanned=scanned)


def _gaps(rows: list[SequenceRow]) -> dict[tuple[str, int], list[float]]:
    """(campaign, step) -> for each lead that sent it, the seconds since its previous step was sent."""
    accepted: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for row in rows:
        if row.accepted_at is not None:
            accepted[(row.campaign, row.address)][row.step] = row.accepted_at
    gaps: dict[tuple[str, int], list[float]] = defaultdict(list)
    for (campaign, _lead), steps in accepted.items():
        for step, at in steps.items():
            if step - 1 in steps:
                gaps[(campaign, step)].append(at - steps[step - 1])
    return gaps
