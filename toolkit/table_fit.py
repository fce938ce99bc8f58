"""Laying a table out in a terminal's width without breaking a word: pure arithmetic, no rendering.

A cell may wrap only at its spaces, so no column is ever narrower than its longest word (an allocation id, an
address, an IP, a header such as `unsubscribed`). When every column fits at its longest line, the table is left as
it is; when only their longest words fit, each column gets its longest word's width and the rest of the terminal
goes to the columns whose text would wrap most. When not even that fits, the table drops its rules (columns two
spaces apart, as `ps` prints them), and when that is still too wide it is turned: one measure per row, one of the
original rows per column, as many rows to a table as fit. A row too wide even alone is shown whole, as in a pipe,
wider than the terminal, rather than cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len

# What a ruled table draws beyond its cells' text: a border before each column and one after the last, and one
# space of padding on either side of each cell. An unruled one: two spaces between columns, nothing at the edges.
BORDER_WIDTH = 1
PADDING_WIDTH = 2


@dataclass(frozen=True)
class Layout:
    """One table to draw: its header, its rows, each column's text width (None: each at its longest line), and
    whether it is drawn with rules (borders) or only with spaces between its columns."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    widths: tuple[int, ...] | None
    ruled: bool = True


def drawn_width(text_widths: Sequence[int], ruled: bool = True) -> int:
    """The width of a table whose columns' text is `text_widths` wide, borders and padding included."""
    if not ruled:
        return sum(text_widths) + PADDING_WIDTH * (len(text_widths) - 1)
    return sum(text_widths) + (BORDER_WIDTH + PADDING_WIDTH) * len(text_widths) + BORDER_WIDTH


def longest_word(text: str) -> int:
    return max((cell_len(word) for word in text.split()), default=1)


def longest_line(text: str) -> int:
    return max((cell_len(line) for line in text.splitlines()), default=1)


def fit(header: Sequence[str], rows: Sequence[Sequence[str]], width: int | None) -> list[Layout]:
    """The tables that show `header` and `rows` within `width` columns (None: no limit) without breaking a word."""
    whole = Layout(tuple(header), tuple(tuple(row) for row in rows), None)
    if width is None:
        return [whole]
    fitted = _fit_columns(whole, width) or _fit_columns(whole, width, ruled=False)
    if fitted is not None:
        return [fitted]
    turned = _turned(whole, width)
    return turned if turned is not None else [whole]


def _fit_columns(table: Layout, width: int, ruled: bool = True) -> Layout | None:
    """`table` with column widths that fit `width` and no word broken, or None when its words alone are too wide."""
    columns = list(zip(table.header, *table.rows, strict=True))
    widest = [max(longest_line(cell) for cell in column) for column in columns]
    if drawn_width(widest, ruled) <= width:
        return Layout(table.header, table.rows, None, ruled)
    narrowest = [max(longest_word(cell) for cell in column) for column in columns]
    spare = width - drawn_width(narrowest, ruled)
    if spare < 0:
        return None
    widths = list(narrowest)
    while spare:  # one column at a time to the column whose text still wraps most (the leftmost on a tie)
        need = [most - now for most, now in zip(widest, widths, strict=True)]
        neediest = max(range(len(need)), key=lambda index: (need[index], -index))
        if need[neediest] <= 0:
            break
        widths[neediest] += 1
        spare -= 1
    return Layout(table.header, table.rows, tuple(widths), ruled)


def _turned(table: Layout, width: int) -> list[Layout] | None:
    """`table` turned (its first column's cells become the header), as many rows to a table as fit `width`; None
    when one row alone does not fit."""
    measures = table.header[1:]
    if not measures or not table.rows:
        return None
    layouts: list[Layout] = []
    chunk: list[tuple[str, ...]] = []
    drawn: Layout | None = None
    for row in table.rows:
        grown = _fit_columns(_turn(table.header[0], measures, [*chunk, row]), width)
        if grown is not None:
            chunk, drawn = [*chunk, row], grown
            continue
        if drawn is None:  # this row alone is too wide
            return None
        layouts.append(drawn)
        chunk, drawn = [row], _fit_columns(_turn(table.header[0], measures, [row]), width)
        if drawn is None:
            return None
    assert drawn is not None  # there was a row, and it fitted
    layouts.append(drawn)
    return layouts


def _turn(key: str, measures: Sequence[str], rows: Sequence[Sequence[str]]) -> Layout:
    return Layout((key, *(row[0] for row in rows)),
                  tuple((measure, *(row[index] for row in rows)) for index, measure in enumerate(measures, 1)), None)
