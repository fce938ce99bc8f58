"""`dns audit --placement`'s findings from the receiver's side: each verdict that contradicts the DNS, naming the
mailbox, the seed and the header; nothing for a healthy message or a domain not audited."""

from __future__ import annotations

from dns_audit.findings import Check, DomainReport, finding
from dns_audit.placement import Delivered, placement_findings

HEADER = ("mx.test; spf=softfail smtp.mailfrom=s.example\n"
          "mx.test; dkim=pass header.d=esp.example header.s=k1\n"
          "mx.test; dmarc=fail header.from=s.example")


def delivered(**verdicts: str | None) -> Delivered:
    values: dict[str, str | None] = {"spf": "pass", "dkim": "pass", "dkim_domain": "s.example", "dmarc": "pass"}
    values.update(verdicts)
    return Delivered("box@s.example", "seed@gmail.com", "google", 7, values["spf"], values["dkim"],
                     values["dkim_domain"], values["dmarc"], HEADER)


def codes(reports: list[DomainReport]) -> list[tuple[str, str, str]]:
    return [(f.code, f.subject, f.evidence) for r in reports for f in r.findings if f.code.startswith("placement.")]


def test_a_healthy_message_adds_a_passing_check_and_no_finding() -> None:
    (report,) = placement_findings([DomainReport("s.example", ())], [delivered()])
    assert (report.findings, report.checks) == ((), (Check("placement", "pass"),))


def test_each_contradiction_names_the_mailbox_the_seed_and_the_header() -> None:
    reports = placement_findings([DomainReport("s.example", ())], [delivered(
        spf="softfail", dkim_domain="esp.example", dmarc="fail")])
    about = "box@s.example → seed@gmail.com"
    assert codes(reports) == [
        ("placement.dkim_unaligned", about, "mx.test; dkim=pass header.d=esp.example header.s=k1"),
        ("placement.spf_softfail", about, "mx.test; spf=softfail smtp.mailfrom=s.example"),
        ("placement.dmarc_fail", about, "mx.test; dmarc=fail header.from=s.example")]
    assert reports[0].findings[0].message == (
        "the google seed seed@gmail.com (placement test 7): the message from box@s.example passed DKIM signed by "
        "esp.example, which does not align with s.example")
    assert reports[0].checks == (Check("placement", "fail"),)


def test_a_dmarc_fail_is_left_to_the_dns_check_when_the_record_does_not_parse() -> None:
    broken = DomainReport("s.example", (finding("dmarc.syntax", "bad"),))
    assert codes(placement_findings([broken], [delivered(dmarc="fail", dkim="fail")])) == [
        ("placement.dkim_fail", "box@s.example → seed@gmail.com",
         "mx.test; dkim=pass header.d=esp.example header.s=k1")]


def test_a_domain_not_audited_is_left_out() -> None:
    (report,) = placement_findings([DomainReport("other.example", ())], [delivered(dkim="fail")])
    assert (report.findings, report.checks) == ((), ())
