"""`--help` shows each command's first sentence whole, and the README's command overview names every command."""

from __future__ import annotations

import re

import click
import pytest

from tests.conftest import REPO_ROOT
from toolkit.cli import cli


def groups() -> list[tuple[str, click.Group]]:
    context = click.Context(cli)
    found: list[tuple[str, click.Group]] = [("", cli)]
    for name in cli.list_commands(context):
        command = cli.get_command(context, name)
        if isinstance(command, click.Group):
            found.append((name, command))
    return found


def commands_section(group: click.Group, name: str, width: int) -> str:
    context = click.Context(group, info_name=f"sendhost {name}".strip(), terminal_width=width, max_content_width=width)
    text = group.get_help(context)
    return text.split("Commands:\n", 1)[1].split("\n\n", 1)[0]


@pytest.mark.parametrize("width", [80, 100, 120])
@pytest.mark.parametrize(("name", "group"), groups(), ids=lambda value: value if isinstance(value, str) else "")
def test_every_command_line_in_help_is_its_first_sentence_whole(name: str, group: click.Group, width: int) -> None:
    section = commands_section(group, name, width)
    context = click.Context(group)
    listed = dict(re.findall(r"^  (\S+) +(.*(?:\n {4,}\S.*)*)", section, re.MULTILINE))
    assert sorted(listed) == sorted(c for c in group.list_commands(context) if not group.get_command(context, c).hidden)
    for command_name, text in listed.items():
        command = group.get_command(context, command_name)
        assert command is not None
        assert " ".join(text.split()) == " ".join(command.get_short_help_str(limit=10_000).split())
        assert not text.rstrip().endswith("..."), f"{name} {command_name}: {text!r}"
    for line in section.splitlines():
        assert len(line) <= width, line
        assert not re.search(r"\w-$", line), f"a word broken at its hyphen: {line!r}"


def test_the_readmes_command_overview_names_every_command() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    overview = readme.split("## Command overview", 1)[1].split("\n## ", 1)[0]
    named: dict[str, set[str]] = {}
    for cell in re.findall(r"^\| `sendhost ([^`]+)`", overview, re.MULTILINE):
        group, _, rest = cell.replace("\\|", "|").partition(" ")
        named.setdefault(group, set()).update(re.findall(r"[a-z][a-z-]*", rest.split(" ")[0]))
    missing = []
    for name, group in groups()[1:]:
        context = click.Context(group)
        for command in group.list_commands(context):
            if command not in named.get(name, set()):
                missing.append(f"sendhost {name} {command}")
    context = click.Context(cli)
    missing += [f"sendhost {name}" for name in cli.list_commands(context) if name not in named]
    assert missing == []
