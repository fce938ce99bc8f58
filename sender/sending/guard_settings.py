"""The inventory's warm-up settings applied to the guard: at the agent's start and on each of its sweep cycles.

The guard keeps each mailbox's settings in Redis from the day it was added; an agent re-adds only a mailbox Redis
lost (counters.py), so an edit to the inventory (a gap, the jitter, a time zone, a start date) of a mailbox Redis
still held never reached the guard. Each cycle compares what the guard holds with the inventory as it is now (one
read of each mailbox's hash) and applies what differs through `Guard.add_mailbox`, which keeps the day's counters.
What it cannot apply is warned about once per value, naming the mailbox and the key:
- `group`: the mailbox's counters live under its group's hash tag, so the guard keeps the group it was added with;
- `start`: moved earlier so that today leaves week one, the guard wants a person's `--force`
  (`sendhost warmup add ADDRESS --start DATE --force`); the other keys still apply.
The ramp (week-one cap, step, ceiling) is not an inventory key: the guard's own stays (`sendhost warmup add`), only
lowered to the provider's documented daily limit (`smtp.daily_limit`, a preset's by default: MailboxConfig.of).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from sendhost.errors import SendhostError
from sendhost.model import Mailbox
from warmup import Guard
from warmup.errors import UnknownMailbox, WarmupConfigError, WarmupUnavailable
from warmup.mailboxes import MailboxConfig

log = logging.getLogger("sendhost.sender")


@dataclass(frozen=True)
class Applied:
    """A mailbox whose settings the guard now holds as the inventory says: what changed ("min_gap: 420s -> 300s")."""

    address: str
    changes: tuple[str, ...]


@dataclass(frozen=True)
class Refused:
    """A setting the guard did not take: the mailbox, the inventory key, why and what would apply it."""

    address: str
    key: str
    why: str


def _words(config: MailboxConfig) -> dict[str, str]:
    """The settings an inventory sets, by its key names, as a person reads them."""
    low, high = config.jitter_ms
    return {"group": config.group, "domain": config.domain, "timezone": config.timezone,
            "start": config.start.isoformat(), "min_gap_s": f"{config.min_gap_ms / 1000:g}s",
            "jitter_s": f"{low / 1000:g}-{high / 1000:g}s"}


def apply_mailbox(guard: Guard, mailbox: Mailbox) -> tuple[Applied | None, list[Refused]]:
    """Make the guard hold `mailbox`'s inventory settings, keeping its counters and its ramp; None applied when
    nothing differs. UnknownMailbox when the guard does not hold it (the rebuild adds it)."""
    held = guard.settings(mailbox.address)
    wanted = MailboxConfig.of(mailbox, held.ramp)
    refused: list[Refused] = []
    if wanted.group != held.group:
        refused.append(Refused(held.address, "group", f"the inventory says {wanted.group!r}, the guard keeps "
                               f"{held.group!r}: its counters live there (give the new group a new mailbox)"))
        wanted = dataclasses.replace(wanted, group=held.group)
    if wanted == held:
        return None, refused
    try:
        _add(guard, wanted)
    except WarmupConfigError as exc:
        if wanted.start >= held.start:
            raise
        # the start moved earlier out of week one: the guard wants a person's --force; apply the rest
        refused.append(Refused(held.address, "start", f"{exc} (`sendhost warmup add {held.address} --start "
                               f"{wanted.start} --force`); the guard keeps {held.start}"))
        wanted = dataclasses.replace(wanted, start=held.start)
        if wanted == held:
            return None, refused
        _add(guard, wanted)
    before, after = _words(held), _words(wanted)
    return Applied(held.address, tuple(f"{key}: {before[key]} -> {after[key]}" for key in before
                                       if before[key] != after[key])), refused


def _add(guard: Guard, config: MailboxConfig) -> None:
    low, high = config.jitter_ms
    guard.add_mailbox(config.address, start=config.start, min_gap_s=config.min_gap_ms / 1000,
                      jitter_s=(low / 1000, high / 1000), group=config.group, timezone=config.timezone,
                      domain=config.domain, ramp=config.ramp)


class GuardSettings:
    """Each cycle, the inventory's settings of an agent's mailboxes applied to the guard; each refusal warned once."""

    def __init__(self, read: Callable[[], Sequence[Mailbox]], addresses: Collection[str]) -> None:
        """`read` gives the inventory's mailboxes as they are now (SendhostError: the file does not parse);
        `addresses` are the agent's own, the only ones it applies."""
        self._read = read
        self._addresses = {a.lower() for a in addresses}
        self._warned: set[str] = set()

    def cycle(self, guard: Guard) -> list[Applied | Refused]:
        """Apply what differs now; what was applied and refused. Redis or the inventory failing only warns: the
        next cycle tries again, and the guard keeps what it holds meanwhile."""
        try:
            mailboxes = [m for m in self._read() if m.address.lower() in self._addresses]
        except SendhostError as exc:
            self._warn(f"sender: the inventory's warm-up settings not applied, the guard keeps its own: {exc}")
            return []
        outcomes: list[Applied | Refused] = []
        for mailbox in mailboxes:
            try:
                applied, refused = apply_mailbox(guard, mailbox)
            except UnknownMailbox:
                continue  # not under the guard yet: the rebuild adds it with these settings
            except WarmupUnavailable as exc:
                log.warning("sender: warm-up settings not applied this cycle: %s", exc)
                return outcomes
            except WarmupConfigError as exc:
                refused, applied = [Refused(mailbox.address.lower(), "mailbox", str(exc))], None
            if applied is not None:
                log.info("sender: warm-up settings of %s applied from the inventory: %s", applied.address,
                         "; ".join(applied.changes))
                outcomes.append(applied)
            for refusal in refused:
                self._warn(f"sender: inventory key {refusal.key} of mailbox {refusal.address} not applied to the "
                           f"warm-up guard: {refusal.why}")
                outcomes.append(refusal)
        return outcomes

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s", message)
