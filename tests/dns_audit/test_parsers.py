"""The record grammars, without I/O."""

from __future__ import annotations

import pytest

from dns_audit.dkim import DkimSyntaxError, parse_dkim_key
from dns_audit.dmarc import DmarcSyntaxError, parse_dmarc
from dns_audit.mta_sts import mta_sts_problem
from dns_audit.spf_syntax import SpfSyntaxError, expand_macros, is_spf, parse_spf
from dns_audit.tlsrpt import tlsrpt_problem


def test_spf_terms_qualifiers_and_cidrs() -> None:
    record = parse_spf("v=spf1 -ip4:192.0.2.0/24 a:mail.example.com/28//64 ~mx include:_spf.example.net "
                       "redirect=_spf.example.org")
    names = [(t.qualifier, t.name, t.value, t.cidr4, t.cidr6) for t in record.mechanisms]
    assert names == [("-", "ip4", "192.0.2.0/24", None, None), ("+", "a", "mail.example.com", 28, 64),
                     ("~", "mx", None, None, None), ("+", "include", "_spf.example.net", None, None)]
    assert record.modifier("redirect") == "_spf.example.org"
    assert sum(t.queries_dns for t in record.terms) == 4


@pytest.mark.parametrize("text", [
    "v=spf1 ip4:999.0.0.1 -all", "v=spf1 include -all", "v=spf1 foo:bar -all", "v=spf1 all:x",
    "v=spf1 redirect=a.example redirect=b.example", "v=spf1 a:%{z}.example -all", "v=spf1 ip6:192.0.2.1 -all",
    "v=spf1 a/33 -all", "v=spf1 include:nodots -all",
])
def test_spf_syntax_errors(text: str) -> None:
    with pytest.raises(SpfSyntaxError):
        parse_spf(text)


def test_is_spf_needs_the_version_then_a_space() -> None:
    assert is_spf("v=spf1 -all") and is_spf("V=SPF1") and not is_spf("v=spf10 -all") and not is_spf("spf1")


def test_spf_macros_expand_with_transformers() -> None:
    assert expand_macros("%{ir}.%{v}._spf.%{d2}", ip="192.0.2.3", domain="a.b.example.com",
                         sender="x@a.b.example.com") == "3.2.0.192.in-addr._spf.example.com"
    assert expand_macros("%{l}-%%-%_", ip="192.0.2.3", domain="d.example", sender="joe@d.example") == "joe-%- "


def test_dkim_key_parsing() -> None:
    assert parse_dkim_key("v=DKIM1; k=rsa; p=").revoked
    assert parse_dkim_key("v=DKIM1; k=ed25519; t=y:s; p=" + "A" * 43 + "=").testing
    for bad in ("v=DKIM2; p=AAAA", "k=dsa; p=AAAA", "v=DKIM1; k=rsa", "v=DKIM1; p=!!", "garbage"):
        with pytest.raises(DkimSyntaxError):
            parse_dkim_key(bad)


def test_dmarc_parsing_defaults_and_errors() -> None:
    record = parse_dmarc("v=DMARC1; p=quarantine; rua=mailto:a@example.com,mailto:b@example.net; aspf=s")
    assert (record.policy, record.aspf, record.adkim, record.pct) == ("quarantine", "s", "r", 100)
    assert record.rua == ("mailto:a@example.com", "mailto:b@example.net")
    for bad in ("p=none; v=DMARC1", "v=DMARC1; p=maybe", "v=DMARC1; p=none; pct=101", "v=DMARC1; p=none; rua=ftp:x",
                "v=DMARC1; p=none; adkim=x", "v=DMARC1; p=none; p=reject"):
        with pytest.raises(DmarcSyntaxError):
            parse_dmarc(bad)


def test_mta_sts_and_tlsrpt_records() -> None:
    assert mta_sts_problem("v=STSv1; id=20261130") is None
    assert mta_sts_problem("v=STSv1; id=not valid") is not None
    assert tlsrpt_problem("v=TLSRPTv1; rua=mailto:t@example.com,https://r.example.com/") is None
    assert tlsrpt_problem("v=TLSRPTv1") is not None
