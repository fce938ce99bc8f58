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
    table = Table(title=Text(printable(title)) if title else None, show_lines=False, title_justify="left")
    for column in columns:
        table.add_column(Text(printable(column)), overflow="fold")
    for row in rows:
        table.add_row(*(Text("-" if cell is None else printable(str(cell))) for cell in row))
    stdout = sys.stdout
    if stdout.isatty():
        console = Console(file=stdout, soft_wrap=False, width=max(MIN_TERMINAL_WIDTH, Console().width))
    else:
        console = Console(file=stdout, soft_wrap=False, width=PIPE_WIDTH, force_terminal=False)
    console.print(table)
    if summary:
        click.echo(printable(summary))
