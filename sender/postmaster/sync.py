"""`sendhost postmaster sync` and the agent's daily pass: each sending domain's days read from Postmaster Tools,
kept in the ledger (sender_postmaster_days, version 18), and told to the warm-up gates as `warmup record --domain`
would be (warmup.health: 0.1% holds the ramp, 0.3% pauses the domain's mailboxes and steps back).

The gates hear of a day once: when its ratio is new, or Google revised it (the ledger's `applied_ratio` says what
they were told), so a person who resumed a mailbox is not overruled by the same figure read again, and a figure the
guard could not be told of (Redis down), or that Redis lost, is told at the next sync. A day with no ratio is stored
as no data (NULL, never 0) and told to no one: it changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from sender.ledger.store import Ledger
from sender.postmaster.api import POSTMASTER_UI, DayStats, PostmasterApi
from warmup import Guard
from warmup.errors import WarmupConfigError, WarmupUnavailable
from warmup.health import format_rate

log = logging.getLogger("sendhost.sender.postmaster")

KEPT_DAYS = 120  # how far back the gates are told of a day again when Redis lost it (Postmaster Tools keeps 120)


@dataclass(frozen=True)
class Told:
    """A day's ratio as the warm-up gates took it."""

    day: date
    ratio: float
    verdict: str  # ok | hold | pause
    paused: tuple[str, ...]

    def words(self, domain: str) -> str:
        """What it did, naming the domain, the day and the figure."""
        figure = f"{domain} on {self.day}: spam rate {format_rate(self.ratio)} (Postmaster Tools)"
        if self.verdict == "pause":
            return f"{figure} is at or above 0.3%: paused {', '.join(self.paused) or 'no mailbox'}; the ramp steps back"
        if self.verdict == "hold":
            return f"{figure} is at or above 0.1%: the ramp holds"
        return f"{figure}: ok"


@dataclass(frozen=True)
class DomainSync:
    """One domain's sync: the days Google reported in the window, what the gates were told, and any problem."""

    domain: str
    days: tuple[DayStats, ...] = ()
    told: tuple[Told, ...] = ()
    problem: str | None = None  # the domain could not be read, or the gates not told
    first: date | None = None
    end: date | None = None

    @property
    def missing(self) -> list[date]:
        """The window's days without a ratio: no data (too little mail, or not computed yet), never 0."""
        if self.first is None or self.end is None:
            return []
        with_ratio = {d.day for d in self.days if d.spam_ratio is not None}
        window = (self.first + timedelta(days=n) for n in range((self.end - self.first).days))
        return [day for day in window if day not in with_ratio]

    def to_json(self) -> dict[str, Any]:
        return {"domain": self.domain, "from": self.first.isoformat() if self.first else None,
                "until": self.end.isoformat() if self.end else None,
                "days": [{"date": d.day.isoformat(), "spam_ratio": d.spam_ratio, "reputation": d.reputation}
                         for d in self.days],
                "no_data": [d.isoformat() for d in self.missing],
                "told": [{"date": t.day.isoformat(), "spam_ratio": t.ratio, "verdict": t.verdict,
                          "paused": list(t.paused)} for t in self.told],
                "problem": self.problem}


@dataclass
class SyncResult:
    domains: list[DomainSync] = field(default_factory=list)

    @property
    def problems(self) -> list[DomainSync]:
        return [d for d in self.domains if d.problem]


def sync(api: PostmasterApi, ledger: Ledger, guard: Guard | None, domains: Iterable[str], today: date,
         days: int) -> SyncResult:
    """Read `domains`' last `days` days (up to yesterday, `today` excluded: Google has nothing for it yet), store
    them, tell the gates (`guard`; None: store only). Refusals (PostmasterRefused) and a Postmaster Tools that
    cannot be read (PostmasterUnavailable) propagate; a domain the account does not see is a problem of its own."""
    first, end = today - timedelta(days=days), today
    registered = set(api.domains())
    result = SyncResult()
    for domain in dict.fromkeys(d.lower() for d in domains):
        if domain not in registered:
            result.domains.append(DomainSync(domain, problem=f"{domain} is not in Postmaster Tools for "
                                             f"{api.account}: add and verify it at {POSTMASTER_UI}"))
            continue
        stats = api.traffic_stats(domain, first, end)
        for day in stats:
            ledger.run("postmaster_record", {"domain": domain, "day": day.day, "spam_ratio": day.spam_ratio,
                                             "reputation": day.reputation}, "postmaster sync")
        told, problem = tell_gates(ledger, guard, domain, today - timedelta(days=KEPT_DAYS)) \
            if guard is not None else ([], None)
        result.domains.append(DomainSync(domain, tuple(stats), tuple(told), problem, first, end))
    return result


def tell_gates(ledger: Ledger, guard: Guard, domain: str, since: date) -> tuple[list[Told], str | None]:
    """Tell the warm-up gates of each of `domain`'s days since `since` they have not heard of, oldest first: a ratio
    new or revised since they were told, or one the guard no longer holds (Redis lost it: the gates are rebuilt
    from the ledger, as the send counters are)."""
    told: list[Told] = []
    try:
        held = guard.spam_rates(domain)
    except WarmupUnavailable as exc:
        return told, f"not told to the warm-up gates yet (the next sync tells them): {exc}"
    rows = ledger.fetch_all("postmaster_ratios", {"domain": domain, "since": since}, "postmaster sync")
    for day, ratio, was_told in rows:
        if was_told and day in held:
            continue
        try:
            record = guard.record_spam_rate(float(ratio), day, domain=domain)
        except WarmupConfigError as exc:  # no mailbox of the domain under warm-up: kept, told when there is one
            return told, f"not told to the warm-up gates: {exc}"
        except WarmupUnavailable as exc:
            return told, f"not told to the warm-up gates yet (the next sync tells them): {exc}"
        ledger.run("postmaster_applied", {"domain": domain, "day": day, "ratio": ratio}, "postmaster sync")
        entry = Told(day, float(ratio), record.verdict, record.paused)
        told.append(entry)
        if entry.verdict == "pause":
            log.error("postmaster: %s", entry.words(domain))
        elif entry.verdict == "hold":
            log.warning("postmaster: %s", entry.words(domain))
    return told, None


@dataclass(frozen=True)
class Latest:
    """A domain's last day with a ratio (None: none yet) and the last day Google reported at all."""

    domain: str
    day: date | None
    spam_ratio: float | None
    reputation: str | None
    last_reported: date
    fetched_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {"domain": self.domain, "date": self.day.isoformat() if self.day else None,
                "spam_ratio": self.spam_ratio, "reputation": self.reputation,
                "last_reported": self.last_reported.isoformat(), "fetched_at": self.fetched_at.isoformat()}


def latest(ledger: Ledger) -> list[Latest]:
    """Each domain's last figures, as `warmup status` and /metrics show them."""
    return [Latest(str(domain), day, None if ratio is None else float(ratio), reputation, last_reported, fetched_at)
            for domain, day, ratio, reputation, last_reported, fetched_at
            in ledger.fetch_all("postmaster_latest", {}, "postmaster latest")]


def sending_domains(configured: Sequence[str], inventory_domains: Sequence[str],
                    mailbox_domains: Sequence[str]) -> list[str]:
    """The domains a sync reads: `sendhost_postmaster.domains`, else `sendhost_domains`, else the mailboxes'."""
    chosen = configured or inventory_domains or mailbox_domains
    return list(dict.fromkeys(d.lower() for d in chosen))
