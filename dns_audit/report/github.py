"""GitHub Actions workflow commands: one `::error`/`::warning`/`::notice` annotation per finding."""

from __future__ import annotations

from dns_audit.findings import DomainReport
from dns_audit.report.json import summary
from dns_audit.report.paths import repo_relative

COMMANDS = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(reports: list[DomainReport], fail_on: str = "error") -> str:
    lines = []
    for report in reports:
        for item in report.findings:
            if item.waived:
                continue
            props = [f"title={_property(f'{report.domain}: {item.code}')}"]
            if item.location:
                props = [f"file={_property(repo_relative(item.location.file))}", f"line={item.location.line}",
                         *props]
            text = f"{item.message}. Fix: {item.remediation}"
            lines.append(f"::{COMMANDS[item.severity]} {','.join(props)}::{_data(text)}")
    totals = summary(reports)
    lines.append(f"{totals['domains']} domain(s), {totals['errors']} error(s), {totals['warnings']} warning(s)")
    return "\n".join(lines)
