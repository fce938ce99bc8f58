"""The ledger's SQL files, read from the package: the named queries (`sql/queries.sql`, `sql/feedback.sql`,
`sql/versions.sql`), loaded once, and the schema and its migrations."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME_RE = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)
_MIGRATION_RE = re.compile(r"^(\d+)_(\d+)_[a-z0-9_]+\.sql$")
# The named-query files, one per concern: the ledger's rows (and its metrics), feedback, schema versions, campaigns,
# the provider's spam rate, placement tests.
QUERY_FILES = ("queries.sql", "feedback.sql", "versions.sql", "campaigns.sql", "postmaster.sql", "placement.sql")


def sql_text(name: str) -> str:
    """A file under sender/sql (e.g. "schema.sql", "migrations/2_1_feedback.sql")."""
    return resources.files("sender").joinpath("sql", *name.split("/")).read_text(encoding="utf-8")


def named_queries(text: str) -> dict[str, str]:
    """{name: statement} of a named-query file; ValueError on a name given twice."""
    parts = _NAME_RE.split(text)
    found: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in found:
            raise ValueError(f"query {name!r} is named twice")
        found[name] = body.strip()
    return found


@cache
def queries() -> dict[str, str]:
    """{name: statement} of every named-query file; a name is unique across them."""
    merged: dict[str, str] = {}
    for file in QUERY_FILES:
        for name, body in named_queries(sql_text(file)).items():
            if name in merged:
                raise ValueError(f"query {name!r} of {file} is named in another file too")
            merged[name] = body
    return merged


def query(name: str) -> str:
    return queries()[name]


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, text) of each file under sql/migrations, in order: the version-1 baseline
    (1_0_baseline.sql, never applied by migrate) and every migration above it."""
    folder = resources.files("sender").joinpath("sql", "migrations")
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION_RE.match(entry.name)
        if match:
            found.append((int(match.group(1)), int(match.group(2)), entry.name, entry.read_text(encoding="utf-8")))
    return [(version, name, text) for version, _n, name, text in sorted(found)]
