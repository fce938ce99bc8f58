"""DKIM key records (RFC 6376 §3.6.1): parse a selector's key without I/O, then audit each configured selector."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, replace

from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_der_public_key

from dns_audit.findings import CheckSkipped, Finding, clip, finding
from dns_audit.resolver import Resolver
from dns_audit.tags import TagSyntaxError, parse_tags

MIN_RSA_BITS = 1024
RECOMMENDED_RSA_BITS = 2048


class DkimSyntaxError(ValueError):
    """The key record breaks RFC 6376 §3.6.1."""


@dataclass(frozen=True)
class DkimKey:
    key_type: str  # rsa | ed25519
    public_key: bytes  # empty when revoked
    flags: tuple[str, ...]
    bits: int | None  # RSA modulus size

    @property
    def revoked(self) -> bool:
        return not self.public_key

    @property
    def testing(self) -> bool:
        return "y" in self.flags


def parse_dkim_key(text: str) -> DkimKey:
    """Parse a DKIM key TXT record; DkimSyntaxError names what is wrong."""
    try:
        tags = parse_tags(text)
    except TagSyntaxError as exc:
        raise DkimSyntaxError(str(exc)) from None
    if "v" in tags and tags["v"] != "DKIM1":
        raise DkimSyntaxError(f"v={tags['v']!r}: must be DKIM1")
    if "p" not in tags:
        raise DkimSyntaxError("no p= tag (the public key)")
    key_type = tags.get("k", "rsa").lower()
    if key_type not in ("rsa", "ed25519"):
        raise DkimSyntaxError(f"k={key_type!r}: expected rsa or ed25519")
    flags = tuple(f.strip() for f in tags.get("t", "").split(":") if f.strip())
    encoded = re.sub(r"\s+", "", tags["p"])
    if not encoded:
        return DkimKey(key_type, b"", flags, None)
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise DkimSyntaxError("p= is not valid base64") from None
    if key_type == "ed25519":
        if len(raw) != 32:
            raise DkimSyntaxError(f"ed25519 p= must be 32 bytes, got {len(raw)}")
        return DkimKey(key_type, raw, flags, None)
    try:
        key = load_der_public_key(raw)
    except (ValueError, TypeError):
        raise DkimSyntaxError("p= does not hold an RSA public key (DER SubjectPublicKeyInfo)") from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise DkimSyntaxError("p= holds a non-RSA key but k=rsa")
    return DkimKey(key_type, raw, flags, key.key_size)


async def audit_selector(resolver: Resolver, domain: str, selector: str) -> list[Finding]:
    """Findings for one selector's key at `<selector>._domainkey.<domain>`."""
    name = f"{selector}._domainkey.{domain}"
    answer = await resolver.query(name, "TXT")
    if answer.failed:
        return [finding("dkim.lookup_failed", f"TXT lookup for {name} failed: {answer.error or answer.status}")]
    if answer.unknown:
        raise CheckSkipped(f"{name} is not in the zone files")
    records = [r for r in answer.records if "p=" in r.text or r.text.lower().startswith("v=dkim1")]
    if not records and answer.records:
        return [finding("dkim.syntax", f"{name} holds TXT data that is not a DKIM key",
                        clip(" | ".join(answer.texts())), answer.records[0].location)]
    if not records:
        return [finding("dkim.missing", f"no DKIM key for selector {selector!r} of {domain}",
                        f"TXT {name}: {answer.status}")]
    if len(records) > 1:
        return [finding("dkim.syntax", f"{name} has {len(records)} key records; verifiers may pick either",
                        clip(" | ".join(r.text for r in records)), records[1].location)]
    record = records[0]
    try:
        key = parse_dkim_key(record.text)
    except DkimSyntaxError as exc:
        return [finding("dkim.syntax", f"DKIM key {name}: {exc}", clip(record.text), record.location)]
    found = []
    if key.revoked:
        found.append(finding("dkim.revoked", f"DKIM key {name} is revoked (empty p=)", clip(record.text),
                             record.location))
    elif key.bits is not None and key.bits < MIN_RSA_BITS:
        found.append(finding("dkim.weak_key", f"DKIM key {name} is RSA-{key.bits}; verifiers reject < 1024",
                             f"k=rsa, {key.bits} bits", record.location))
    elif key.bits is not None and key.bits < RECOMMENDED_RSA_BITS:
        found.append(finding("dkim.short_key", f"DKIM key {name} is RSA-{key.bits}; 2048 is recommended",
                             f"k=rsa, {key.bits} bits", record.location))
    if key.testing:
        found.append(finding("dkim.testing", f"DKIM key {name} is in test mode (t=y)", clip(record.text),
                             record.location))
    return found


async def audit_dkim(resolver: Resolver, domain: str, selectors: list[str]) -> list[Finding]:
    """Each selector's key; CheckSkipped when none could be looked at."""
    found: list[Finding] = []
    skipped: list[str] = []
    for selector in selectors:
        try:
            found.extend(replace(f, subject=selector) for f in await audit_selector(resolver, domain, selector))
        except CheckSkipped as exc:
            skipped.append(str(exc))
    if skipped and len(skipped) == len(selectors):
        raise CheckSkipped("; ".join(skipped))
    return found
