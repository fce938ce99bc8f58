"""The canonical address: one spelling per mailbox, and a refusal for anything that is not one plain address."""

from __future__ import annotations

import re
from email.headerregistry import HeaderRegistry
from email.utils import parseaddr

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sender.addresses import AddressError, canonical, canonical_domain, domain_of
from sender.errors import SenderConfigError
from sendhost.errors import ConfigError


@pytest.mark.parametrize(("text", "expected"), [
    ("eve@rcpt.example", "eve@rcpt.example"),
    ("Eve@Bigco.Example", "eve@bigco.example"),
    ("EVE@BIGCO.EXAMPLE", "eve@bigco.example"),
    ("  eve@rcpt.example\t", "eve@rcpt.example"),
    ("first.last+tag@mail.rcpt.example", "first.last+tag@mail.rcpt.example"),
    ("o'brien@rcpt.example", "o'brien@rcpt.example"),
    ("eve@straße.de", "eve@xn--strae-oqa.de"),
    ("eve@xn--strae-oqa.de", "eve@xn--strae-oqa.de"),
    ("eve@Bücher.Example", "eve@xn--bcher-kva.example"),
    ("eve@例え.テスト", "eve@xn--r8jz45g.xn--zckzah"),
    ("eve@a-b.example", "eve@a-b.example"),
])
def test_an_address_reduces_to_lower_case_local_at_idna_domain(text: str, expected: str) -> None:
    assert canonical(text) == expected


@pytest.mark.parametrize(("text", "named"), [
    ("x:eve@rcpt.example", "a group"),
    ("undisclosed:eve@rcpt.example;", "a group"),
    ("eve(hi)@rcpt.example", "a comment"),
    ('"eve"@rcpt.example', "a quoted local part"),
    ("Eve <eve@rcpt.example>", "display name"),
    ("<eve@rcpt.example>", "angle brackets"),
    ("<junk>", "angle brackets"),
    ("a@rcpt.example, b@rcpt.example", "a list of addresses"),
    ("a@rcpt.example;b@rcpt.example", "a list of addresses"),
    ("eve@[192.0.2.1]", "an address literal"),
    ("e\\ve@rcpt.example", "a backslash"),
    ("a@rcpt.example b@rcpt.example", "whitespace"),
    ("eve @rcpt.example", "whitespace"),
    ("eve@\u00a0rcpt.example", "whitespace"),
    ("eve@rcpt.example\r\nBcc: x@y.example", "control character '\\r'"),
    ("eve@rcpt.example\n", "control character '\\n'"),
    ("eve\x00@rcpt.example", "control character '\\x00'"),
    ("eve\x1b[31m@rcpt.example", "control character '\\x1b'"),
    ("", "empty address"),
    ("   ", "empty address"),
    ("eve.rcpt.example", "no @"),
    ("a@b@rcpt.example", "2 @ signs"),
    ("@rcpt.example", "nothing before the @"),
    ("eve@", "no domain"),
    (".eve@rcpt.example", "starts or ends with a dot"),
    ("eve.@rcpt.example", "starts or ends with a dot"),
    ("e..ve@rcpt.example", "two in a row"),
    ("ève@rcpt.example", "SMTPUTF8"),
    ("e" * 65 + "@rcpt.example", "at most 64"),
    ("eve@localhost", "a single label"),
    ("eve@192.0.2.1", "IP address"),
    ("eve@rcpt.example.", "ends with a dot"),
    ("eve@rcpt..example", "an empty label"),
    ("eve@.rcpt.example", "an empty label"),
    ("eve@-rcpt.example", "not a host name label"),
    ("eve@rcpt-.example", "not a host name label"),
    ("eve@rc_pt.example", "not a host name label"),
    ("eve@" + "a" * 64 + ".example", "at most 63"),
    ("eve@" + ".".join(["abcdefghi"] * 26) + ".example", "at most 253"),
    ("eve@xn--zz.example", "not a valid IDNA"),
    ("eve@xn--ls8h.example", "not a valid IDNA"),  # an emoji, which IDNA 2008 does not allow
    ("eve@exa\u200dmple.example", "not a valid international name"),
    ("=?utf-8?q?eve?=@rcpt.example", "an encoded word"),
    ("=?utf-8?b?ZXZl?=@rcpt.example", "an encoded word"),
    ("e=?us-ascii?q?ve?=@rcpt.example", "an encoded word"),
    ("eve@=?utf-8?q?rcpt?=.example", "an encoded word"),
])
def test_anything_that_is_not_one_plain_address_is_refused_saying_why(text: str, named: str) -> None:
    with pytest.raises(AddressError, match=re.escape(named)):
        canonical(text)


def test_the_whole_address_is_at_most_254_characters() -> None:
    local = "e" * 64
    domain = ".".join(["d" * 63, "d" * 63, "d" * 60]) + ".example"
    with pytest.raises(AddressError, match="at most 254"):
        canonical(f"{local}@{domain}")


def test_an_address_error_is_a_configuration_error_that_exits_2() -> None:
    assert issubclass(AddressError, SenderConfigError) and issubclass(AddressError, ConfigError)
    assert AddressError("x").exit_code == 2


@pytest.mark.parametrize(("text", "expected"), [
    ("@BigCo.Example", "bigco.example"),
    ("bigco.example", "bigco.example"),
    ("@bücher.example", "xn--bcher-kva.example"),
])
def test_a_domain_wide_entry_is_the_idna_host_name(text: str, expected: str) -> None:
    assert canonical_domain(text) == expected


@pytest.mark.parametrize(("text", "named"), [
    ("eve@bigco.example", "an address, not a domain"),
    ("@", "no domain"),
    ("@bigco", "a single label"),
    ("@big co.example", "whitespace"),
    ("@bigco.example\n", "control character"),
])
def test_a_domain_wide_entry_that_is_not_a_host_name_is_refused(text: str, named: str) -> None:
    with pytest.raises(AddressError, match=named):
        canonical_domain(text)


def test_the_domain_of_a_canonical_address_is_what_a_domain_entry_matches() -> None:
    assert domain_of(canonical("Eve@BigCo.Example")) == canonical_domain("@bigco.example")


_ADDRESSY = st.text(alphabet=st.sampled_from(list("abcXYZ09.@-_+'\"()<>,:;[]=? \t\r\n\x00éß例")), max_size=30)


@given(st.one_of(st.emails(), _ADDRESSY))
@example("Eve@Bigco.example")
@example("eve@straße.de")
@example("=?utf-8?q?eve?=@rcpt.example")
def test_what_canonical_accepts_is_fixed_by_it_and_reads_back_through_parseaddr_as_itself(text: str) -> None:
    try:
        address = canonical(text)
    except AddressError:
        return
    assert canonical(address) == address
    assert parseaddr(address) == ("", address)
    header = HeaderRegistry()("To", address)
    assert [a.addr_spec for a in header.addresses] == [address] and str(header) == address
    assert address == address.lower() and address.isascii()


_PLAIN = st.text(alphabet=st.sampled_from(list("abcxyz09._+-")), min_size=1, max_size=20)


@given(_PLAIN, st.lists(st.text(alphabet=st.sampled_from(list("abz09-")), min_size=1, max_size=10), min_size=2,
                        max_size=4))
def test_an_address_of_letters_digits_and_dot_underscore_plus_hyphen_reads_back_without_asking_the_parser(
        local: str, labels: list[str]) -> None:
    # canonical asks the header parser only about addresses with other characters: these must read back as themselves
    try:
        address = canonical(f"{local}@{'.'.join(labels)}")
    except AddressError:
        return
    header = HeaderRegistry()("To", address)
    assert [a.addr_spec for a in header.addresses] == [address] and not header.defects
    assert parseaddr(address) == ("", address)
