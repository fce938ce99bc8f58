"""Warm-up and pacing edits in the inventory reach the guard on the agent's next cycle (issue 25): applied, keeping
the day's counters and the guard's ramp, or warned about once naming the mailbox and the key. A real agent over a
real Redis, PostgreSQL and submission server (tests.sender.world), its inventory file edited as a person edits it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from sender import Ledger
from sender.sending.agent import Agent
from tests.sender.world import World, clear_of_midnight, make_world
from tests.support.submission import SubmissionServer
from warmup import Guard, Ramp

BOX0, BOX1 = "box0@sender.example", "box1@sender.example"


Started = tuple[Agent, Callable[[], Ledger], Guard]


def _started(world: World) -> Started:
    """An agent of `world` (as `sender run` builds it) after its start, every mailbox under the guard; its ledger
    factory, and a guard of the test's own."""
    agent, factory = world.agent()
    with factory() as ledger:
        agent.prepare(ledger)
    return agent, factory, Guard.from_url(world.redis_url)


def _cycle(started: Started) -> None:
    """One cycle of the agent's first worker (its sweep, then a look for a due row), as `sender run` runs it."""
    agent, factory, _ = started
    agent.work(factory, 0, once=True, stop=threading.Event())


def _edit(world: World, address: str, old: str, new: str) -> None:
    """Change `old` to `new` in `address`'s entry of the inventory file."""
    text = world.inventory.read_text()
    start = text.index(f"address: {address}\n")
    end = text.find("      - address:", start + 1)
    end = len(text) if end < 0 else end
    entry = text[start:end]
    assert old in entry, entry
    world.inventory.write_text(text[:start] + entry.replace(old, new, 1) + text[end:])


def test_an_edited_gap_and_jitter_reach_the_guard_on_the_next_cycle_keeping_counters_and_ramp(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    clear_of_midnight()
    started = _started(world)
    guard = started[2]
    held = guard.settings(BOX0)
    # a ramp set by hand (`sendhost warmup add --ceiling 60`): not an inventory key, so no edit may reset it
    guard.add_mailbox(BOX0, start=held.start, min_gap_s=0, jitter_s=(0, 0), group="sales", ramp=Ramp(ceiling=60))
    assert guard.reserve(BOX0).reserved
    _edit(world, BOX0, "min_gap_s: 0\n", "min_gap_s: 420\n")
    _edit(world, BOX0, "jitter_s: [0, 0]", "jitter_s: [30, 90]")
    with caplog.at_level(logging.INFO, logger="sendhost.sender"):
        _cycle(started)
    now = guard.settings(BOX0)
    assert (now.min_gap_ms, now.jitter_ms, now.ramp) == (420_000, (30_000, 90_000), Ramp(ceiling=60))
    assert guard.status([BOX0])[0].reserved == 1  # the day's reservation is still counted
    # the guard enforces the new gap: the next send waits at least 7 minutes
    refused = guard.reserve(BOX0)
    assert refused.status == "skipped-cooldown" and refused.retry_after_s is not None
    assert 360 < refused.retry_after_s <= 420 + 90
    assert f"warm-up settings of {BOX0} applied from the inventory: min_gap_s: 0s -> 420s; jitter_s: 0-0s -> " \
           "30-90s" in caplog.text
    assert guard.settings(BOX1).min_gap_ms == 0  # an entry not edited is left as it was


def test_an_agent_started_on_an_edited_inventory_applies_it_at_its_start(world: World) -> None:
    guard = _started(world)[2]
    _edit(world, BOX1, "group: sales\n", "group: sales\n        timezone: Europe/Berlin\n")
    _started(world)  # a restarted agent reads the edited file
    assert guard.settings(BOX1).timezone == "Europe/Berlin"
    assert guard.status([BOX1])[0].day == datetime.now(ZoneInfo("Europe/Berlin")).date()  # its days are Berlin's
    assert guard.settings(BOX0).timezone == "UTC"


def test_what_the_guard_cannot_take_is_warned_once_naming_the_mailbox_and_the_key(
        tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer,
        caplog: pytest.LogCaptureFixture) -> None:
    today = datetime.now(UTC).date()
    world = make_world(tmp_path, database_url, redis_url, submission, start=today - timedelta(days=2))
    started = _started(world)
    guard = started[2]
    old_start = guard.settings(BOX0).start
    earlier = today - timedelta(days=30)
    # BOX0: its start moved a month earlier (out of week one today) and its gap edited; BOX1: moved to a new group
    _edit(world, BOX0, f"start: '{old_start}'", f"start: '{earlier}'")
    _edit(world, BOX0, "min_gap_s: 0\n", "min_gap_s: 60\n")
    _edit(world, BOX1, "group: sales\n", "group: outreach\n")
    with caplog.at_level(logging.INFO, logger="sendhost.sender"):
        _cycle(started)
        _cycle(started)  # nothing new: no second warning
    box0, box1 = guard.settings(BOX0), guard.settings(BOX1)
    assert (box0.start, box0.min_gap_ms) == (old_start, 60_000)  # the gap applied, the start kept
    assert guard.status([BOX0])[0].cap == 10  # still week one's cap
    assert box1.group == "sales"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    start_warnings = [w for w in warnings if f"inventory key start of mailbox {BOX0} not applied" in w]
    group_warnings = [w for w in warnings if f"inventory key group of mailbox {BOX1} not applied" in w]
    assert len(start_warnings) == 1 and len(group_warnings) == 1, warnings
    assert f"sendhost warmup add {BOX0} --start {earlier} --force" in start_warnings[0]
    assert "the inventory says 'outreach', the guard keeps 'sales'" in group_warnings[0]
    # an inventory that no longer parses changes nothing and stops nothing: warned, the guard keeps its own
    world.inventory.write_text(world.inventory.read_text() + "  oops: [\n")
    with caplog.at_level(logging.INFO, logger="sendhost.sender"):
        _cycle(started)
    assert guard.settings(BOX0) == box0
    assert any("the inventory's warm-up settings not applied, the guard keeps its own" in r.getMessage()
               for r in caplog.records)


def test_the_providers_limits_reach_the_guard_over_its_own_settings(world: World) -> None:
    """A Microsoft 365 mailbox (`smtp.provider: microsoft`: 30 a minute, 10,000 a day) with `min_gap_s: 0` and a
    ramp raised by hand past the provider's day: the next cycle holds the gap at 2 s and the ceiling at 10,000, and
    the guard enforces that gap."""
    clear_of_midnight()
    started = _started(world)
    guard = started[2]
    held = guard.settings(BOX0)
    guard.add_mailbox(BOX0, start=held.start, min_gap_s=0, jitter_s=(0, 0), group="sales",
                      ramp=Ramp(ceiling=20_000))
    _edit(world, BOX0, "security: starttls,", "security: starttls, provider: microsoft,")
    _cycle(started)
    now = guard.settings(BOX0)
    assert (now.min_gap_ms, now.ramp.ceiling) == (2000, 10_000)
    assert guard.reserve(BOX0).reserved
    refused = guard.reserve(BOX0)
    assert refused.status == "skipped-cooldown" and refused.retry_after_s is not None
    assert 0 < refused.retry_after_s <= 2
    assert guard.settings(BOX1).min_gap_ms == 0  # a mailbox without a provider keeps its own gap
