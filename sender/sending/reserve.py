"""The reservation step: a mailbox of the row's group (or the one its lead's thread is pinned to) reserved through
the warm-up guard, with the campaign's slot and its window's pace, held from then on (`Held`: the reservation, then
the lease beside it); else how long the row waits."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from datetime import datetime

from ippool import Lease
from sender.ledger.store import Claimed, Ledger
from sender.sending.report import GiveBack
from sender.sending.windows import Pace
from warmup import Answer, FailureClass, Guard, Picker, Reservation
from warmup.errors import UnknownMailbox, WarmupConfigError, WarmupUnavailable

UNAVAILABLE_DELAY_S = 5.0  # Redis could not answer: try again soon
PAUSED_DELAY_S = 300.0  # no mailbox may take it until something changes (a pause lifted, an inventory fixed)


class Held:
    """What a row holds on its way: its mailbox's reservation, then a source address's lease. Undone in reverse
    when the path fails before the attempt started; a started attempt is never undone (the reservation stays
    used and the row `sending` for the sweep: the server may have the message)."""

    def __init__(self, guard: Guard, reservation: Reservation) -> None:
        self.guard = guard
        self.reservation = reservation
        self.lease: Lease | None = None
        self.cancelled = False  # the reservation was given back
        self.attempt_started = False
        self.accepted = False  # the server accepted the message: its reservation is confirmed

    def cancel(self, failure: FailureClass | None = None) -> None:
        """Give the reservation back to the guard (`failure`: the class whose response applies)."""
        self.guard.cancel(self.reservation, failure)
        self.cancelled = True

    def undo(self) -> bool:
        """After a failure: cancel the reservation unless it was or the attempt started; whether it did."""
        if not self.cancelled and not self.attempt_started:
            self.cancel()
            return True
        return False

    def finish(self, side_tasks: Executor) -> None:
        """Off the hot path, in one side task: neither step fails the send (a lost release expires by its TTL;
        confirm only settles a reservation that already counts against the cap), and neither may delay the next
        claim."""
        if self.lease is not None:
            side_tasks.submit(_finish, self.guard, self.lease, self.reservation if self.accepted else None)


def _finish(guard: Guard, lease: Lease, sent: Reservation | None) -> None:
    """After a send, beside the next one: confirm the reservation of an accepted message, release the lease."""
    try:
        if sent is not None:
            guard.confirm(sent)
    finally:
        lease.release()


class Reserver:
    """Reserves a mailbox for a claimed row through `guard` (its pick, else `pick`: the simulation's). `addresses`
    are the agent's mailboxes per group (lowercase); `pace` gives a row's campaign slot and window left
    (sender.sending.windows); `rebuild(ledger, group)` puts a group's warm-up counters back into Redis from the
    ledger."""

    def __init__(self, guard: Guard, addresses: Mapping[str, Sequence[str]],
                 pace: Callable[[Ledger, Claimed, datetime], Pace],
                 rebuild: Callable[[Ledger, str], object], pick: Picker | None = None) -> None:
        self._guard = guard
        self._pick = pick or guard.pick
        self._addresses = addresses
        self._mailboxes = {a for group in addresses.values() for a in group}
        self._pace = pace
        self._rebuild = rebuild

    def reserve(self, ledger: Ledger, row: Claimed, now: datetime) -> Held | GiveBack:
        """A reservation for `row` at `now`, held, or how long it waits and why."""
        pace = self._pace(ledger, row, now)  # the campaign's slot, taken with the mailbox's; the spread
        addresses = self._addresses.get(row.group)
        if row.pinned_mailbox is not None:
            # A later step goes from the mailbox that sent the lead's previous one, or waits for it.
            addresses = (row.pinned_mailbox,) if row.pinned_mailbox in self._mailboxes else ()
            if not addresses:  # the claim filters on our mailboxes: only a changed inventory gets here
                return GiveBack(PAUSED_DELAY_S,
                                f"waiting for mailbox {row.pinned_mailbox}, which this agent does not send from")
        if not addresses:  # the claim filters on our groups: only a changed inventory gets here
            return GiveBack(PAUSED_DELAY_S, f"no mailbox of group {row.group} on this agent",
                            detail=f"no mailbox in group {row.group}")
        try:
            decision = self._pick(addresses, campaign=pace.campaign, window_left_s=pace.window_left_s)
        except WarmupConfigError as exc:
            if not isinstance(exc, UnknownMailbox):
                return GiveBack(PAUSED_DELAY_S, str(exc))
            # Redis lost the group's mailboxes: rebuild from the ledger before reserving anything.
            try:
                self._rebuild(ledger, row.group)
            except WarmupUnavailable as unavailable:
                return GiveBack(UNAVAILABLE_DELAY_S, "", detail=str(unavailable))
            except WarmupConfigError as wrong:  # e.g. a start date in the future
                return GiveBack(PAUSED_DELAY_S, str(wrong))
            decision = self._pick(addresses, campaign=pace.campaign, window_left_s=pace.window_left_s)
        if decision.reserved and decision.reservation is not None:
            return Held(self._guard, decision.reservation)
        if decision.status is Answer.SKIPPED_UNAVAILABLE:
            delay = UNAVAILABLE_DELAY_S
        elif decision.retry_after_s is None:
            delay = PAUSED_DELAY_S
        else:
            delay = max(decision.retry_after_s, 0.0)
        return GiveBack(delay, "", detail=f"{decision.status} ({decision.reason or ''}) for {delay:.0f}s")
