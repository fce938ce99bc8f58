"""docs/simulation.md's sample of `sendhost simulate` is what the command prints today for the seed it names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, run_cli

PAGE = REPO_ROOT / "docs" / "simulation.md"


def sample_lines(page: Path) -> list[str]:
    """The page's sample output: from its `$ sendhost simulate` line to the per-source table, which it cuts short."""
    lines = page.read_text().splitlines()
    start = lines.index("$ sendhost simulate") + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("delivered per source address"))
    return lines[start:end]


def printed_lines(stdout: str) -> list[str]:
    """What the run printed, over the same span, without the table of what each count means (the page leaves it
    out and says so)."""
    lines = [line.rstrip() for line in stdout.splitlines()]
    meanings = next(i for i, line in enumerate(lines) if line.startswith("what the counts mean"))
    mailboxes = next(i for i, line in enumerate(lines) if line.startswith("mailboxes, by"))
    end = next(i for i, line in enumerate(lines) if line.startswith("delivered per source address"))
    return lines[:meanings] + lines[mailboxes:end]


@pytest.mark.slow
@pytest.mark.service
def test_the_pages_sample_is_todays_run_of_its_seed(tmp_path: Path) -> None:
    result = run_cli("simulate", cwd=tmp_path, timeout=600)  # as the page runs it: the example, seed 1, 14 days
    assert result.returncode == 0, result.stderr
    assert sample_lines(PAGE) == printed_lines(result.stdout), "run `sendhost simulate` and paste its output"
    assert [f"each of the {rotations} rotations" for rotations in _measure(result.stdout, "rotations")] == \
        _stated(r"each of the \d+ rotations")
    assert [f"AWS's {redraws} hand-backs" for redraws in _measure(result.stdout, "redraws")] == \
        _stated(r"AWS's \d+ hand-backs")
    cost = re.findall(r"= (\$\d+\.\d\d) at", result.stdout)
    assert [f"the parked EIPs cost {c}" for c in cost] == _stated(r"the parked EIPs cost \$\d+\.\d\d")
    sources = len(re.findall(r"^│ 127\.", result.stdout, re.MULTILINE))  # a row per source address the server saw
    assert [f"saw {sources} source addresses"] == _stated(r"saw \d+ source addresses")


def _measure(stdout: str, name: str) -> list[str]:
    """The leading number of one row of the summary table."""
    return re.findall(rf"^│ {re.escape(name)} +│ (\d+)", stdout, re.MULTILINE)


def _stated(pattern: str) -> list[str]:
    """Where the page's prose states a figure of the run (line breaks read as spaces)."""
    return re.findall(pattern, re.sub(r"\s+", " ", PAGE.read_text()))
