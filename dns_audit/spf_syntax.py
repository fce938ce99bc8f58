"""SPF record grammar (RFC 7208 §4.6, §5, §6, §7): parse a record into terms, and expand macros. No I/O."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import quote

MECHANISMS = ("all", "include", "a", "mx", "ptr", "ip4", "ip6", "exists")
DNS_TERMS = ("include", "a", "mx", "ptr", "exists", "redirect")  # count toward the 10-lookup limit
_MODIFIER = re.compile(r"^([A-Za-z][A-Za-z0-9_.\-]*)=(.*)$")
_MACRO = re.compile(r"%(?:\{([slodiphcrtvSLODIPHCRTV])(\d*)([rR]?)([.\-+,/_=]*)\}|%|_|-)")
# toplabel (§7.1): letters and digits with inner hyphens, not all digits
_TOPLABEL = re.compile(r"^(?=.*[A-Za-z])[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?$")
_CIDR = re.compile(r"^(?P<domain>.*?)(?:/(?P<v4>0|[1-9][0-9]*))?(?://(?P<v6>0|[1-9][0-9]*))?$")
EXPLANATION_ONLY = "crtCRT"  # macros that only explanation strings may use (§7.2)


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


def check_macro_string(text: str, term: str, explanation: bool = False) -> None:
    """§7.1: visible characters, every `%` a valid macro; c, r and t only in explanation strings."""
    if not text.isascii() or not text.isprintable() or " " in text:
        raise SpfSyntaxError(f"{term!r}: bad macro-string")
    for match in _MACRO.finditer(text):
        letter = match.group(1)
        if letter and letter in EXPLANATION_ONLY and not explanation:
            raise SpfSyntaxError(f"{term!r}: %{{{letter}}} is only allowed in explanations")
    if "%" in _MACRO.sub("x", text):
        raise SpfSyntaxError(f"{term!r}: bad macro")


def check_domain_spec(spec: str, term: str) -> None:
    """§7.1 domain-spec: a macro-string ending in a top label (or a macro)."""
    if not spec:
        raise SpfSyntaxError(f"{term!r}: bad domain-spec")
    check_macro_string(spec, term)
    if spec.rstrip(".").endswith("}") and "%" in spec:
        return  # ends in a macro-expand
    labels = spec.rstrip(".").split(".")
    if len(labels) < 2 or not _TOPLABEL.match(labels[-1]) or any(label == "" for label in labels[:-1]):
        raise SpfSyntaxError(f"{term!r}: {spec!r} is not a domain name")


def _cidrs(rest: str, term: str) -> tuple[str, int | None, int | None]:
    """Split `domain/24//64` into domain and the two prefix lengths (no leading zeros, §5.6); a `/` that is not
    followed by a prefix length belongs to the domain (`a:foo:bar/baz.example.com`)."""
    match = _CIDR.match(rest)
    assert match is not None  # the pattern matches every string
    cidr4 = int(match["v4"]) if match["v4"] is not None else None
    cidr6 = int(match["v6"]) if match["v6"] is not None else None
    if (cidr4 is not None and cidr4 > 32) or (cidr6 is not None and cidr6 > 128):
        raise SpfSyntaxError(f"{term!r}: prefix length out of range")
    if match["domain"].endswith("/") or (rest and not match["domain"] and (cidr4, cidr6) == (None, None)):
        raise SpfSyntaxError(f"{term!r}: bad prefix length")
    return match["domain"], cidr4, cidr6


def _network(name: str, rest: str, raw: str) -> str:
    """ip4:/ip6: address with an optional prefix length in its family's range, written without leading zeros."""
    address, slash, prefix = rest.partition("/")
    limit = 32 if name == "ip4" else 128
    if (slash and not re.fullmatch(r"0|[1-9][0-9]*", prefix)) or (slash and int(prefix) > limit):
        raise SpfSyntaxError(f"{raw!r}: bad {name} prefix length")
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        raise SpfSyntaxError(f"{raw!r}: not an {name} address") from None
    if parsed.version != int(name[2]):
        raise SpfSyntaxError(f"{raw!r}: address family does not match {name}")
    return str(ipaddress.ip_network(f"{parsed}/{prefix if slash else limit}", strict=False))


def parse_term(raw: str) -> Term:
    modifier = _MODIFIER.match(raw)
    if modifier and modifier.group(1).lower() not in MECHANISMS:
        name, value = modifier.group(1).lower(), modifier.group(2)
        if name in ("redirect", "exp"):
            check_domain_spec(value, raw)
        elif value:
            check_macro_string(value, raw, explanation=True)  # unknown modifiers are ignored, not their syntax
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
        if not sep:
            raise SpfSyntaxError(f"{raw!r}: `{name}` needs an address")
        return Term(qualifier, name, _network(name, rest, raw))
    if name in ("a", "mx"):
        domain, cidr4, cidr6 = _cidrs(rest, raw)
    elif not sep and rest:
        raise SpfSyntaxError(f"{raw!r}: `{name}` takes no prefix length")
    else:
        domain, cidr4, cidr6 = rest, None, None
    if name in ("include", "exists") and not sep:
        raise SpfSyntaxError(f"{raw!r}: `{name}` needs a domain")
    if sep:
        check_domain_spec(domain, raw)
    elif domain:
        raise SpfSyntaxError(f"{raw!r}: unexpected {domain!r}")
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


def expand_macros(spec: str, *, ip: str, domain: str, sender: str, helo: str | None = None,
                  validated: str = "unknown") -> str:
    """Expand RFC 7208 §7 macros for one evaluation; upper-case macro letters are URL-escaped (§7.3)."""
    address = ipaddress.ip_address(ip)
    dotted = str(address) if address.version == 4 else ".".join(address.exploded.replace(":", ""))
    local, _, sender_domain = sender.rpartition("@")
    values = {"s": sender, "l": local or "postmaster", "o": sender_domain or domain, "d": domain, "i": dotted,
              "p": validated, "v": "in-addr" if address.version == 4 else "ip6", "h": helo or domain,
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
        value = ".".join(parts)
        return quote(value, safe="") if letter.isupper() else value

    return _MACRO.sub(one, spec)
