"""SARIF 2.1.0 for code-scanning UIs: one rule per finding code, zone-file locations when auditing zone files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dns_audit.findings import CATALOG, DomainReport, Finding

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def _uri(path: str) -> str:
    candidate = Path(path)
    if candidate.is_absolute():
        try:
            return candidate.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return candidate.as_uri()
    return candidate.as_posix()


def _result(domain: str, item: Finding, rule_index: dict[str, int]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": item.code,
        "ruleIndex": rule_index[item.code],
        "level": LEVELS[item.severity],
        "message": {"text": f"{domain}: {item.message}" + (f" (evidence: {item.evidence})" if item.evidence else "")},
        "partialFingerprints": {"domainCode": f"{domain}/{item.code}/{item.message}"},
    }
    if item.location:
        result["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": _uri(item.location.file)},
                                                     "region": {"startLine": item.location.line}}}]
    else:
        result["locations"] = [{"logicalLocations": [{"name": domain, "kind": "domain"}]}]
    return result


def render_sarif(reports: list[DomainReport], fail_on: str = "error") -> str:
    codes = sorted({f.code for r in reports for f in r.findings})
    rule_index = {code: i for i, code in enumerate(codes)}
    rules = [{"id": code, "shortDescription": {"text": code},
              "help": {"text": CATALOG[code].remediation},
              "properties": {"reference": CATALOG[code].reference},
              "defaultConfiguration": {"level": LEVELS[CATALOG[code].severity]}} for code in codes]
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "sendhost dns audit", "rules": rules}},
            "results": [_result(r.domain, f, rule_index) for r in reports for f in r.findings],
        }],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)
