"""One canonical form for a recipient address: lower-case `local@domain`, the domain in IDNA (punycode) A-labels.

The same form is the suppression key, the stored recipient, the `To` header and `RCPT TO`, so that no spelling of an
address (`Eve@Bigco.example`, `Eve@BIGCO.example`) gets past a suppression of another.

The accepted grammar is deliberately narrower than RFC 5322: a dot-atom local part in ASCII and a host name. What
does not reduce to that is refused, never repaired, because every repair is a guess about who is meant:

- display names (`Eve <eve@x.example>`), angle brackets, groups (`x:eve@x.example`), comments (`eve(hi)@x.example`),
  quoted local parts (`"eve"@x.example`), two addresses (`a@x.example, b@x.example`): a column or argument that is
  an address holds only the address;
- RFC 2047 encoded words (`=?utf-8?q?eve?=@x.example`): a header parser decodes them, so the To header and RCPT TO
  would name `eve@x.example` while the suppression check saw another text; and, as a last check, any text that
  the email package's own address parser does not read back as exactly itself;
- whitespace inside, control characters (CR, LF, NUL, …), a non-ASCII local part (it would need SMTPUTF8, which
  the agent does not use), empty parts, dots at the ends of the local part or doubled;
- a domain that is not a host name: an IP literal, a single label (`localhost`), a trailing dot, a label longer than
  63 or a name longer than 253 characters, a label with characters other than letters, digits and hyphens, or one
  that starts or ends with a hyphen, an invalid `xn--` label.

Spaces and tabs around the whole text are dropped (a padded CSV cell); that is the only cleaning.

Domains with non-ASCII labels are converted with the `idna` package (IDNA 2008 with UTS 46 mapping, the browsers'
choice): the standard library's `encodings.idna` is IDNA 2003, which maps `straße.de` to `strasse.de`, another
registered domain.
"""

from __future__ import annotations

import re
from email.headerregistry import HeaderRegistry
from email.utils import parseaddr

import idna

from sender.errors import SenderConfigError

MAX_LOCAL = 64  # RFC 5321 4.5.3.1.1
MAX_DOMAIN = 253  # the longest host name in text form (RFC 1035 2.3.4, less the root's dot)
MAX_ADDRESS = 254  # RFC 5321's 256-octet path, less the angle brackets
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LOCAL_RE = re.compile(rf"{_ATOM}(?:\.{_ATOM})*\Z")
_LABEL_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SPACE_RE = re.compile(r"\s")
_ENCODED_WORD_RE = re.compile(r"=\?.*\?=")
# A canonical address of letters, digits, `.`, `_`, `+` and `-` alone: with none of the characters that write a
# quote, comment, group, route, list or encoded word, a header parser can read it only as itself. Only an address
# with other characters (`'`, `=`, `?`, `/`, ...) is read back through the parser, which costs ten times the rest.
_PLAIN_RE = re.compile(r"[a-z0-9._+-]+@[a-z0-9.-]+\Z")
_HEADERS = HeaderRegistry()
# What each character that no plain address holds would make of the text, in the words of the refusal.
_SPECIALS = (
    ("<", "angle brackets or a display name (`Eve <eve@example.com>`)"),
    (">", "angle brackets or a display name (`Eve <eve@example.com>`)"),
    ('"', "a quoted local part or display name"),
    ("(", "a comment in parentheses"),
    (")", "a comment in parentheses"),
    (",", "a list of addresses"),
    (";", "a group or a list of addresses"),
    (":", "a group (`name:address;`) or a route"),
    ("[", "an address literal in brackets"),
    ("]", "an address literal in brackets"),
    ("\\", "a backslash escape"),
)


class AddressError(SenderConfigError):
    """Text that does not reduce to one plain `local@domain` address. Exit 2."""


def canonical(text: str) -> str:
    """`text` as lower-case `local@domain` with an IDNA domain, or AddressError saying why it is not one address."""
    value = _trimmed(text, "address")
    if _ENCODED_WORD_RE.search(value):
        raise AddressError(f"{value!r} is not a plain address: '=?...?=' is an encoded word, which a mail reader "
                           "decodes into another address; give the address itself, like eve@example.com")
    for special, meaning in _SPECIALS:
        if special in value:
            raise AddressError(f"{value!r} is not a plain address: {special!r} means {meaning}; give only "
                               "local@domain, like eve@example.com")
    _no_space(value, "address")
    if value.count("@") != 1:
        what = "no @" if "@" not in value else f"{value.count('@')} @ signs"
        raise AddressError(f"{value!r} has {what}; an address is local@domain, like eve@example.com")
    local, domain = value.split("@")
    address = f"{_local(value, local)}@{_domain(value, domain)}"
    if len(address) > MAX_ADDRESS:
        raise AddressError(f"{value!r} is {len(address)} characters long; an address has at most {MAX_ADDRESS}")
    if not _PLAIN_RE.match(address):
        _reads_back(value, address)
    return address


def _reads_back(value: str, address: str) -> None:
    """The To header and RCPT TO are this text: whatever a header parser reads in it must be the address itself."""
    header = _HEADERS("To", address)
    parsed = [a.addr_spec for a in header.addresses]  # type: ignore[attr-defined]
    if parsed != [address] or header.defects or parseaddr(address) != ("", address):
        raise AddressError(f"{value!r} is not a plain address: a mail reader would read it as {parsed or 'nothing'}; "
                           "give only local@domain, like eve@example.com")


def canonical_domain(text: str) -> str:
    """The IDNA host name of a domain-wide suppression (`@bigco.example` or `bigco.example`), or AddressError."""
    value = _trimmed(text, "domain")
    _no_space(value, "domain")
    domain = value.removeprefix("@")
    if "@" in domain:
        raise AddressError(f"{value!r} is an address, not a domain; a domain-wide entry is @domain, like @example.com")
    return _domain(value, domain)


def domain_of(address: str) -> str:
    """The domain of an address already in canonical form."""
    return address.rpartition("@")[2]


def _trimmed(text: str, what: str) -> str:
    value = text.strip(" \t")
    if not value:
        raise AddressError(f"empty {what}; give one like {'eve@' if what == 'address' else '@'}example.com")
    if bad := _CONTROL_RE.search(value):
        raise AddressError(f"{value!r} holds the control character {bad.group()!r}; an {what} is one line of text")
    return value


def _no_space(value: str, what: str) -> None:
    if bad := _SPACE_RE.search(value):
        raise AddressError(f"{value!r} holds whitespace ({bad.group()!r}) inside; an {what} has none")


def _local(value: str, local: str) -> str:
    if not local:
        raise AddressError(f"{value!r} has nothing before the @")
    if not local.isascii():
        raise AddressError(f"{value!r}: the part before the @ is not ASCII; sending to it would need SMTPUTF8, "
                           "which sendhost does not use")
    if not _LOCAL_RE.match(local):
        raise AddressError(f"{value!r}: the part before the @ starts or ends with a dot or has two in a row")
    if len(local) > MAX_LOCAL:
        raise AddressError(f"{value!r}: the part before the @ is {len(local)} characters; at most {MAX_LOCAL}")
    return local.lower()


def _domain(value: str, domain: str) -> str:
    if not domain:
        raise AddressError(f"{value!r} has no domain; give one like example.com")
    if not domain.isascii():
        try:
            domain = idna.encode(domain, uts46=True).decode("ascii")
        except idna.IDNAError as exc:
            raise AddressError(f"{value!r}: the domain is not a valid international name ({exc})") from None
    domain = domain.lower()
    if domain.endswith("."):
        raise AddressError(f"{value!r}: the domain ends with a dot; drop it")
    labels = domain.split(".")
    if len(labels) < 2:
        raise AddressError(f"{value!r}: the domain {domain!r} is a single label; give a full name like example.com")
    if len(domain) > MAX_DOMAIN:
        raise AddressError(f"{value!r}: the domain is {len(domain)} characters long; at most {MAX_DOMAIN}")
    for label in labels:
        _check_label(value, label)
    if labels[-1].isdigit():
        raise AddressError(f"{value!r}: the domain is an IP address or ends in a number; give a host name")
    return domain


def _check_label(value: str, label: str) -> None:
    if not label:
        raise AddressError(f"{value!r}: the domain has an empty label (two dots in a row, or a leading dot)")
    if len(label) > 63:
        raise AddressError(f"{value!r}: the domain label {label[:20]!r}... is {len(label)} characters; at most 63")
    if not _LABEL_RE.match(label):
        raise AddressError(f"{value!r}: the domain label {label!r} is not a host name label (letters, digits and "
                           "inner hyphens only)")
    if label.startswith("xn--"):
        try:
            # An A-label is valid only if it decodes and encodes back to itself.
            valid = idna.encode(idna.decode(label)).decode("ascii") == label
        except idna.IDNAError:
            valid = False
        if not valid:
            raise AddressError(f"{value!r}: the domain label {label!r} is not a valid IDNA (xn--) label")
