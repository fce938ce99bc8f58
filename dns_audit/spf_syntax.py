"""SPF record grammar (RFC 7208 §4.6, §5, §6, §7): parse a record into terms, and expand macros. No I/O."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

MECHANISMS = ("all", "include", "a", "mx", "ptr", "ip4", "ip6", "exists")
DNS_TERMS = ("include", "a", "mx", "ptr", "exists", "redirect")  # count toward the 10-lookup limit
_MODIFIER = re.compile(r"^([A-Za-z][A-Za-z0-9_.\-]*)=(.*)$")
_MACRO = re.compile(r"%(?:\{([slodiphcrtvSLODIPHCRTV])(\d*)([rR]?)([.\-+,/_=]*)\}|%|_|-)")
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9_\-]{1,63}(?<!-)$")


class SpfSyntaxError(ValueError):
    """The record breaks the SPF grammar; the message names the offending term."""


@dataclass(frozen=True)
class Term:
    qualifier: str  # one of + - ~ ? ("" for modifiers)
    name: str  # mechanism or modifier name, lower case
    value: str | None  # domain-spec, address or modifier value
    cidr4: int | None = None
    cidr6: int | None = None
    modifier: bool = False

    @property
    def queries_dns(self) -> bool:
        return self.name in DNS_TERMS


@dataclass(frozen=True)
class SpfRecord:
    text: str
    terms: tuple[Term, ...]

    @property
    def mechanisms(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if not t.modifier)

    def modifier(self, name: str) -> str | None:
        return next((t.value for t in self.terms if t.modifier and t.name == name), None)

    @property
    def all_term(self) -> Term | None:
        return next((t for t in self.mechanisms if t.name == "all"), None)


def is_spf(text: str) -> bool:
    """True when a TXT string is an SPF record (RFC 7208 §4.5: `v=spf1` then a space or the end)."""
    return text[:6].lower() == "v=spf1" and (len(text) == 6 or text[6] == " ")


def check_domain_spec(spec: str, term: str) -> None:
    if not spec or not spec.isascii() or not spec.isprintable() or " " in spec:
        raise SpfSyntaxError(f"{term!r}: bad domain-spec")
    literal = _MACRO.sub("x", spec)
    if "%" in literal:
        raise SpfSyntaxError(f"{term!r}: bad macro")
    if "%" not in spec:
        labels = spec.rstrip(".").split(".")
        if len(labels) < 2 or not all(_LABEL.match(label) for label in labels):
            raise SpfSyntaxError(f"{term!r}: {spec!r} is not a domain name")


def _cidrs(rest: str, term: str) -> tuple[str, int | None, int | None]:
    """Split `domain/24//64` into domain and the two prefix lengths."""
    cidr4 = cidr6 = None
    if "//" in rest:
        rest, v6 = rest.split("//", 1)
        if not v6.isdigit() or int(v6) > 128:
            raise SpfSyntaxError(f"{term!r}: bad ip6 prefix length")
        cidr6 = int(v6)
    if "/" in rest:
        rest, v4 = rest.rsplit("/", 1)
        if not v4.isdigit() or int(v4) > 32:
            raise SpfSyntaxError(f"{term!r}: bad ip4 prefix length")
        cidr4 = int(v4)
    return rest, cidr4, cidr6


def parse_term(raw: str) -> Term:
    modifier = _MODIFIER.match(raw)
    if modifier and modifier.group(1).lower() not in MECHANISMS:
        name, value = modifier.group(1).lower(), modifier.group(2)
        if name in ("redirect", "exp"):
            check_domain_spec(value, raw)
        return Term("", name, value, modifier=True)
    qualifier = raw[0] if raw[0] in "+-~?" else "+"
    body = raw[1:] if raw[0] in "+-~?" else raw
    name, sep, rest = body.partition(":")
    if not sep and "/" in name:
        name, slash, cidr = name.partition("/")
        rest = slash + cidr
    name = name.lower()
    if name not in MECHANISMS:
        raise SpfSyntaxError(f"{raw!r}: unknown mechanism")
    if name == "all":
        if sep or rest:
            raise SpfSyntaxError(f"{raw!r}: `all` takes no argument")
        return Term(qualifier, name, None)
    if name in ("ip4", "ip6"):
        try:
            network = ipaddress.ip_network(rest, strict=False)
        except ValueError:
            raise SpfSyntaxError(f"{raw!r}: not an {name} address or network") from None
        if network.version != int(name[2]):
            raise SpfSyntaxError(f"{raw!r}: address family does not match {name}")
        return Term(qualifier, name, str(network))
    domain, cidr4, cidr6 = _cidrs(rest, raw) if name in ("a", "mx") else (rest, None, None)
    if name in ("include", "exists") and not sep:
        raise SpfSyntaxError(f"{raw!r}: `{name}` needs a domain")
    if sep:
        check_domain_spec(domain, raw)
    return Term(qualifier, name, domain or None, cidr4, cidr6)


def parse_spf(text: str) -> SpfRecord:
    """Parse one SPF record; SpfSyntaxError names the first bad term."""
    if not is_spf(text):
        raise SpfSyntaxError("record does not start with `v=spf1`")
    if not text.isascii():
        raise SpfSyntaxError("record contains non-ASCII characters")
    terms = tuple(parse_term(raw) for raw in text[6:].split(" ") if raw)
    for name in ("redirect", "exp"):
        if sum(1 for t in terms if t.modifier and t.name == name) > 1:
            raise SpfSyntaxError(f"`{name}=` appears more than once")
    return SpfRecord(text, terms)


def expand_macros(spec: str, *, ip: str, domain: str, sender: str) -> str:
    """Expand RFC 7208 §7 macros for one evaluation."""
    address = ipaddress.ip_address(ip)
    dotted = str(address) if address.version == 4 else ".".join(address.exploded.replace(":", ""))
    local, _, sender_domain = sender.rpartition("@")
    values = {"s": sender, "l": local or "postmaster", "o": sender_domain or domain, "d": domain, "i": dotted,
              "p": "unknown", "v": "in-addr" if address.version == 4 else "ip6", "h": domain,
              "c": str(address), "r": "unknown", "t": "0"}

    def one(match: re.Match[str]) -> str:
        whole = match.group(0)
        if whole == "%%":
            return "%"
        if whole == "%_":
            return " "
        if whole == "%-":
            return "%20"
        letter, digits, reverse, delimiters = match.groups()
        parts = re.split("[" + re.escape(delimiters or ".") + "]", values[letter.lower()])
        if reverse:
            parts.reverse()
        if digits:
            parts = parts[-int(digits):] if int(digits) else parts
        return ".".join(parts)

    return _MACRO.sub(one, spec)
