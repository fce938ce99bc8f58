"""What `sendhost simulate` tells a reader: every outcome it counts is explained, and in a pipe stderr stays
empty (the simulated pool's own warnings are outcomes of the run, not problems of the command)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulation.summary import MEANINGS, explain
from tests.conftest import run_cli
from warmup.guard import Answer


@pytest.mark.slow
@pytest.mark.service
def test_every_outcome_counted_is_explained_and_stderr_stays_empty(tmp_path: Path) -> None:
    result = run_cli("simulate", "--days", "3", "--format", "json", cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    data = json.loads(result.stdout)
    counted = {**data["sends"]["fallbacks_by_reason"], **data["sends"]["skipped_attempts"],
               **data["pool"]["rotation_outcomes"], **data["pool"]["redraw_reasons"]}
    assert counted, "a three-day run counts some outcomes"
    assert set(data["meanings"]) == set(counted)
    for code in counted:
        assert code in MEANINGS, f"{code} is counted but never explained"
        assert data["meanings"][code] == MEANINGS[code]

    table = run_cli("simulate", "--days", "3", cwd=tmp_path, timeout=300)
    assert table.returncode == 0 and table.stderr == "", table.stderr
    assert "what the counts mean" in table.stdout
    for code in counted:
        [line] = [line for line in table.stdout.splitlines() if f" {code} " in line and "│" in line
                  and MEANINGS[code][:30] in line]
        assert line


def test_every_guard_status_has_a_meaning() -> None:
    for status in Answer:
        if status is not Answer.RESERVED:
            assert status in MEANINGS, status
    assert explain("something-new") == "no explanation recorded for this outcome (please report it)"
