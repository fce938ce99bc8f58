"""SARIF 2.1.0 for code-scanning UIs: one rule per finding code, zone-file locations when auditing zone files."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from dns_audit.findings import CATALOG, DomainReport, Finding
from dns_audit.report.paths import repo_relative

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def fingerprint(domain: str, item: Finding) -> str:
    """An alert's identity: domain, code and subject only (no counts, no message text), so an alert stays the
    same alert when a lookup count or a wording changes."""
    return hashlib.sha256(f"{domain}/{item.code}/{item.subject}".encode()).hexdigest()[:32]


def _result(domain: str, item: Finding, rule_index: dict[str, int]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": item.code,
        "ruleIndex": rule_index[item.code],
        "level": LEVELS[item.severity],
        "message": {"text": f"{domain}: {item.message}" + (f" (evidence: {item.evidence})" if item.evidence else "")},
        "partialFingerprints": {"sendhostFinding/v1": fingerprint(domain, item)},
    }
    logical = {"logicalLocations": [{"name": domain, "kind": "domain"}]}
    if item.location:
        result["locations"] = [{"physicalLocation": {
            "artifactLocation": {"uri": repo_relative(item.location.file), "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": max(1, item.location.line)}}, **logical}]
    else:
        result["locations"] = [logical]
    if item.waived:
        result["suppressions"] = [{"kind": "external", "justification": "waived with --waive"}]
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
