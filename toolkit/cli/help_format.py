"""Command lists in `--help` that show each command's first sentence whole, wrapped, never cut with "...".

Click cuts a command's line in its group's list at the terminal's width; a reader then sees
"Campaigns: sequences of steps declared in a file, sent to..." and must open every command's own help to learn
what it is. The list wraps instead, as the options' help already does.
"""

from __future__ import annotations

import sys
import textwrap

import click


class WholeHelpGroup(click.Group):
    """A group whose command list wraps each command's first sentence instead of cutting it."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=sys.maxsize)))
        if not rows:
            return
        with formatter.section("Commands"):
            # Click's own list would also break `ansible-runner` at its hyphen; a name or an id stays whole.
            indent = " " * formatter.current_indent
            first = max(len(name) for name, _ in rows) + 2
            width = max(formatter.width - formatter.current_indent - first, 30)
            for name, text in rows:
                lines = textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False) or [""]
                formatter.write(f"{indent}{name:<{first}}{lines[0]}\n")
                for line in lines[1:]:
                    formatter.write(f"{indent}{'':<{first}}{line}\n")
