"""The simulation's event log: what happened and when, in simulated epoch seconds.

The summary and the charts are computed from this log, and so are the tests' invariants, independently.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Send:
    """One send: the mailbox's reservation and the lease it went out on (`public_ip` None on a fallback)."""

    at: float
    worker: str
    host: str
    mailbox: str
    local_day: str  # the mailbox's own calendar day, as the guard counted it
    count: int  # the reservation's count on that day
    cap: int  # that day's cap, as the guard enforced it
    public_ip: str | None
    slot: int | None
    generation: int | None
    fallback_reason: str | None = None
    message_id: str | None = None  # the ledger row's Message-ID, as the submission server received it
    source_ip: str | None = None  # the loopback address the agent's SMTP connection was bound to
    address: str | None = None  # the lead's address


@dataclass(frozen=True)
class Skip:
    """A row through the send path without a send: the guard refused (cooldown, daily limit, paused), or the
    ledger settled it unsent (`row-<outcome>`)."""

    at: float
    worker: str
    status: str


@dataclass(frozen=True)
class PlacementRecord:
    """An address put into service in a slot, with the budget drawn for it; `fresh` if never seen before."""

    at: float
    host: str
    slot: int
    generation: int
    public_ip: str
    allocation_id: str
    budget: int
    fresh: bool
    by: str  # "provision" or "rotation"


@dataclass(frozen=True)
class Retirement:
    """An address taken out of a slot by rotation (and parked), with the sends it made; `by_command` if on-call
    retired it early."""

    at: float
    host: str
    slot: int
    generation: int
    public_ip: str
    allocation_id: str
    used: int
    budget: int
    by_command: bool = False


@dataclass(frozen=True)
class Parked:
    """An EIP parked until `until` (a retired one, or a fresh draw refused as recently used)."""

    at: float
    host: str
    public_ip: str
    allocation_id: str
    until: float
    reason: str  # "retired" or "redraw:<why>"


@dataclass(frozen=True)
class Released:
    """A parked EIP released to AWS after its parking."""

    at: float
    host: str
    public_ip: str
    allocation_id: str
    parked_at: float


@dataclass(frozen=True)
class Clicked:
    """A click on a tracked link as the ledger took it (simulation.clicks): its verdict, or `unmatched`."""

    at: float
    address: str
    message_id: str
    row: int | None
    verdict: str  # human | scanner | unmatched


@dataclass(frozen=True)
class Reacted:
    """A recipient's reaction as the ledger took it (simulation.recipients): a bounce, a reply, an unsubscribe, an
    out-of-office, a reply asking to be removed."""

    at: float
    kind: str  # bounce | reply | unsubscribe | away | stop
    address: str
    message_id: str  # the message reacted to
    row: int | None  # the ledger row it named (None: none)
    event: str | None  # the ledger event applied
    applied: str  # the ledger's answer (applied, recorded, replay, no_row) or "unmatched"
    held_until: str | None = None  # an out-of-office's: the day (ISO) its lead's next step waits for


@dataclass(frozen=True)
class Sample:
    """The pools at one instant, for the charts."""

    at: float
    leasable: int  # slots active and under budget: addresses in service
    held: int  # EIPs allocated in the account (in slots or parked)
    parked: int


@dataclass
class EventLog:
    """Every event of a run, by kind, in time order."""

    sends: list[Send] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    placements: list[PlacementRecord] = field(default_factory=list)
    retirements: list[Retirement] = field(default_factory=list)
    parked: list[Parked] = field(default_factory=list)
    released: list[Released] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    reactions: list[Reacted] = field(default_factory=list)
    clicks: list[Clicked] = field(default_factory=list)

    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        return {name: [asdict(event) for event in getattr(self, name)]
                for name in ("sends", "skips", "placements", "retirements", "parked", "released", "samples",
                             "reactions", "clicks")}
