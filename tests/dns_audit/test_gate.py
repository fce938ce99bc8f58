"""A check that could not run is not a pass, an audit says what it looked at, and the sending model decides
which checks apply to the pool's addresses (issue 16)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dns_audit.audit import AuditOptions, DomainTarget, run_audit
from dns_audit.findings import DomainReport
from dns_audit.zonefile import ZoneResolver
from simulation.dns_check import audit_zones, example_zone_dir
from tests.conftest import REPO_ROOT, run_cli
from tests.dns_audit import zones as z
from tests.dns_audit.conftest import Audit, codes, zone_dir_from
from tests.dns_audit.test_cli import one_sender_inventory
from tests.support.nsd import NsdServer
from toolkit.inventory import load_inventory

Run = Callable[..., Any]
OFFLINE = AuditOptions(ip_zones=(), domain_zones=(), tls=None)


def statuses(report: DomainReport) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.note) for c in report.checks}


def offline(zones: Path, target: DomainTarget, profile: str = "gmail-bulk") -> DomainReport:
    options = AuditOptions(profile=profile, ip_zones=(), domain_zones=(), tls=None)
    [report] = run_audit(ZoneResolver(zones), [target], options)
    return report


# --- a check that could not run is not a pass ---------------------------------------------------------------

def test_gmail_bulk_without_a_dkim_selector_is_an_error_not_a_skip(audit: Audit) -> None:
    report = audit("clean.test", selectors=())
    assert codes(report) == {"dkim.no_selector"}
    assert statuses(report)["dkim"][0] == "fail"


def test_baseline_without_a_dkim_selector_skips_dkim_saying_why_and_fails_the_gate(audit: Audit) -> None:
    report = audit("clean.test", selectors=(), profile="baseline")
    status, note = statuses(report)["dkim"]
    assert status == "skip" and "no DKIM selector" in note
    assert codes(report) == {"dkim.skipped"}  # dkim is required by every profile: a skip fails the gate


def test_ptr_with_no_address_is_a_skip_not_a_pass(audit: Audit) -> None:
    status, note = statuses(audit("clean.test"))["ptr"]
    assert status == "skip" and "no sending IPs" in note


def test_ptr_and_dnsbl_offline_are_skips_and_a_required_ptr_fails_the_gate(nsd: NsdServer, tmp_path: Path) -> None:
    zones = zone_dir_from(nsd, tmp_path, ["clean.test", "shared.test"])  # no reverse zone
    report = offline(zones, DomainTarget("clean.test", (z.SELECTOR,), (z.CLEAN_IP,), sending_mode="direct"))
    assert statuses(report)["ptr"] == ("skip", f"reverse DNS of {z.CLEAN_IP} is not in the zone files")
    status, note = statuses(report)["dnsbl"]
    assert status == "skip" and "no blocklist" in note
    assert statuses(report)["tls"][0] == "skip"
    assert codes(report) == {"ptr.skipped"}  # direct mode requires PTR of its sending IPs


def test_a_waived_skip_passes_the_gate_and_the_waiver_is_printed(nsd: NsdServer, tmp_path: Path) -> None:
    zones = zone_dir_from(nsd, tmp_path, ["clean.test", "shared.test"])
    args = ("dns", "audit", "clean.test", "--zone-dir", str(zones), "--selector", z.SELECTOR, "--ip", z.CLEAN_IP,
            "--sending-mode", "direct")
    gated = run_cli(*args)
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert "ptr.skipped" in gated.stdout
    waived = run_cli(*args, "--waive", "ptr.skipped")
    assert waived.returncode == 0, waived.stdout + waived.stderr
    assert "waived: ptr.skipped (1 finding(s) not counted)" in waived.stderr
    assert "waived  ptr.skipped" in waived.stdout and "1 waived" in waived.stdout


def test_an_unknown_waiver_code_is_exit_2(tmp_path: Path) -> None:
    result = run_cli("dns", "audit", "clean.test", "--nameserver", "127.0.0.1:9", "--waive", "ptr.nope")
    assert result.returncode == 2
    assert result.stderr.startswith("error: --waive ptr.nope: no such finding code")


# --- an audit says what it looked at ---------------------------------------------------------------------------

def test_a_domain_without_a_zone_file_is_exit_2_with_a_whole_report_on_stdout(nsd: NsdServer,
                                                                               tmp_path: Path) -> None:
    zones = zone_dir_from(nsd, tmp_path, ["clean.test"])
    result = run_cli("dns", "audit", "nothere.com", "--zone-dir", str(zones), "--format", "sarif")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: no data for nothere.com in the zone files in {zones}")
    # a CI step uploads this file: it must be SARIF holding the finding, not empty
    [run] = json.loads(result.stdout)["runs"]
    assert [(r["ruleId"], r["level"]) for r in run["results"]] == [("audit.no_data", "error")]
    assert "nothere.com" in run["results"][0]["message"]["text"]
    table = run_cli("dns", "audit", "nothere.com", "--zone-dir", str(zones))
    assert table.returncode == 2
    assert "nothere.com  [FAIL audit]" in table.stdout and "audit.no_data" in table.stdout


def test_the_reason_a_domain_has_no_data_is_said_once(nsd: NsdServer, tmp_path: Path) -> None:
    zones = zone_dir_from(nsd, tmp_path, ["clean.test", "shared.test"])
    result = run_cli("dns", "audit", "clean.test", "nothere.com", "--zone-dir", str(zones), "--selector", z.SELECTOR)
    assert result.returncode == 1, result.stderr
    block = result.stdout.split("nothere.com  [FAIL audit]", 1)[1]
    assert block.count(f"no data for nothere.com in the zone files in {zones}") == 1, block
    assert "  skipped: every check\n" in block


def test_inside_a_larger_run_a_domain_without_data_has_every_check_skipped(nsd: NsdServer, tmp_path: Path) -> None:
    zones = zone_dir_from(nsd, tmp_path, ["clean.test", "shared.test"])
    result = run_cli("dns", "audit", "clean.test", "nothere.com", "--zone-dir", str(zones), "--selector", z.SELECTOR,
                     "--format", "json")
    assert result.returncode == 1, result.stderr
    clean, nothere = json.loads(result.stdout)["domains"]
    assert [f["code"] for f in clean["findings"]] == []
    assert [f["code"] for f in nothere["findings"]] == ["audit.no_data"]
    assert {c["status"] for c in nothere["checks"]} == {"skip"}
    assert all("no data for nothere.com" in c["note"] for c in nothere["checks"])


def test_an_include_outside_the_zone_files_is_not_followed_never_not_authorized(nsd: NsdServer,
                                                                               tmp_path: Path) -> None:
    zones = zone_dir_from(nsd, tmp_path, ["clean.test", "0.0.127.in-addr.arpa"])  # _spf.shared.test is outside
    report = offline(zones, DomainTarget("clean.test", (z.SELECTOR,), ("192.0.2.99",), sending_mode="direct"))
    spf = {f.code for f in report.findings if f.area == "spf"}
    assert spf == {"spf.not_followed"}, [f.message for f in report.findings]
    assert all(f.severity == "info" for f in report.findings if f.area == "spf")


def test_a_stray_inventory_in_the_working_directory_does_not_replace_the_command_line(nsd: NsdServer,
                                                                                     tmp_path: Path) -> None:
    zones = zone_dir_from(nsd, tmp_path, ["clean.test", "shared.test"])
    one_sender_inventory(tmp_path, "      - name: other.test\n", "10.0.1.10")  # ./inventory.yml
    result = run_cli("dns", "audit", "clean.test", "--zone-dir", str(zones), "--selector", z.SELECTOR,
                     "--format", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [d["domain"] for d in json.loads(result.stdout)["domains"]] == ["clean.test"]
    assert "inventory" not in result.stderr


def test_selector_with_inventory_domains_is_refused(tmp_path: Path) -> None:
    inventory = one_sender_inventory(tmp_path, "      - name: clean.test\n        dkim_selectors: [s1]\n", "10.0.1.10")
    result = run_cli("dns", "audit", "--inventory", str(inventory), "--selector", "s2026",
                     "--nameserver", "127.0.0.1:9")
    assert result.returncode == 2
    assert "--selector names the DKIM selectors of domains given without an inventory" in result.stderr


def test_the_documented_ci_step_passes_on_the_example_and_agrees_with_simulate(tmp_path: Path) -> None:
    zones = example_zone_dir()
    inventory = REPO_ROOT / "inventory.example.yml"
    # docs/dns-audit.md: `sendhost dns audit --inventory inventory.yml --zone-dir dns/zones --format github`
    github = run_cli("dns", "audit", "--inventory", str(inventory), "--zone-dir", str(zones), "--format", "github")
    assert github.returncode == 0, github.stdout + github.stderr
    assert not [line for line in github.stdout.splitlines() if line.startswith("::error")]
    assert "not audited as sending IPs (private addresses receivers never see): 10.0.1.10, 10.0.2.10" in github.stderr
    as_json = run_cli("dns", "audit", "--inventory", str(inventory), "--zone-dir", str(zones), "--format", "json")
    cli_codes = {d["domain"]: sorted(f["code"] for f in d["findings"]) for d in json.loads(as_json.stdout)["domains"]}
    loaded = load_inventory(inventory)
    simulated = {r.domain: sorted(f.code for f in r.findings)
                 for r in audit_zones(zones, loaded.domains, ("198.18.0.7",))}
    assert cli_codes == simulated
    assert "dkim.short_key" in cli_codes["example.com"]


# --- audit by sending model ----------------------------------------------------------------------------------------

def test_submission_addresses_need_no_spf_entry_but_are_screened_and_their_ptr_reported(audit: Audit) -> None:
    submission = audit("spf-ip.test", ips=(z.CLEAN_IP,), mode="submission")
    assert codes(submission) == {"ptr.submission"}
    [ptr] = submission.findings
    assert ptr.severity == "info" and z.CLEAN_IP in ptr.message
    listed = audit("spf-ip.test", ips=(z.LISTED_IP,), mode="submission")
    assert codes(listed) == {"ptr.submission", "dnsbl.ip_listed"}
    direct = audit("spf-ip.test", ips=(z.CLEAN_IP,), mode="direct")
    assert codes(direct) == {"spf.ip_not_authorized"}


def test_a_missing_ptr_of_a_submission_address_is_information_only(audit: Audit) -> None:
    report = audit("ptr.test", ips=(z.NO_PTR_IP,), mode="submission")
    assert [(f.code, f.severity) for f in report.findings] == [("ptr.submission", "info")]
    assert "no reverse DNS" in report.findings[0].message


def test_expected_spf_includes_are_enforced(audit: Audit) -> None:
    assert codes(audit("clean.test", spf_includes=("_spf.shared.test",))) == set()
    report = audit("clean.test", spf_includes=("_spf.provider.test",))
    assert codes(report) == {"spf.include_missing"}
    assert report.findings[0].severity == "error"


def test_the_dmarc_floor_is_enforced(audit: Audit) -> None:
    assert codes(audit("dmarc-none.test", dmarc_floor="quarantine")) == {"dmarc.below_floor", "dmarc.policy_none"}
    assert codes(audit("clean.test", dmarc_floor="reject")) == set()


def test_inventory_pool_addresses_by_sending_mode(nsd: NsdServer, mail: Any, tmp_path: Path,
                                                 redis_url: str) -> None:
    from ippool.pool import Pool

    pool = Pool.from_url(redis_url)
    pool.register_host("sender-1", "10.0.1.10")
    pool.put_address("sender-1", 0, private_ip="10.0.1.11", public_ip=z.CLEAN_IP, allocation_id="eipalloc-1")
    pool.close()
    for mode, expected in (("submission", ["ptr.submission"]), ("direct", ["spf.ip_not_authorized"])):
        inventory = one_sender_inventory(tmp_path, f"""      - name: spf-ip.test
        dkim_selectors: [{z.SELECTOR}]
        sending_mode: {mode}
""", "10.0.1.10", dnsbl=z.DNSBL_ZONE)
        result = run_cli("dns", "audit", "--inventory", str(inventory), "--nameserver", nsd.address, "--smtp-port",
                         str(mail.port), "--ca-file", mail.ca_file, "--timeout", "1", "--format", "json",
                         env={"REDIS_URL": redis_url})
        [domain] = json.loads(result.stdout)["domains"]
        assert [f["code"] for f in domain["findings"]] == expected, (mode, result.stderr)
        assert {c["name"]: c["status"] for c in domain["checks"]}["dnsbl"] == "pass"  # the EIP was screened
        assert "10.0.1.10" not in result.stdout  # the private primary is never audited as a sending IP


def test_junit_and_table_show_a_skipped_required_check_as_failing(nsd: NsdServer, tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    zones = zone_dir_from(nsd, tmp_path, ["clean.test", "shared.test"])
    args = ("dns", "audit", "clean.test", "nothere.test", "--zone-dir", str(zones), "--selector", z.SELECTOR,
            "--ip", z.CLEAN_IP, "--sending-mode", "direct")
    table = run_cli(*args)
    assert "clean.test  [FAIL ptr]" in table.stdout and "nothere.test  [FAIL audit]" in table.stdout
    root = ET.fromstring(run_cli(*args, "--format", "junit").stdout)
    failed = {(s.get("name"), c.get("name")) for s in root.findall("testsuite") for c in s.findall("testcase")
              if c.find("failure") is not None}
    assert failed == {("clean.test", "ptr"), ("nothere.test", "audit")}
