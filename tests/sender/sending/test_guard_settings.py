"""The inventory's warm-up settings applied to the guard (sender.sending.guard_settings), with no service: the guard
is a fake at its boundary that holds each mailbox's settings as Redis would (warmup.mailboxes.MailboxConfig) and
refuses what the real one refuses."""

from __future__ import annotations

import logging
from datetime import date
from typing import Any, cast

import pytest

from sender.sending.guard_settings import Applied, GuardSettings, Refused, apply_mailbox
from sendhost.errors import ConfigError
from sendhost.model import Credential, Mailbox, Submission
from warmup import Guard
from warmup.errors import UnknownMailbox, WarmupConfigError, WarmupUnavailable
from warmup.mailboxes import MailboxConfig
from warmup.schedule import Ramp

BOX = "box@sender.example"
START = date(2026, 11, 2)
OWN_RAMP = Ramp(week_one_cap=8, step=4, ceiling=60)


class HeldSettings:
    """The guard at its boundary: the settings it holds, what it was asked to add; a start moved earlier is refused
    (as out of week one), and Redis may be down."""

    def __init__(self, *mailboxes: Mailbox, down: bool = False) -> None:
        self.held = {m.address: MailboxConfig.of(m, OWN_RAMP) for m in mailboxes}
        self.added: list[MailboxConfig] = []
        self.down = down

    def settings(self, address: str) -> MailboxConfig:
        if self.down:
            raise WarmupUnavailable("Redis at 127.0.0.1:6379 refused the connection")
        if address not in self.held:
            raise UnknownMailbox(address, "`sendhost warmup add` puts it there")
        return self.held[address]

    def add_mailbox(self, address: str, *, start: date, min_gap_s: float, jitter_s: tuple[float, float], group: str,
                    timezone: str, domain: str, ramp: Ramp) -> bool:
        config = MailboxConfig.of(Mailbox(address, domain, start, timezone, group, min_gap_s, jitter_s), ramp)
        if start < self.held[address].start:
            raise WarmupConfigError(f"moving {address}'s start earlier ends its first week today; pass force")
        self.held[address] = config
        self.added.append(config)
        return False


def mailbox(**changes: Any) -> Mailbox:
    return Mailbox(**{"address": BOX, "domain": "sender.example", "start": START, "timezone": "Europe/Berlin",
                      "group": "default", "min_gap_s": 420.0, "jitter_s": (10.0, 60.0), **changes})


def apply(guard: HeldSettings, inventory: Mailbox) -> tuple[Applied | None, list[Refused]]:
    return apply_mailbox(cast(Guard, guard), inventory)


def test_nothing_differs_nothing_is_written() -> None:
    guard = HeldSettings(mailbox())
    assert apply(guard, mailbox()) == (None, [])
    assert guard.added == []


def test_a_changed_gap_jitter_and_zone_are_applied_and_named_as_a_person_reads_them() -> None:
    guard = HeldSettings(mailbox())
    applied, refused = apply(guard, mailbox(min_gap_s=300.0, jitter_s=(5.0, 30.5), timezone="America/New_York"))
    assert refused == []
    assert applied == Applied(BOX, ("timezone: Europe/Berlin -> America/New_York", "min_gap_s: 420s -> 300s",
                                    "jitter_s: 10-60s -> 5-30.5s"))
    assert (guard.held[BOX].min_gap_ms, guard.held[BOX].jitter_ms) == (300_000, (5000, 30500))


def test_the_guards_own_ramp_stays() -> None:
    guard = HeldSettings(mailbox())
    apply(guard, mailbox(min_gap_s=300.0))
    assert guard.held[BOX].ramp == OWN_RAMP


def test_the_ramp_is_lowered_to_the_providers_daily_limit() -> None:
    guard = HeldSettings(mailbox())
    smtp = Submission("smtp.example", 587, "starttls", BOX, cast(Credential, None), daily_limit=30, min_gap_s=600)
    applied, _ = apply(guard, mailbox(smtp=smtp))
    assert guard.held[BOX].ramp == Ramp(week_one_cap=8, step=4, ceiling=30)
    assert guard.held[BOX].min_gap_ms == 600_000  # the provider's gap, longer than the inventory's
    assert applied is not None and applied.changes == ("min_gap_s: 420s -> 600s",)


def test_a_new_group_is_refused_and_the_rest_applied() -> None:
    guard = HeldSettings(mailbox())
    applied, refused = apply(guard, mailbox(group="outbound", min_gap_s=300.0))
    assert [(r.key, r.address) for r in refused] == [("group", BOX)]
    assert refused[0].why == ("the inventory says 'outbound', the guard keeps 'default': its counters live there "
                              "(give the new group a new mailbox)")
    assert guard.held[BOX].group == "default" and applied is not None and applied.changes == (
        "min_gap_s: 420s -> 300s",)


def test_a_start_moved_earlier_is_refused_with_the_command_that_forces_it_and_the_rest_applied() -> None:
    guard = HeldSettings(mailbox())
    applied, refused = apply(guard, mailbox(start=date(2026, 10, 1), min_gap_s=300.0))
    assert [r.key for r in refused] == ["start"]
    assert refused[0].why.endswith(f"(`sendhost warmup add {BOX} --start 2026-10-01 --force`); the guard keeps "
                                   "2026-11-02")
    assert guard.held[BOX].start == START and guard.held[BOX].min_gap_ms == 300_000
    assert applied is not None and applied.changes == ("min_gap_s: 420s -> 300s",)


def test_a_start_moved_earlier_alone_applies_nothing() -> None:
    guard = HeldSettings(mailbox())
    applied, refused = apply(guard, mailbox(start=date(2026, 10, 1)))
    assert applied is None and [r.key for r in refused] == ["start"]


def test_a_refusal_of_anything_but_an_earlier_start_is_raised() -> None:
    guard = HeldSettings(mailbox())

    def refuse(address: str, **_: Any) -> bool:
        raise WarmupConfigError(f"{address}: refused")
    guard.add_mailbox = refuse  # type: ignore[method-assign]
    with pytest.raises(WarmupConfigError, match="refused"):  # only a start moved earlier is applied around
        apply(guard, mailbox(start=date(2026, 12, 5)))


def cycle(guard: HeldSettings, *inventory: Mailbox, addresses: tuple[str, ...] = (BOX,)) -> list[Applied | Refused]:
    return GuardSettings(lambda: inventory, addresses).cycle(cast(Guard, guard))


def test_a_cycle_applies_only_the_agents_own_mailboxes() -> None:
    other = mailbox(address="other@sender.example")
    guard = HeldSettings(mailbox(), other)
    outcomes = cycle(guard, mailbox(min_gap_s=300.0), mailbox(address="other@sender.example", min_gap_s=1.0),
                     addresses=("BOX@sender.example",))
    assert [o.address for o in outcomes] == [BOX]
    assert guard.held["other@sender.example"].min_gap_ms == 420_000


def test_a_mailbox_not_under_the_guard_yet_is_left_to_the_rebuild() -> None:
    assert cycle(HeldSettings(), mailbox(min_gap_s=300.0)) == []


def test_a_refusal_is_warned_once_per_value(caplog: pytest.LogCaptureFixture) -> None:
    guard = HeldSettings(mailbox())
    settings = GuardSettings(lambda: [mailbox(group="outbound")], [BOX])
    with caplog.at_level(logging.WARNING, "sendhost.sender"):
        first = settings.cycle(cast(Guard, guard))
        second = settings.cycle(cast(Guard, guard))
    assert [type(o) for o in first] == [type(o) for o in second] == [Refused]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [f"sender: inventory key group of mailbox {BOX} not applied to the warm-up guard: "
                      "the inventory says 'outbound', the guard keeps 'default': its counters live there "
                      "(give the new group a new mailbox)"]


def test_an_inventory_that_does_not_parse_is_warned_once_and_the_guard_keeps_its_own(
        caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> list[Mailbox]:
        raise ConfigError("inventory.yml line 12: sendhost_mailboxes[0].min_gap_s: not a number")
    settings = GuardSettings(broken, [BOX])
    with caplog.at_level(logging.WARNING, "sendhost.sender"):
        assert settings.cycle(cast(Guard, HeldSettings(mailbox()))) == []
        assert settings.cycle(cast(Guard, HeldSettings(mailbox()))) == []
    assert [r.getMessage() for r in caplog.records] == [
        "sender: the inventory's warm-up settings not applied, the guard keeps its own: inventory.yml line 12: "
        "sendhost_mailboxes[0].min_gap_s: not a number"]


def test_redis_down_ends_the_cycle_with_a_warning_and_no_refusal(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "sendhost.sender"):
        assert cycle(HeldSettings(mailbox(), down=True), mailbox(min_gap_s=300.0)) == []
    assert "warm-up settings not applied this cycle" in caplog.text


def test_a_value_the_guard_cannot_hold_is_refused_for_the_mailbox() -> None:
    (refused,) = cycle(HeldSettings(mailbox()), mailbox(jitter_s=(60.0, 10.0)))
    assert isinstance(refused, Refused) and (refused.key, refused.address) == ("mailbox", BOX)
    assert "jitter" in refused.why
