"""The numbers a person reads after a run, all computed from the event log (never from a component's own count).

`summarize(result)` -> `Summary`; `Summary.to_json()` is the `--format json` document (schema 1).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from dns_audit.findings import Finding
from simulation.bounds import Bound, run_bound
from simulation.engine import SimResult
from simulation.fleet import FleetSection, fleet_section
from simulation.mail import Deliveries
from simulation.promises import Promise, check_promises
from simulation.sequence_summary import CampaignLine, campaign_lines

EIP_HOURLY_USD = 0.005  # every public IPv4 address, parked or in service
REACTION_WORDS = {"bounce": "bounced", "reply": "replied", "unsubscribe": "unsubscribed", "away": "away",
                  "stop": "asked to be removed"}

# What each outcome the summary counts means, for a reader who has not read the code. Every code the run can
# count has a line here (a test holds the summary to it); an unknown code is shown as such, never silently.
MEANINGS: dict[str, str] = {
    # Why a send used the host's primary IP (ippool.lease)
    "no_slot": "fallback: every slot of the host was retiring, waiting to rotate, rotating or empty",
    "unknown_host": "fallback: the host was not registered in Redis",
    "redis_error": "fallback: Redis did not answer the lease",
    # Why a sender's attempt reserved nothing (warmup guard)
    "skipped-cooldown": "the mailbox's gap since its last send had not passed (or it was cooling down); a "
                        "follow-up waits for its own mailbox's gap, the row back in the ledger until then",
    "skipped-daily-limit": "the mailbox had reached its cap for its local day",
    "skipped-paused": "the mailbox was paused",
    "skipped-not-started": "the mailbox's first sending day had not come",
    "skipped-unavailable": "Redis did not answer the guard, so nothing was sent (fail closed)",
    "skipped-campaign-cap": "the row's campaign had reached its daily cap for the campaign's own day; the row "
                            "waits for the campaign's next day",
    # A row the agent took that ended without a send (sender.sending.agent's report)
    "row-cancelled": "the lead's sequence had ended (a reply, a bounce, an unsubscribe) before its step went",
    "row-suppressed": "the recipient was suppressed (an earlier bounce or unsubscribe) before the step went",
    "row-failed": "the step could not be sent (its text could not be composed, or the server refused it)",
    "row-lost": "the row was no longer the agent's to send when its attempt would have started",
    "row-rerouted": "the mailbox could not log in; the row went back to the queue for another mailbox",
    "row-retry": "the submission server answered a temporary failure; the row is tried again later",
    "row-unconfirmed": "nobody knows whether the server took the message; it waits for a person, never resent",
    # How one rotation attempt of a slot ended (ippool.rotator)
    "rotated": "rotation: the retired address was replaced by a fresh one",
    "lost_claim": "rotation: another rotator claimed the slot first; nothing was done twice",
    "no_fresh_address": "rotation: every address AWS handed out was refused (see the redraw reasons), so the "
                        "slot stayed out of service and was tried again on the next cycle",
    "failed": "rotation: AWS refused a step; the slot was given back and the new address parked",
    # Why a drawn address was refused (ippool.rotator)
    "denylist": "redraw: AWS handed back an address released within the last 7 days",
    "parked": "redraw: AWS handed back an address that is still parked",
    "dnsbl": "redraw: the address is listed on a DNS blocklist",
}


def explain(code: str) -> str:
    """What an outcome code means, in one line."""
    return MEANINGS.get(code, "no explanation recorded for this outcome (please report it)")


@dataclass(frozen=True)
class MailboxLine:
    """One mailbox over the run: its sends against the sum of its daily caps, and its busiest local day."""

    address: str
    start: str
    sends: int
    capacity: int  # sum of the caps of the local days the run touched (the first and last may be partial)
    busiest_day: str | None
    busiest_sends: int
    busiest_cap: int
    days_at_cap: int
    days_over_cap: int
    week_one_max: int | None  # most sends on one of its first 7 days within the run (None: none in the run)


@dataclass(frozen=True)
class Summary:
    start: str
    end: str
    days: int
    sends_per_day: int
    seed: int
    sends: int
    fallbacks: dict[str, int]
    skips: dict[str, int]
    rotations: int
    retired_by_command: int
    redraws: int
    fresh_share: float | None  # rotations that put a never-seen address in service
    aws_handed_back: int  # allocations AWS answered with a recently released address
    max_sends_on_address: int
    min_sends_at_retirement: int | None  # over rotations not ordered by on-call
    budget_range: tuple[int, int]
    parked_eip_hours: float
    parked_cost_usd: float
    max_parked: int
    mailboxes: list[MailboxLine]
    findings: dict[str, int]
    domains: list[dict[str, Any]] = field(default_factory=list)
    worker_errors: list[str] = field(default_factory=list)
    rotation_outcomes: dict[str, int] = field(default_factory=dict)
    redraw_reasons: dict[str, int] = field(default_factory=dict)
    deliveries: Deliveries | None = None  # what the submission server accepted, per mailbox and source address
    campaigns: list[CampaignLine] = field(default_factory=list)  # per step, and the sequences' end reasons
    leads_turned_away: int = 0  # leads not imported: the senders were behind
    reactions: dict[str, int] = field(default_factory=dict)  # the recipients' bounces, replies, unsubscribes
    # how the sequences of the leads who sent an out-of-office went: by end reason, and `going` (still going)
    away: dict[str, int] = field(default_factory=dict)
    fleet: FleetSection | None = None  # sends per host and the connections used (`simulate --hosts/--mailboxes`)
    bound: Bound | None = None  # what bound the run (simulation.bounds)
    promises: list[Promise] = field(default_factory=list)  # whether the README's promises held (simulation.promises)

    def reactions_text(self) -> str:
        """The recipients' answers in words: `4 away, 3 bounced, 12 replied, 1 asked to be removed, 2 unsubscribed`."""
        return ", ".join(f"{count} {REACTION_WORDS.get(kind, kind)}" for kind, count in self.reactions.items()) \
            or "none"

    def away_text(self) -> str:
        """How the out-of-office leads' sequences went: `12 held to their return, then 5 completed, 1 replied, 6
        going`."""
        if not self.away:
            return "none"
        went = ", ".join(f"{count} {reason}" for reason, count in self.away.items())
        return f"{sum(self.away.values())} held to their return, then {went}"

    def outcomes(self) -> list[tuple[str, int, str]]:
        """Every outcome the run counted: (code, count, meaning), fallbacks, skips, rotations, redraws."""
        counted = [*self.fallbacks.items(), *self.skips.items(), *self.rotation_outcomes.items(),
                   *self.redraw_reasons.items()]
        return [(code, count, explain(code)) for code, count in counted]

    def to_json(self) -> dict[str, Any]:
        document = self._to_json()
        if self.fleet is not None:  # only in a fleet run: the default run's document stays as it was
            document["fleet"] = self.fleet.to_json()
        return document

    def _to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "run": {"start": self.start, "end": self.end, "days": self.days, "sends_per_day": self.sends_per_day,
                    "seed": self.seed},
            "sends": {"total": self.sends, "fallbacks": sum(self.fallbacks.values()),
                      "fallbacks_by_reason": self.fallbacks, "skipped_attempts": self.skips},
            "pool": {"rotations": self.rotations, "retired_by_command": self.retired_by_command,
                     "redraws": self.redraws, "fresh_ip_share": self.fresh_share,
                     "aws_handed_back": self.aws_handed_back, "max_sends_on_address": self.max_sends_on_address,
                     "min_sends_at_retirement": self.min_sends_at_retirement,
                     "budget_range": list(self.budget_range), "rotation_outcomes": self.rotation_outcomes,
                     "redraw_reasons": self.redraw_reasons, "worker_errors": self.worker_errors},
            "parking": {"eip_hours": round(self.parked_eip_hours, 2), "cost_usd": round(self.parked_cost_usd, 2),
                        "hourly_usd_per_eip": EIP_HOURLY_USD, "max_parked_at_once": self.max_parked},
            "mailboxes": [vars(line) for line in self.mailboxes],
            "audit": {"findings": self.findings, "domains": self.domains},
            "deliveries": self.deliveries.to_json() if self.deliveries is not None else None,
            "campaigns": [line.to_json() for line in self.campaigns],
            "leads": {"turned_away": self.leads_turned_away, "reactions": self.reactions, "away": self.away},
            "bound": self.bound.to_json() if self.bound is not None else None,
            "promises": [promise.to_json() for promise in self.promises],
            "meanings": {code: meaning for code, _count, meaning in self.outcomes()},
        }


def sends_per_address(result: SimResult) -> Counter[tuple[str, int, int]]:
    """Sends per address tenure: (host, slot, generation), fallbacks excluded."""
    return Counter((s.host, s.slot, s.generation) for s in result.log.sends
                   if s.slot is not None and s.generation is not None)


def sends_per_mailbox_day(result: SimResult) -> Counter[tuple[str, str]]:
    """Sends per (mailbox, its local day)."""
    return Counter((s.mailbox, s.local_day) for s in result.log.sends)


def sends_per_mailbox_hour(result: SimResult) -> Counter[tuple[str, int]]:
    """Sends per (mailbox, hour of the day on the recipient's clock), over the whole run: the lead's time zone, where
    its sending window is read (the mailbox's own when the lead's is not known)."""
    zones = {m.address.lower(): m.timezone for m in result.inventory.mailboxes}
    return Counter((s.mailbox, datetime.fromtimestamp(s.at, tz=ZoneInfo(
        result.lead_timezones.get(s.address or "") or zones.get(s.mailbox, "UTC"))).hour)
        for s in result.log.sends)


def parked_hours(result: SimResult) -> float:
    """EIP-hours spent parked: from each parking to its release (or the end of the run)."""
    released = {r.allocation_id: r.at for r in result.log.released}
    return sum(released.get(p.allocation_id, result.end_s) - p.at for p in result.log.parked) / 3600


def summarize(result: SimResult) -> Summary:
    """Everything the summary shows, from the event log."""
    log = result.log
    per_address = sends_per_address(result)
    retired = [r for r in log.retirements if not r.by_command]
    rotation_placements = [p for p in log.placements if p.by == "rotation"]
    eip_hours = parked_hours(result)
    mailboxes = _mailboxes(result)
    hosts = result.inventory.hosts
    campaigns = campaign_lines(result.specs, result.campaigns, result.sequences)
    imported = sum(line.leads for line in campaigns)
    queued = sum(step.queued for line in campaigns for step in line.steps)
    return Summary(
        start=_iso(result.start_s), end=_iso(result.end_s), days=result.config.days,
        sends_per_day=result.config.sends_per_day, seed=result.config.seed, sends=len(log.sends),
        fallbacks=dict(Counter(s.fallback_reason or "unknown" for s in log.sends if s.public_ip is None)),
        skips=dict(sorted(Counter(skip.status for skip in log.skips).items())),
        rotations=len(log.retirements), retired_by_command=len(log.retirements) - len(retired),
        redraws=sum(1 for p in log.parked if p.reason == "redraw"),
        fresh_share=(sum(p.fresh for p in rotation_placements) / len(rotation_placements)
                     if rotation_placements else None),
        aws_handed_back=result.aws_handed_back,
        max_sends_on_address=max(per_address.values(), default=0),
        min_sends_at_retirement=min((per_address[(r.host, r.slot, r.generation)] for r in retired), default=None),
        budget_range=(min(h.pool.budget[0] for h in hosts), max(h.pool.budget[1] for h in hosts)),
        parked_eip_hours=eip_hours, parked_cost_usd=eip_hours * EIP_HOURLY_USD,
        max_parked=max((s.parked for s in log.samples), default=0),
        mailboxes=mailboxes,
        findings=_findings(result),
        domains=[{"domain": report.domain, "findings": [_finding(f) for f in report.findings]}
                 for report in result.audit],
        worker_errors=list(result.worker_errors),
        rotation_outcomes=dict(sorted(result.rotation_outcomes.items())),
        redraw_reasons=dict(sorted(result.redraw_reasons.items())),
        deliveries=result.deliveries,
        campaigns=campaigns,
        leads_turned_away=result.leads_turned_away,
        reactions=dict(sorted(Counter(r.kind for r in log.reactions if r.event is not None).items())),
        away=_away(result),
        fleet=(fleet_section(result.inventory, [s.host for s in log.sends],
                             len(hosts) * result.config.workers_per_host, result.connections)
               if result.connections is not None else None),
        bound=run_bound(result, imported, queued),
        promises=check_promises(result),
    )


def _away(result: SimResult) -> dict[str, int]:
    """How the sequences of the leads whose out-of-office held them ended (`going`: not ended), from the ledger."""
    held = {r.address for r in result.log.reactions if r.held_until is not None}
    ends = Counter(row.ended or "going" for row in result.sequences if row.step == 1 and row.address in held)
    return dict(sorted(ends.items(), key=lambda item: (item[0] == "going", item[0])))


def _mailboxes(result: SimResult) -> list[MailboxLine]:
    counts = sends_per_mailbox_day(result)
    lines = []
    for mailbox in result.inventory.mailboxes:
        address = mailbox.address.lower()
        caps = result.caps.get(address, {})
        covered = [day for day in caps if covered_day(result, day, mailbox.timezone)]
        sent = {day: counts.get((address, day), 0) for day in caps}
        busiest = max(covered, key=lambda day: (sent[day], day), default=None)
        week_one = [sent[day] for day in covered if (_date(day) - mailbox.start).days < 7]
        lines.append(MailboxLine(
            address=address, start=mailbox.start.isoformat(), sends=sum(sent.values()),
            capacity=sum(caps[day] for day in covered), busiest_day=busiest,
            busiest_sends=sent[busiest] if busiest else 0, busiest_cap=caps[busiest] if busiest else 0,
            days_at_cap=sum(1 for day in covered if sent[day] >= caps[day]),
            days_over_cap=sum(1 for day in caps if sent[day] > caps[day]),
            week_one_max=max(week_one) if week_one else None))
    return lines


def covered_day(result: SimResult, day: str, timezone: str) -> bool:
    """Whether the run covered some of this local day of the mailbox (the first and last may be partial)."""
    zone = ZoneInfo(timezone)
    first = datetime.fromtimestamp(result.start_s, tz=zone).date().isoformat()
    last = datetime.fromtimestamp(result.end_s - 1, tz=zone).date().isoformat()
    return first <= day <= last


def _finding(found: Finding) -> dict[str, Any]:
    where = f"{Path(found.location.file).name}:{found.location.line}" if found.location else None
    return {"code": found.code, "severity": found.severity, "message": found.message, "location": where}


def _findings(result: SimResult) -> dict[str, int]:
    counts = {"error": 0, "warning": 0, "info": 0}
    for report in result.audit:
        for finding in report.findings:
            counts[finding.severity] += 1
    return counts


def _date(day: str) -> date:
    return date.fromisoformat(day)


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%dT%H:%MZ")
