"""JSON report, schema version 2 (a contract: add fields only with a new schema number).

2 added each finding's `subject` and `waived`, each check's `note` (why it was skipped) and `summary.waived`."""

from __future__ import annotations

import json
from typing import Any

from dns_audit.findings import DomainReport, Finding

SCHEMA_VERSION = 2


def finding_dict(item: Finding) -> dict[str, Any]:
    location = {"file": item.location.file, "line": item.location.line} if item.location else None
    return {"code": item.code, "severity": item.severity, "message": item.message, "evidence": item.evidence,
            "remediation": item.remediation, "reference": item.reference, "location": location,
            "subject": item.subject, "waived": item.waived}


def summary(reports: list[DomainReport]) -> dict[str, int]:
    findings = [f for r in reports for f in r.findings if not f.waived]
    return {"domains": len(reports), "errors": sum(f.severity == "error" for f in findings),
            "warnings": sum(f.severity == "warning" for f in findings),
            "waived": sum(f.waived for r in reports for f in r.findings)}


def report_dict(reports: list[DomainReport]) -> dict[str, Any]:
    return {
        "schema": SCHEMA_VERSION,
        "domains": [{"domain": r.domain, "findings": [finding_dict(f) for f in r.findings],
                     "checks": [{"name": c.name, "status": c.status, "note": c.note} for c in r.checks]}
                    for r in reports],
        "summary": summary(reports),
    }


def render_json(reports: list[DomainReport], fail_on: str = "error") -> str:
    return json.dumps(report_dict(reports), indent=2, ensure_ascii=False)
