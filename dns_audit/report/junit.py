"""JUnit XML: one testsuite per domain, one testcase per domain x check, failures at or above --fail-on."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from dns_audit.findings import Check, DomainReport, at_or_above


def render_junit(reports: list[DomainReport], fail_on: str = "error") -> str:
    root = ET.Element("testsuites", name="sendhost dns audit")
    total_tests = total_failures = 0
    for report in reports:
        suite = ET.SubElement(root, "testsuite", name=report.domain)
        failures = skipped = 0
        names = [c.name for c in report.checks]
        # findings of no check (audit.no_data) get a testcase of their own, so the gate's failures all show
        orphans = dict.fromkeys(f.area for f in report.findings
                                if f.area not in names and not (f.area == "audit" and "deadline" in names))
        cases = [*report.checks, *(Check(area, "fail") for area in orphans)]
        for check in cases:
            case = ET.SubElement(suite, "testcase", classname=f"dns.{report.domain}", name=check.name)
            found = [f for f in report.findings if f.area == check.name or (check.name == "deadline"
                                                                             and f.area == "audit")]
            failing = [f for f in found if at_or_above(f, fail_on)]
            if failing:  # a required check that was skipped fails, with its `<check>.skipped` finding
                failures += 1
                failure = ET.SubElement(case, "failure", message="; ".join(f.code for f in failing),
                                        type=failing[0].severity)
                failure.text = "\n".join(
                    f"[{f.severity}] {f.code}: {f.message}\n  evidence: {f.evidence}\n  fix: {f.remediation}"
                    + (f"\n  at: {f.location}" if f.location else "") for f in failing)
            elif check.status == "skip":
                ET.SubElement(case, "skipped", message=check.note or "not run for this audit")
                skipped += 1
            others = [f for f in found if f not in failing]
            if others:
                ET.SubElement(case, "system-out").text = "\n".join(
                    f"[{f.severity}] {f.code}: {f.message}" for f in others)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(failures))
        suite.set("skipped", str(skipped))
        suite.set("errors", "0")
        total_tests += len(cases)
        total_failures += failures
    root.set("tests", str(total_tests))
    root.set("failures", str(total_failures))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")
