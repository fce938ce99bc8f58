"""docs/simulation.md's sample of `sendhost simulate` is what the command prints today for the seed it names."""

from __future__ import annotations

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
