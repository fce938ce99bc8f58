"""Report formats for audit results: table, json (schema 1), junit, sarif, github annotations."""

from __future__ import annotations

from collections.abc import Callable

from dns_audit.findings import DomainReport
from dns_audit.report.github import render_github
from dns_audit.report.json import render_json
from dns_audit.report.junit import render_junit
from dns_audit.report.sarif import render_sarif
from dns_audit.report.table import render_table

FORMATS = ("table", "json", "junit", "sarif", "github")

RENDERERS: dict[str, Callable[[list[DomainReport], str], str]] = {
    "table": render_table,
    "json": render_json,
    "junit": render_junit,
    "sarif": render_sarif,
    "github": render_github,
}


def render(reports: list[DomainReport], fmt: str, fail_on: str = "error") -> str:
    """The whole report as text in `fmt`; `fail_on` decides which findings count as failures (junit/sarif)."""
    return RENDERERS[fmt](reports, fail_on)
