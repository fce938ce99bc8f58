"""JUnit XML: one testsuite per domain, one testcase per domain x check, failures at or above --fail-on."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from dns_audit.findings import DomainReport, at_or_above


def render_junit(reports: list[DomainReport], fail_on: str = "error") -> str:
    root = ET.Element("testsuites", name="sendhost dns audit")
    total_tests = total_failures = 0
    for report in reports:
        suite = ET.SubElement(root, "testsuite", name=report.domain)
        failures = skipped = 0
        for check in report.checks:
            case = ET.SubElement(suite, "testcase", classname=f"dns.{report.domain}", name=check.name)
            found = [f for f in report.findings if f.area == check.name or (check.name == "deadline"
                                                                             and f.area == "audit")]
            failing = [f for f in found if at_or_above(f, fail_on)]
            if check.status == "skip":
                ET.SubElement(case, "skipped", message=check.note or "not run for this audit")
                skipped += 1
            elif failing:
                failures += 1
                failure = ET.SubElement(case, "failure", message="; ".join(f.code for f in failing),
                                        type=failing[0].severity)
                failure.text = "\n".join(
                    f"[{f.severity}] {f.code}: {f.message}\n  evidence: {f.evidence}\n  fix: {f.remediation}"
                    + (f"\n  at: {f.location}" if f.location else "") for f in failing)
            others = [f for f in found if f not in failing]
            if others:
                ET.SubElement(case, "system-out").text = "\n".join(
                    f"[{f.severity}] {f.code}: {f.message}" for f in others)
        suite.set("tests", str(len(report.checks)))
        suite.set("failures", str(failures))
        suite.set("skipped", str(skipped))
        suite.set("errors", "0")
        total_tests += len(report.checks)
        total_failures += failures
    root.set("tests", str(total_tests))
    root.set("failures", str(total_failures))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")
