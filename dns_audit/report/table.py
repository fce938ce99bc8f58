"""Plain-text table for people: one line per finding, grouped by domain, then a summary line."""

from __future__ import annotations

from dns_audit.findings import DomainReport, at_or_above
from dns_audit.report.json import summary
from dns_audit.report.text import printable


def render_table(reports: list[DomainReport], fail_on: str = "error") -> str:
    lines = []
    for report in reports:
        failing = [c.name for c in report.checks if c.status == "fail"]
        # a required check that was skipped (its `<check>.skipped` error) fails the domain too
        failing += sorted({f.area for f in report.findings if at_or_above(f, "error") and f.area not in failing})
        state = "FAIL " + ",".join(failing) if failing else "ok"
        lines.append(f"{report.domain}  [{state}]")
        if not report.findings:
            lines.append("  no findings")
        for item in report.findings:
            where = f"  ({item.location})" if item.location else ""
            severity = "waived" if item.waived else item.severity
            lines.append(printable(f"  {severity:<7} {item.code:<22} {item.message}{where}"))
            if item.evidence:
                lines.append(printable(f"  {'':<7} {'':<22} evidence: {item.evidence}"))
            lines.append(f"  {'':<7} {'':<22} fix: {item.remediation}")
        if any(c.status == "skip" for c in report.checks):
            lines.append(printable("  skipped: " + _skipped(report)))
    totals = summary(reports)
    waived = f", {totals['waived']} waived" if totals["waived"] else ""
    lines.append(f"{totals['domains']} domain(s), {totals['errors']} error(s), {totals['warnings']} warning(s){waived}")
    return "\n".join(lines)


def _skipped(report: DomainReport) -> str:
    """The skipped checks grouped by reason, each reason said once per domain: `every check` when all share it,
    and no reason in brackets when a finding's message already gives it (audit.no_data)."""
    by_note: dict[str, list[str]] = {}
    for check in report.checks:
        if check.status == "skip":
            by_note.setdefault(check.note, []).append(check.name)
    parts = []
    for note, names in by_note.items():
        said = not note or any(note in f.message for f in report.findings)
        which = "every check" if len(names) == len(report.checks) else ", ".join(names)
        parts.append(which if said else f"{which} ({note})")
    return "; ".join(parts)
