"""Rendering results for people (tables) and programs (JSON); data goes to stdout, everything else to stderr.

Text in a table is data, never markup or terminal control: a `[/]` in a DNS record is shown as written (rich
would parse it as markup), and control characters (an ESC sequence in a TXT record) are shown escaped, so no
record can move the cursor or recolour the terminal. On a terminal tables fit its width; in a pipe or a file
each row stays on one line at its full length, so no token is broken mid-word.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

FORMATS = ("table", "json")
F = TypeVar("F", bound=Callable[..., Any])
# C0 and C1 controls and DEL, except tab and newline (which lay text out rather than command the terminal).
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Narrowest table on a terminal (a narrower one folds cells beyond reading).
MIN_TERMINAL_WIDTH = 100
# In a pipe no line is ever folded: rich lays a table out within this many columns.
PIPE_WIDTH = 100_000


def format_option(*choices: str) -> Callable[[F], F]:
    """The shared `--format` option; falls back to the group-level `sendhost --format`."""
    allowed = choices or FORMATS
    return click.option(
        "--format", "fmt", type=click.Choice(allowed), default=None,
        help=f"Output format ({'|'.join(allowed)}); default: the global --format, else table.",
    )


def printable(text: str) -> str:
    """`text` with every control character but tab and newline shown as an escape (`\\x1b`)."""
    return CONTROL_CHARACTERS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def emit_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]],
               summary: str | None = None) -> None:
    """`rows` under `columns` on stdout, `title` above and `summary` below: fitted to a terminal's width without
    breaking a word (see toolkit.table_fit), each row whole on one line in a pipe or a file."""
    from toolkit.table_fit import fit

    header = [printable(column) for column in columns]
    cells = [["-" if cell is None else printable(str(cell)) for cell in row] for row in rows]
    width = terminal_width(sys.stdout)
    if width is None:
        console = Console(file=sys.stdout, soft_wrap=False, width=PIPE_WIDTH, force_terminal=False)
    else:
        console = Console(file=sys.stdout, soft_wrap=False, width=PIPE_WIDTH)
    if title:  # on a line of its own: a title wider than its table is not folded to the table's width
        click.echo(printable(title))
    for layout in fit(header, cells, width):
        table = Table(show_lines=False) if layout.ruled else Table(box=None, pad_edge=False)
        for index, column in enumerate(layout.header):
            table.add_column(Text(column), overflow="fold",
                             width=None if layout.widths is None else layout.widths[index])
        for row in layout.rows:
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)
    if summary:
        click.echo(printable(summary))


def terminal_width(stream: Any) -> int | None:
    """The width to fit tables in when `stream` is a terminal (its COLUMNS, at least MIN_TERMINAL_WIDTH); None in a
    pipe or a file, where every row stays whole on one line."""
    if not stream.isatty():
        return None
    return max(MIN_TERMINAL_WIDTH, Console().width)
