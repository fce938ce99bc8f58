"""What a person does during a run, at a time of their choosing: a check of the state then (a campaign's forecast),
or a change (a campaign file applied again with another cap). A test's or a rehearsal's, given the run's parts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import redis

from sender.campaigns.spec import CampaignSpec
from sender.ledger.store import Ledger
from sendhost.model import Mailbox
from simulation.clock import SimClock


@dataclass(frozen=True)
class RunParts:
    """The running simulation, as a person at a terminal reaches it: its ledger, its Redis, the mailboxes the agents
    send from (as their settings say), the clock and each group's campaign."""

    ledger: Ledger
    ledger_url: str
    redis: redis.Redis
    mailboxes: tuple[Mailbox, ...]
    clock: SimClock
    specs: dict[str, CampaignSpec]  # mailbox group -> its campaign


@dataclass(frozen=True)
class Intervention:
    """`act` runs `at_s` seconds after the run's start, between two of the run's events."""

    at_s: float
    act: Callable[[RunParts], None]
