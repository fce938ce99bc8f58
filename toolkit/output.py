"""Rendering results for people (tables) and programs (JSON); data goes to stdout, everything else to stderr."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

FORMATS = ("table", "json")
F = TypeVar("F", bound=Callable[..., Any])


def format_option(*choices: str) -> Callable[[F], F]:
    """The shared `--format` option; falls back to the group-level `sendhost --format`."""
    allowed = choices or FORMATS
    return click.option(
        "--format", "fmt", type=click.Choice(allowed), default=None,
        help=f"Output format ({'|'.join(allowed)}); default: the global --format, else table.",
    )


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def emit_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]],
               summary: str | None = None) -> None:
    table = Table(title=title, show_lines=False, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("-" if cell is None else str(cell) for cell in row))
    console = Console(soft_wrap=False, width=max(100, Console().width))
    console.print(table)
    if summary:
        click.echo(summary)
