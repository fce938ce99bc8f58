"""The walk of one campaign step, measured: how many times a reader following one lead's first step from
`sendhost campaign add-leads` to the submission and back must move to another module.

The walk starts at each of the two entries a step passes through: the `campaign add-leads` command and the agent's
`Agent.send_one`. It follows each entry's own calls into the project's functions, one level down: the stages a
reader opens to follow the step. A *stop* is each move to another module: a call from the entry into a function of
another module, or the return from it to the entry (a *return*). A call within the entry's module is the same page
and no stop; the library's and the standard library's functions are not the project's. The step measured is a
second lead's, so the first use's paths (connections opened, keys cached) are not on it.

Run with `-s` to see the walk. By this rule the walk took 40 stops in 15 modules when issue 44 set the bound (at
6d8fdb5; the issue counted 36 in 13), 36 in 14 before the command became one call into the ledger's campaigns and
the reservation began holding the row's lease; one lease (`Pool.lease`) takes 4 stops in 3 modules.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from tests.sender.sequences import CAMPAIGN
from tests.sender.world import World
from tests.support.cli import run_cli_in_process

ROOT = Path(__file__).resolve().parents[2]
ADD_LEADS = "toolkit.cli.campaign.files:add_leads_command"
SEND_ONE = "sender.sending.agent:Agent.send_one"
STOPS_AT_MOST = 20


def module_of(frame: FrameType) -> str | None:
    """The project module a frame runs in; None for the libraries', the standard library's and the tests'."""
    try:
        relative = Path(frame.f_code.co_filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    if relative.parts[0] in ("tests", ".venv") or relative.suffix != ".py":
        return None
    return ".".join(relative.with_suffix("").parts).removesuffix(".__init__")


@dataclass(repr=False)
class Walk:
    """The modules a reader moves through from the entries, in order (an entry's module starts each leg)."""

    entries: tuple[str, ...]
    legs: list[list[str]] = field(default_factory=list)
    _depth: int = 0  # frames of the project under the entry now running; 0: no entry is running

    def profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event not in ("call", "return"):
            return
        module = module_of(frame)
        if module is None:
            return
        name = f"{module}:{frame.f_code.co_qualname}"
        if event == "call":
            if self._depth == 0:
                if name in self.entries:
                    self._depth = 1
                    self.legs.append([module])
                return
            self._depth += 1
            if self._depth == 2 and module != self.legs[-1][-1]:
                self.legs[-1].append(module)  # into a stage of another module
        elif self._depth:
            self._depth -= 1
            leg = self.legs[-1]
            if self._depth == 1 and leg[-1] != leg[0]:
                leg.append(leg[0])  # back to the entry: a return

    @property
    def stops(self) -> int:
        return sum(len(leg) - 1 for leg in self.legs)

    @property
    def returns(self) -> int:
        return sum(leg[1:].count(leg[0]) for leg in self.legs)

    @property
    def modules(self) -> set[str]:
        return {module for leg in self.legs for module in leg}

    def __repr__(self) -> str:
        lines = [f"{self.stops} stops ({self.returns} of them returns) in {len(self.modules)} modules"]
        lines += [" -> ".join(leg) for leg in self.legs]
        return "\n".join(lines)


@contextmanager
def walking(walk: Walk) -> Iterator[Walk]:
    sys.setprofile(walk.profile)
    try:
        yield walk
    finally:
        sys.setprofile(None)


def _sendhost(world: World, cwd: Path) -> Callable[..., Any]:
    def run(*args: str) -> None:
        result = run_cli_in_process("--inventory", str(world.inventory), "--redis-url", world.redis_url, args[0],
                                    "--database-url", world.database_url, *args[1:], cwd=cwd)
        assert result.returncode == 0, result.stderr
    return run


def test_one_campaign_step_walks_in_at_most_20_stops(world: World, tmp_path: Path) -> None:
    sendhost = _sendhost(world, tmp_path)
    (tmp_path / "walk.yml").write_text(CAMPAIGN.format(name="walk"))
    sendhost("campaign", "apply", str(tmp_path / "walk.yml"))
    sendhost("campaign", "start", "walk")
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    first.write_text("address,first_name\neve@rcpt.example,Eve\n")
    second.write_text("address,first_name\nbob@rcpt.example,Bob\n")
    agent, factory = world.agent()
    sendhost("campaign", "add-leads", "walk", str(first))
    with factory() as ledger:
        assert agent.send_one(ledger, "w1") is not None  # the first use, not walked
    with walking(Walk((ADD_LEADS, SEND_ONE))) as walk:
        sendhost("campaign", "add-leads", "walk", str(second))
        with factory() as ledger:
            report = agent.send_one(ledger, "w1")
    assert report is not None and report.address == "bob@rcpt.example" and report.kind.value == "sent", report
    assert [leg[0] for leg in walk.legs] == ["toolkit.cli.campaign.files", "sender.sending.agent"], walk
    print(f"\nthe walk of one campaign step: {walk!r}")
    assert walk.stops <= STOPS_AT_MOST, walk
