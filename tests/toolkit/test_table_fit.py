"""Tables in a terminal's width without a broken word: a column is never narrower than its longest word, text
wraps at spaces, a table too wide for that is turned (one measure per row), and a row too wide even turned is
shown whole; in a pipe nothing changes (each row on one line) and a title is never folded."""

from __future__ import annotations

import pytest

from toolkit import output
from toolkit.table_fit import Layout, drawn_width, fit

STEPS = ["step", "waiting", "queued", "sent", "replied", "bounced", "unsubscribed", "failed", "unconfirmed",
         "suppressed", "cancelled"]
ALLOCATION = "eipalloc-0c26259e112a3c444"


def _words_fit(layout: Layout) -> bool:
    assert layout.widths is not None
    columns = zip(layout.header, *layout.rows, strict=True)
    return all(len(word) <= width for column, width in zip(columns, layout.widths, strict=True)
               for cell in column for word in cell.split())


def test_a_table_that_fits_is_left_as_it_is() -> None:
    header, rows = ["slot", "allocation"], [["0", ALLOCATION]]
    assert fit(header, rows, 100) == [Layout(("slot", "allocation"), (("0", ALLOCATION),), None)]
    assert fit(header, rows, None) == fit(header, rows, 100)  # a pipe: no width to fit


def test_text_wraps_at_spaces_and_ids_keep_their_whole_width() -> None:
    detail = "the quota of EIPs in us-east-1 is 5 and the pool needs 7 of them at steady state with parking"
    fix = "raise Service Quotas ec2/L-0263D0A3 (EC2-VPC Elastic IPs) in us-east-1 (now 5) to at least 6"
    [layout] = fit(["host", "allocation", "detail", "fix"], [["sender-1", ALLOCATION, detail, fix]], 100)
    assert layout.widths is not None and drawn_width(layout.widths) == 100
    assert layout.widths[:2] == (len("sender-1"), len(ALLOCATION))  # the ids: their own width, not one less
    assert _words_fit(layout)
    assert layout.widths[2] >= layout.widths[3]  # the spare columns went to the text that wraps most


def test_a_table_too_wide_for_its_words_is_turned_one_measure_per_row() -> None:
    rows = [[str(step), *(str(step * n) for n in range(10))] for step in (1, 2, 3)]
    [layout] = fit(STEPS, rows, 100)  # 117 columns at the narrowest as it was
    assert layout.header == ("step", "1", "2", "3")
    assert layout.rows[5] == ("unsubscribed", "5", "10", "15")
    assert drawn_width([max(len(cell) for cell in column)
                        for column in zip(layout.header, *layout.rows, strict=True)]) <= 100


def test_a_table_too_wide_with_rules_drops_them_before_it_is_turned() -> None:
    header = ["slot", "state", "private ip", "public ip", "allocation", "used/budget", "live leases", "gen"]
    rows = [[str(n), "retiring", f"10.213.168.{n}", f"198.51.100.{200 + n}", f"{ALLOCATION[:-1]}{n}", "1/15", "1",
             "2"] for n in range(5)]
    [layout] = fit(header, rows, 100)  # 109 columns at the narrowest with rules, 99 without
    assert (layout.header, layout.ruled) == (tuple(header), False)
    assert layout.widths is not None and drawn_width(layout.widths, ruled=False) == 100 and _words_fit(layout)
    [wider] = fit(header, rows, 120)
    assert wider.ruled and wider.widths is None  # at 120 it fits as it is


def test_turned_tables_take_as_many_rows_as_fit_and_keep_every_row_once() -> None:
    rows = [[str(step), *(f"{step:02d}{n}0000" for n in range(10))] for step in range(1, 13)]
    layouts = fit(STEPS, rows, 100)
    assert [layout.header[1:] for layout in layouts] == [tuple(str(n) for n in range(1, 9)), ("9", "10", "11", "12")]
    for layout in layouts:
        assert layout.ruled and [row[0] for row in layout.rows] == STEPS[1:]
        widths = layout.widths or [max(len(cell) for cell in column)
                                   for column in zip(layout.header, *layout.rows, strict=True)]
        assert drawn_width(widths) <= 100
    assert layouts[1].rows[0] == ("waiting", "0900000", "1000000", "1100000", "1200000")


def test_a_row_too_wide_even_turned_is_shown_whole() -> None:
    url = "postgresql://postgres@/postgres?host=/var/lib/sendhost-embedded-postgres/" + "a" * 32 + "&port=5432"
    header, rows = ["part", "state", "pid", "address"], [["postgres", "up", "3176", url]]
    assert fit(header, rows, 100) == [Layout(tuple(header), (tuple(rows[0]),), None)]


@pytest.mark.parametrize("columns", ["100", "120"])
def test_the_steps_table_on_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                       columns: str) -> None:
    monkeypatch.setattr(output, "terminal_width", lambda stream: int(columns))
    output.emit_table("q1: steps", STEPS, [[1, *range(10)], [2, *range(10)]])
    shown = capsys.readouterr().out
    assert max(len(line) for line in shown.splitlines()) <= int(columns)
    if columns == "100":
        assert "│ unsubscribed │ 5 │ 5 │" in shown.splitlines()
    else:
        assert "┃ step ┃ waiting ┃ queued ┃ sent ┃ replied ┃ bounced ┃ unsubscribed ┃ failed ┃ unconfirmed ┃" \
               " suppressed ┃ cancelled ┃" in shown.splitlines()


def test_a_title_wider_than_its_table_is_one_line_in_a_pipe(capsys: pytest.CaptureFixture[str]) -> None:
    title = "mailboxes, by their own local days (the first and last may be partial) /srv/sendhost/.sendhost"
    output.emit_table(title, ["a", "b"], [(1, 2)])
    assert capsys.readouterr().out.splitlines()[0] == title
