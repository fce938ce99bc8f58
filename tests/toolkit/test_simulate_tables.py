"""`sendhost simulate`'s text tables stay readable at a fleet's size: more than 20 rows (a fleet's mailboxes, a run's
source addresses) show the 10 busiest and one row for the rest; the JSON summary keeps every row."""

from __future__ import annotations

import re

import pytest

from simulation.mail import Deliveries, SourceLine
from simulation.summary import Summary
from toolkit.cli.simulate import FOLD_OVER, FOLDED_TO, _render_deliveries


def _deliveries(mailboxes: int, sources: int) -> Deliveries:
    per_mailbox = {f"m{n:03d}@example.com": n % 7 + 1 for n in range(mailboxes)}
    per_source = [SourceLine(f"127.0.1.{n}", f"h{n % 3}", f"203.0.113.{n}", n % 4, 1, 100 + n, 120)
                  for n in range(sources)]
    return Deliveries(sum(per_mailbox.values()), per_mailbox, per_source)


def _render(deliveries: Deliveries, capsys: pytest.CaptureFixture[str]) -> str:
    summary = Summary.__new__(Summary)  # only the deliveries are read
    object.__setattr__(summary, "deliveries", deliveries)
    _render_deliveries(summary)
    return capsys.readouterr().out


def test_a_fleets_tables_show_the_busiest_and_one_row_for_the_rest(capsys: pytest.CaptureFixture[str]) -> None:
    found = _deliveries(mailboxes=400, sources=250)
    out = _render(found, capsys)
    mailbox_rows = re.findall(r"^│ (m\d{3}@example\.com) +│ (\d+) +│$", out, re.MULTILINE)
    assert len(mailbox_rows) == FOLDED_TO and {int(n) for _, n in mailbox_rows} == {7}  # the busiest: 7 each
    rest = re.search(r"^│ … 390 more +│ (\d+) +│$", out, re.MULTILINE)
    assert rest and int(rest[1]) + 7 * FOLDED_TO == found.total  # nothing lost: the rest's sum is in its row
    source_rows = re.findall(r"^│ 127\.0\.1\.(\d+) ", out, re.MULTILINE)
    assert sorted(map(int, source_rows)) == list(range(240, 250))  # 240..249 delivered the most
    rest = re.search(r"^│ … 240 more .*│ (\d+) +│ +│$", out, re.MULTILINE)
    assert rest and int(rest[1]) == sum(100 + n for n in range(240))
    assert "the 10 busiest of 400 shown; every row: --format json (deliveries.per_mailbox)" in out
    assert "the 10 busiest of 250 shown; every row: --format json (deliveries.per_source)" in out


def test_a_table_of_up_to_20_rows_is_shown_whole(capsys: pytest.CaptureFixture[str]) -> None:
    out = _render(_deliveries(mailboxes=FOLD_OVER, sources=3), capsys)
    assert len(re.findall(r"^│ m\d{3}@example\.com ", out, re.MULTILINE)) == FOLD_OVER
    assert len(re.findall(r"^│ 127\.0\.1\.\d+ ", out, re.MULTILINE)) == 3
    assert "busiest" not in out and "more" not in out and "--format json" not in out
