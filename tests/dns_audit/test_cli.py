"""`sendhost dns audit` as CI runs it: exit codes, JSON schema 1, JUnit, SARIF, GitHub annotations, zone files."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.dns_audit import zones as z
from tests.dns_audit.conftest import zone_dir_from
from tests.support.dns_faults import blackhole
from tests.support.nsd import NsdServer

Run = Callable[..., Any]
COMMON = ("--selector", z.SELECTOR, "--dnsbl", z.DNSBL_ZONE)


def test_clean_domain_exits_0(sendhost_dns: Run) -> None:
    result = sendhost_dns("clean.test", "--ip", z.CLEAN_IP, *COMMON)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "clean.test  [ok]" in result.stdout
    assert "1 domain(s), 0 error(s), 0 warning(s)" in result.stdout


def test_error_findings_exit_1(sendhost_dns: Run) -> None:
    result = sendhost_dns("clean.test", "spf-plusall.test", *COMMON)
    assert result.returncode == 1, result.stderr
    assert "spf.permissive_all" in result.stdout
    assert "error: 1 finding(s) at or above error in 1 of 2 domain(s) audited" in result.stderr


def test_warnings_exit_0_unless_fail_on_warning(sendhost_dns: Run) -> None:
    assert sendhost_dns("dkim-short.test", *COMMON).returncode == 0
    assert sendhost_dns("dkim-short.test", *COMMON, "--fail-on", "warning").returncode == 1


def test_json_is_schema_2_with_every_field(sendhost_dns: Run) -> None:
    result = sendhost_dns("clean.test", "dkim-weak.test", *COMMON, "--format", "json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert set(data) == {"schema", "domains", "summary"}
    assert data["schema"] == 2
    assert data["summary"] == {"domains": 2, "errors": 1, "warnings": 0, "waived": 0}
    clean, weak = data["domains"]
    assert set(clean) == {"domain", "findings", "checks"}
    assert clean["domain"] == "clean.test" and clean["findings"] == []
    assert {"name": "spf", "status": "pass", "note": ""} in clean["checks"]
    [ptr] = [c for c in clean["checks"] if c["name"] == "ptr"]
    assert ptr["status"] == "skip" and "no sending IPs" in ptr["note"]  # nothing to look at is not a pass
    [item] = weak["findings"]
    assert set(item) == {"code", "severity", "message", "evidence", "remediation", "reference", "location",
                         "subject", "waived"}
    assert (item["code"], item["severity"], item["location"]) == ("dkim.weak_key", "error", None)
    assert (item["subject"], item["waived"]) == (z.SELECTOR, False)
    assert {"name": "dkim", "status": "fail", "note": ""} in weak["checks"]


def test_junit_has_one_testcase_per_domain_and_check(sendhost_dns: Run) -> None:
    result = sendhost_dns("clean.test", "spf-plusall.test", *COMMON, "--format", "junit")
    root = ET.fromstring(result.stdout)
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["clean.test", "spf-plusall.test"]
    cases = [(s.get("name"), c.get("name")) for s in suites for c in s.findall("testcase")]
    assert len(cases) == 20  # 2 domains x 10 checks
    failed = [(s.get("name"), c.get("name")) for s in suites for c in s.findall("testcase") if c.find("failure")
              is not None]
    assert failed == [("spf-plusall.test", "spf")]
    assert root.get("failures") == "1"


def test_sarif_points_at_the_zone_file_line(nsd: NsdServer, tmp_path: Path) -> None:
    zones = zone_dir_from(nsd, tmp_path, ["spf-plusall.test", "clean.test"])
    result = run_cli("dns", "audit", "--zone-dir", str(zones), "--selector", z.SELECTOR, "--format", "sarif",
                     env={"GITHUB_WORKSPACE": str(tmp_path)})
    assert result.returncode == 1, result.stderr
    sarif = json.loads(result.stdout)
    assert sarif["version"] == "2.1.0"
    [found] = [r for r in sarif["runs"][0]["results"] if r["level"] == "error"]
    assert found["ruleId"] == "spf.permissive_all"
    location = found["locations"][0]["physicalLocation"]
    uri = location["artifactLocation"]["uri"]
    line = location["region"]["startLine"]
    assert uri == "zones/spf-plusall.test.zone"  # relative to the repository root, as code scanning shows it
    assert "+all" in (tmp_path / uri).read_text().splitlines()[line - 1]


def test_sarif_fingerprints_hold_no_counts_or_message_text(nsd: NsdServer, tmp_path: Path) -> None:
    from dns_audit.findings import finding
    from dns_audit.report.sarif import fingerprint

    ten = finding("spf.lookup_limit", "SPF of a.test needs 11 DNS lookups")
    twelve = finding("spf.lookup_limit", "SPF of a.test needs 13 DNS lookups")
    assert fingerprint("a.test", ten) == fingerprint("a.test", twelve)
    assert fingerprint("a.test", ten) != fingerprint("b.test", ten)
    one_ip = finding("dnsbl.ip_listed", "listed", subject="192.0.2.1@bl.test")
    other_ip = finding("dnsbl.ip_listed", "listed", subject="192.0.2.2@bl.test")
    assert fingerprint("a.test", one_ip) != fingerprint("a.test", other_ip)


def test_sarif_of_an_inventory_audit_points_at_the_line_declaring_the_domain(sendhost_dns: Run,
                                                                            tmp_path: Path) -> None:
    inventory = one_sender_inventory(tmp_path, """      - name: clean.test
        dkim_selectors: [s1]
      - name: spf-plusall.test
        dkim_selectors: [s1]
""", "10.0.1.10", dnsbl=z.DNSBL_ZONE)
    result = sendhost_dns("--inventory", str(inventory), "--format", "sarif",
                          env={"GITHUB_WORKSPACE": str(tmp_path)})
    assert result.returncode == 1, result.stderr
    [found] = [r for r in json.loads(result.stdout)["runs"][0]["results"] if r["level"] == "error"]
    location = found["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "inventory.yml"
    line = inventory.read_text().splitlines()[location["region"]["startLine"] - 1]
    assert "name: spf-plusall.test" in line


def test_github_annotations_carry_file_and_line(nsd: NsdServer, tmp_path: Path) -> None:
    zones = zone_dir_from(nsd, tmp_path, ["dkim-weak.test"])
    result = run_cli("dns", "audit", "--zone-dir", str(zones), "--selector", z.SELECTOR, "--format", "github",
                     env={"GITHUB_WORKSPACE": str(tmp_path)})
    assert result.returncode == 1
    [annotation] = [line for line in result.stdout.splitlines() if line.startswith("::error")]
    assert annotation.startswith("::error file=zones/dkim-weak.test.zone,line=")
    assert "title=dkim-weak.test%3A dkim.weak_key::" in annotation


def test_zone_file_syntax_error_exits_2_with_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "broken.test.zone").write_text(
        "$TTL 300\n@ IN SOA ns1 host 1 2 3 4 5\n@ IN NS ns1\n@ IN MX ten mx\n")
    result = run_cli("dns", "audit", "--zone-dir", str(tmp_path))
    assert result.returncode == 2
    assert f"error: {tmp_path / 'broken.test.zone'}:4:" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_invalid_domain_exits_2_naming_it() -> None:
    result = run_cli("dns", "audit", "exa mple..com", "--nameserver", "127.0.0.1:9")
    assert result.returncode == 2
    assert result.stderr.startswith("error: domain 'exa mple..com' is not a valid")
    assert "Traceback" not in result.stderr


def test_idna_domain_is_audited_as_its_ascii_form(sendhost_dns: Run) -> None:
    result = sendhost_dns("bücher.test", *COMMON, "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["domains"][0]["domain"] == "xn--bcher-kva.test"


def test_bad_nameserver_and_ip_exit_2() -> None:
    bad_ns = run_cli("dns", "audit", "clean.test", "--nameserver", "dns.example:53")
    assert bad_ns.returncode == 2 and "--nameserver 'dns.example:53'" in bad_ns.stderr
    bad_ip = run_cli("dns", "audit", "clean.test", "--nameserver", "127.0.0.1:9", "--ip", "300.1.1.1")
    assert bad_ip.returncode == 2 and "--ip '300.1.1.1' is not an IP address" in bad_ip.stderr


@pytest.mark.service
def test_unreachable_nameserver_exits_2_quickly() -> None:
    with blackhole() as address:
        result = run_cli("dns", "audit", "clean.test", "spf-plusall.test", "--nameserver", address,
                         "--timeout", "0.2", "--retries", "1", timeout=30)
    assert result.returncode == 2
    assert f"error: no answer from nameserver {address}" in result.stderr
    assert result.stdout == ""


def one_sender_inventory(tmp_path: Path, domains: str, primary_ip: str, dnsbl: str | None = None) -> Path:
    """An inventory with `domains` (YAML list items) and one sender host on `primary_ip`."""
    inventory = tmp_path / "inventory.yml"
    dnsbl_line = f"    sendhost_dnsbl: [{dnsbl}]\n" if dnsbl else ""
    inventory.write_text(f"""all:
  vars:
    sendhost_domains:
{domains}{dnsbl_line}  children:
    senders:
      hosts:
        sender-1:
          sendhost_instance_id: i-0a1b2c3d4e5f60718
          sendhost_region: us-east-1
          sendhost_primary_ip: {primary_ip}
          sendhost_pool:
            slots: 1
""")
    return inventory


def test_inventory_supplies_domains_selectors_and_ips(sendhost_dns: Run, tmp_path: Path) -> None:
    inventory = one_sender_inventory(tmp_path, f"""      - name: clean.test
        dkim_selectors: [{z.SELECTOR}]
      - name: alignment-none.test
        dkim_selectors: [nosuch]
        envelope_domain: bounce.shared.test
""", z.CLEAN_IP, dnsbl=z.DNSBL_ZONE)
    result = sendhost_dns("--inventory", str(inventory), "--format", "json")
    assert result.returncode == 1, result.stderr
    assert f"note: auditing 2 domain(s) from the inventory {inventory}" in result.stderr
    data = json.loads(result.stdout)
    by_domain = {d["domain"]: [f["code"] for f in d["findings"]] for d in data["domains"]}
    # submission is the default model: the host's address is screened and its PTR reported as information
    assert by_domain == {"clean.test": ["ptr.submission"],
                         "alignment-none.test": ["dkim.missing", "alignment.none", "ptr.submission"]}
    statuses = {c["name"]: c["status"] for c in data["domains"][0]["checks"]}
    assert statuses["ptr"] == "pass" and statuses["dnsbl"] == "pass"  # the host's IP was checked


def test_nothing_to_audit_and_missing_zone_dir_exit_2(tmp_path: Path) -> None:
    nothing = run_cli("dns", "audit", "--nameserver", "127.0.0.1:9", cwd=tmp_path)
    assert nothing.returncode == 2 and "error: no domains to audit" in nothing.stderr
    missing = run_cli("dns", "audit", "--zone-dir", str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert f"error: --zone-dir {tmp_path / 'nope'}: not a directory of zone files" in missing.stderr


def test_inventory_hosts_with_a_pool_are_audited_on_their_pool_addresses(nsd: NsdServer, mail: Any,
                                                                         tmp_path: Path, redis_url: str) -> None:
    from ippool.pool import Pool

    # The primary IP has no PTR; the pool's Elastic IP is the clean one: a pool host sends from its pool.
    inventory = one_sender_inventory(tmp_path, f"""      - name: clean.test
        dkim_selectors: [{z.SELECTOR}]
""", z.NO_PTR_IP, dnsbl=z.DNSBL_ZONE)
    args = ("dns", "audit", "--inventory", str(inventory), "--nameserver", nsd.address, "--smtp-port",
            str(mail.port), "--ca-file", mail.ca_file, "--timeout", "1", "--retries", "1", "--format", "json")
    without_pool = run_cli(*args, "--sending-mode", "direct", env={"REDIS_URL": redis_url})
    assert [f["code"] for f in json.loads(without_pool.stdout)["domains"][0]["findings"]] == ["ptr.missing"]

    pool = Pool.from_url(redis_url)
    pool.register_host("sender-1", z.NO_PTR_IP)
    pool.put_address("sender-1", 0, private_ip="10.0.1.11", public_ip=z.CLEAN_IP, allocation_id="eipalloc-1")
    pool.close()
    with_pool = run_cli(*args, "--sending-mode", "direct", env={"REDIS_URL": redis_url})
    assert with_pool.returncode == 0, with_pool.stdout + with_pool.stderr
    assert json.loads(with_pool.stdout)["domains"][0]["findings"] == []


@pytest.mark.service
def test_an_unreachable_pool_redis_is_exit_2_naming_it(tmp_path: Path) -> None:
    from tests.support.net import free_port

    inventory = one_sender_inventory(tmp_path, "      - name: clean.test\n", "127.0.0.10")
    url = f"redis://127.0.0.1:{free_port()}/0"
    result = run_cli("dns", "audit", "--inventory", str(inventory), env={"REDIS_URL": url})
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: cannot read the IP pools from {url}")
    assert "--ip" in result.stderr and "Traceback" not in result.stderr


def test_a_zone_line_is_the_findings_own_record_and_none_for_an_absent_one(nsd: NsdServer,
                                                                           tmp_path: Path) -> None:
    zones = zone_dir_from(nsd, tmp_path, ["dmarc-missing.test", "dkim-short.test"])
    result = run_cli("dns", "audit", "--zone-dir", str(zones), "--format", "json", "--fail-on", "warning")
    found = {(d["domain"], f["code"]): f["location"] for d in json.loads(result.stdout)["domains"]
             for f in d["findings"]}
    # no selector and no DMARC record: no line of the file is their record (not the SOA, not the SPF line)
    assert found[("dkim-short.test", "dkim.no_selector")] is None
    assert found[("dmarc-missing.test", "dmarc.missing")] is None
    with_selector = run_cli("dns", "audit", "dkim-short.test", "--zone-dir", str(zones), "--selector", z.SELECTOR,
                            "--format", "sarif", env={"GITHUB_WORKSPACE": str(tmp_path)})
    [short] = [r for r in json.loads(with_selector.stdout)["runs"][0]["results"] if r["ruleId"] == "dkim.short_key"]
    location = short["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "zones/dkim-short.test.zone"
    line = (zones / "dkim-short.test.zone").read_text().splitlines()[location["region"]["startLine"] - 1]
    assert line.startswith(f"{z.SELECTOR}._domainkey IN TXT"), line
