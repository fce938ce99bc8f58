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
        skipped = [f"{c.name} ({c.note})" if c.note else c.name for c in report.checks if c.status == "skip"]
        if skipped:
            lines.append(printable("  skipped: " + "; ".join(skipped)))
    totals = summary(reports)
    waived = f", {totals['waived']} waived" if totals["waived"] else ""
    lines.append(f"{totals['domains']} domain(s), {totals['errors']} error(s), {totals['warnings']} warning(s){waived}")
    return "\n".join(lines)
