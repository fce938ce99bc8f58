"""The named SQL queries of `sql/queries.sql`, loaded once from the package."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME_RE = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)


def sql_text(name: str) -> str:
    """A file under sender/sql (e.g. "schema.sql")."""
    return resources.files("sender").joinpath("sql", name).read_text(encoding="utf-8")


@cache
def queries() -> dict[str, str]:
    """{name: statement} from queries.sql."""
    text = sql_text("queries.sql")
    parts = _NAME_RE.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def query(name: str) -> str:
    return queries()[name]


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, text) of each migration above the baseline, in order."""
    folder = resources.files("sender").joinpath("sql", "migrations")
    found = []
    for entry in folder.iterdir():
        match = re.match(r"^(\d+)_(\d+)_[a-z0-9_]+\.sql$", entry.name)
        if match:
            found.append((int(match.group(1)), int(match.group(2)), entry.name, entry.read_text(encoding="utf-8")))
    return [(version, name, text) for version, _n, name, text in sorted(found)]
