"""Inbox share and rest: a mailbox whose share of messages in the seeds' inboxes, over its last tests per provider,
falls below the inventory's `sendhost_placement.rest_below` is rested: its warm-up ramp halved (or, with `pause:
true`, paused), the tests and the reason named. A later test whose share at every provider is at or above the
threshold lifts it, as `sendhost warmup resume` does. The ledger keeps each rest (sender_placement_rests); the
warm-up guard holds it (Redis): a rest lifted by `warmup resume` is closed in the ledger when next seen, one Redis
lost is put back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sender.ledger.store import Ledger
from sendhost.model import PlacementPolicy
from warmup import Guard

PAUSE_PREFIX = "placement:"


@dataclass(frozen=True)
class Share:
    """A mailbox's inbox share at one provider over its last tests (`tests`: their ids)."""

    mailbox: str
    provider: str
    inbox: int
    judged: int
    tests: tuple[int, ...]

    @property
    def share(self) -> float:
        return self.inbox / self.judged if self.judged else 0.0

    def to_json(self) -> dict[str, object]:
        return {"mailbox": self.mailbox, "provider": self.provider, "inbox": self.inbox, "judged": self.judged,
                "inbox_share": round(self.share, 4), "tests": list(self.tests)}


@dataclass(frozen=True)
class Rest:
    mailbox: str
    rested_at: datetime
    how: str  # halved | paused
    reason: str
    tests: tuple[int, ...]


def shares(ledger: Ledger, tests: int, mailbox: str | None = None) -> list[Share]:
    """Each (mailbox, provider)'s share over its last `tests` tests (of one mailbox, or of all)."""
    return [Share(m, p, int(inbox), int(judged), tuple(ids)) for m, p, inbox, judged, ids in ledger.fetch_all(
        "placement_shares", {"tests": tests, "mailbox": mailbox}, "placement shares")]


def open_rests(ledger: Ledger) -> dict[str, Rest]:
    return {m: Rest(m, at, how, reason, tuple(ids)) for m, at, how, reason, ids in ledger.fetch_all(
        "placement_open_rests", {}, "placement rests")}


@dataclass(frozen=True)
class Change:
    """What a test did to a mailbox's rest: `rested` or `lifted`, and why."""

    mailbox: str
    change: str
    why: str


def judge(ledger: Ledger, guard: Guard, mailbox: str, policy: PlacementPolicy, test: int) -> Change | None:
    """After test `test`: rest `mailbox` when a provider's share over its last tests is below the threshold, lift
    its rest when this test's share at every provider it reached is at or above it; None when nothing changed (or
    the inventory sets no threshold)."""
    if policy.rest_below is None:
        return None
    threshold = policy.rest_below
    mailbox = mailbox.lower()
    reconcile(ledger, guard)
    rested = mailbox in open_rests(ledger)
    latest = [s for s in shares(ledger, 1, mailbox) if test in s.tests]
    if rested:
        if latest and all(s.share >= threshold for s in latest):
            _lift(guard, mailbox)
            ledger.fetch_one("placement_lift", {"mailbox": mailbox, "by": f"placement test {test}"}, "lift")
            return Change(mailbox, "lifted", f"test {test}: inbox share at or above {threshold:.0%} at "
                          + ", ".join(f"{s.provider} {s.share:.0%}" for s in latest))
        return None
    low = [s for s in shares(ledger, policy.tests, mailbox) if s.share < threshold]
    if not low or not latest:
        return None
    reason = "; ".join(f"inbox share {s.share:.0%} at {s.provider} over tests {', '.join(map(str, s.tests))} is "
                       f"below {threshold:.0%}" for s in low)
    how = "paused" if policy.pause else "halved"
    tests = sorted({t for s in low for t in s.tests})
    ledger.fetch_one("placement_rest", {"mailbox": mailbox, "how": how, "reason": reason, "tests": tests}, "rest")
    if policy.pause:
        guard.pause(mailbox, f"{PAUSE_PREFIX} {reason}")
    else:
        guard.rest(mailbox, f"{PAUSE_PREFIX} {reason}")
    return Change(mailbox, "rested", f"{'paused' if policy.pause else 'warm-up ramp halved'}: {reason}")


def reconcile(ledger: Ledger, guard: Guard) -> None:
    """Each open rest of the ledger as the guard holds it: closed when a person lifted it (`sendhost warmup
    resume`), put back when Redis lost it (never reading a lost rest as lifted: err towards under-sending)."""
    for mailbox, rest in open_rests(ledger).items():
        if not guard.knows(mailbox):
            continue  # not under the guard now: the agent's rebuild puts the rest back with the mailbox
        if rest.how == "halved":
            held = guard.rest_reason(mailbox) is not None
        else:
            (status,) = guard.status([mailbox])
            held = status.state == "paused" and (status.reason or "").startswith(PAUSE_PREFIX)
        if held:
            continue
        if guard.rest_lifted(mailbox):
            ledger.fetch_one("placement_lift", {"mailbox": mailbox, "by": "warmup resume"}, "lift")
        elif rest.how == "halved":
            guard.rest(mailbox, f"{PAUSE_PREFIX} {rest.reason}")
        else:
            guard.pause(mailbox, f"{PAUSE_PREFIX} {rest.reason}")


def _lift(guard: Guard, mailbox: str) -> None:
    if guard.rest_reason(mailbox) is not None:
        guard.lift_rest(mailbox)
    (status,) = guard.status([mailbox])
    if status.state == "paused" and (status.reason or "").startswith(PAUSE_PREFIX):
        guard.resume(mailbox)  # our own pause, nothing else's: a pause of another reason stays
