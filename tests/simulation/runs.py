"""Small made-up runs (a SimResult written by hand) for the summary's checks that need no simulation: the example
inventory, one campaign on its group with the demo's window, and the sends a test lays down."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from simulation import SimConfig, SimResult, events
from simulation.campaign import SequenceRow, campaign_spec
from simulation.mail import Deliveries, Delivery, SourceLine
from simulation.model import DEMO_PACING
from toolkit.cli.simulate import example_inventory, to_sim_inventory
from toolkit.inventory import load_inventory
from warmup.schedule import cap_on

MONDAY = date(2026, 11, 30)  # the example inventory's run starts on its latest mailbox start, a Monday
BUDGET = 10


@dataclass
class MadeRun:
    """A run under construction: `send` lays down one send (a lease, the server's record, the ledger's row)."""

    days: int = 7
    pacing: str = DEMO_PACING
    log: events.EventLog = field(default_factory=events.EventLog)
    delivered: list[Delivery] = field(default_factory=list)
    rows: list[SequenceRow] = field(default_factory=list)
    turned_away: int = 0
    turned_away_closed: int = 0
    reconcile: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.inventory = to_sim_inventory(load_inventory(example_inventory()))
        self.start_s = datetime.combine(MONDAY, datetime.min.time(), UTC).timestamp()
        spec, _text = campaign_spec("default", ["default"], self.pacing)
        self.spec = spec
        self.log.placements.append(events.PlacementRecord(self.start_s, "sender-1", 1, 1, "198.51.100.1", "eipalloc-1",
                                                          BUDGET, True, "provision"))

    def cap(self, mailbox: str, day: date) -> int:
        start = next(m.start for m in self.inventory.mailboxes if m.address == mailbox)
        return cap_on(start, day).cap

    def send(self, mailbox: str, day: date, hour: float, lead: str, step: int = 1, *, slot: int | None = 1,
             reason: str | None = None, mailbox_of_row: str | None = None) -> None:
        """`mailbox` sends `lead`'s `step` at `hour` UTC of `day` (its local day taken as `day`)."""
        at = datetime.combine(day, datetime.min.time(), UTC).timestamp() + hour * 3600
        count = sum(1 for s in self.log.sends if s.mailbox == mailbox and s.local_day == day.isoformat()) + 1
        message_id = f"<{lead}-{step}-{len(self.delivered)}@sim>"
        self.log.sends.append(events.Send(at, "w1", "sender-1", mailbox, day.isoformat(), count,
                                          self.cap(mailbox, day), None if slot is None else "198.51.100.1", slot,
                                          None if slot is None else 1, reason, message_id, "127.1.0.1", lead))
        self.delivered.append(Delivery("127.1.0.1", mailbox, mailbox, lead, message_id))
        self.rows.append(SequenceRow(self.spec.name, lead, step, "sent", mailbox_of_row or mailbox, message_id, at,
                                     None, None))

    def result(self) -> SimResult:
        caps = {m.address: {(MONDAY + timedelta(days=n)).isoformat(): self.cap(m.address, MONDAY + timedelta(days=n))
                            for n in range(-1, self.days + 1)} for m in self.inventory.mailboxes}
        on_slot = sum(1 for s in self.log.sends if s.slot is not None)
        per_mailbox: dict[str, int] = {}
        for delivery in self.delivered:
            per_mailbox[delivery.login] = per_mailbox.get(delivery.login, 0) + 1
        deliveries = Deliveries(len(self.delivered), per_mailbox,
                                [SourceLine("127.1.0.1", "sender-1", "198.51.100.1", 1, 1, on_slot, BUDGET)])
        in_slots = 1
        return SimResult(SimConfig(days=self.days), self.inventory, MONDAY, self.start_s,
                         self.start_s + self.days * 86_400, self.log, caps, delivered=self.delivered,
                         deliveries=deliveries, specs=[self.spec], sequences=self.rows,
                         leads_turned_away=self.turned_away, reconcile=self.reconcile, eips_at_end=in_slots,
                         leads_turned_away_closed=self.turned_away_closed)
