"""One message (.eml): RFC 8058 one-click unsubscribe, its DKIM coverage (verified with the key from DNS through
our resolver, using dkimpy), and From / DKIM d= / Return-Path alignment."""

from __future__ import annotations

import email
import email.policy
import email.utils
import re
from dataclasses import dataclass

import dkim

from dns_audit.dmarc import find_policy
from dns_audit.findings import Finding, clip, finding
from dns_audit.orgdomain import aligned
from dns_audit.resolver import Resolver
from dns_audit.tags import TagSyntaxError, parse_tags

ONE_CLICK = "List-Unsubscribe=One-Click"
UNSUBSCRIBE_HEADERS = ("list-unsubscribe", "list-unsubscribe-post")


@dataclass(frozen=True)
class Signature:
    domain: str
    selector: str
    signed_headers: tuple[str, ...]
    index: int


def _address_domain(value: str | None) -> str | None:
    if not value:
        return None
    _, address = email.utils.parseaddr(value)
    return address.rpartition("@")[2].lower().rstrip(".") or None if "@" in address else None


def signatures(raw_headers: list[str]) -> list[Signature | None]:
    """Each DKIM-Signature header's d=, s= and h= (None for one that does not parse). No I/O."""
    found: list[Signature | None] = []
    for index, value in enumerate(raw_headers):
        try:
            tags = parse_tags(re.sub(r"\s+", " ", value))
        except TagSyntaxError:
            found.append(None)
            continue
        headers = tuple(h.strip().lower() for h in re.sub(r"\s+", "", tags.get("h", "")).split(":") if h.strip())
        if not tags.get("d") or not tags.get("s"):
            found.append(None)
            continue
        found.append(Signature(tags["d"].lower(), tags["s"].lower(), headers, index))
    return found


def unsubscribe_findings(message: email.message.Message) -> list[Finding]:
    """RFC 8058 §3.1 header checks. No I/O."""
    unsubscribe = message.get("List-Unsubscribe")
    if unsubscribe is None:
        return [finding("message.unsubscribe_missing", "no List-Unsubscribe header", "")]
    found = []
    uris = re.findall(r"<([^>]*)>", str(unsubscribe))
    if not any(uri.lower().startswith("https://") for uri in uris):
        found.append(finding("message.unsubscribe_not_https", "List-Unsubscribe has no https URI",
                             clip(f"List-Unsubscribe: {unsubscribe}")))
    post = message.get("List-Unsubscribe-Post")
    if post is None or str(post).strip() != ONE_CLICK:
        found.append(finding("message.unsubscribe_post_missing",
                             f"List-Unsubscribe-Post is not `{ONE_CLICK}`", f"List-Unsubscribe-Post: {post}"))
    return found


async def check_message(raw: bytes, resolver: Resolver) -> list[Finding]:
    """Findings for one RFC 5322 message."""
    message = email.message_from_bytes(raw, policy=email.policy.compat32)
    found = unsubscribe_findings(message)
    from_domain = _address_domain(message.get("From"))
    return_path = _address_domain(message.get("Return-Path"))
    parsed = signatures([str(v) for v in message.get_all("DKIM-Signature", [])])
    if not parsed:
        found.append(finding("message.dkim_missing", "the message has no DKIM-Signature header", ""))
    keys: dict[str, bytes] = {}
    for signature in parsed:
        if signature is None:
            continue
        name = f"{signature.selector}._domainkey.{signature.domain}"
        answer = await resolver.query(name, "TXT")
        if answer.failed:
            found.append(finding("dkim.lookup_failed", f"TXT lookup for {name} failed: {answer.error}"))
        elif answer.records:
            keys[name] = answer.records[0].text.encode()

    def from_our_resolver(name: bytes | str, timeout: float = 5) -> bytes | None:
        text = name.decode() if isinstance(name, bytes) else name
        return keys.get(text.rstrip(".").lower())

    valid = []
    for signature in parsed:
        if signature is None:
            found.append(finding("message.dkim_invalid", "a DKIM-Signature header does not parse (needs d=, s=, h=)"))
            continue
        try:
            verified = dkim.DKIM(raw).verify(idx=signature.index, dnsfunc=from_our_resolver)
        except dkim.DKIMException as exc:
            verified, reason = False, str(exc)
        else:
            reason = "signature does not verify with the key in DNS"
        if verified:
            valid.append(signature)
        else:
            found.append(finding("message.dkim_invalid", f"DKIM signature d={signature.domain} s={signature.selector}:"
                                 f" {reason}", f"h={':'.join(signature.signed_headers)}"))
    present = [h for h in UNSUBSCRIBE_HEADERS if message.get(h) is not None]
    if valid and present:
        covered = [s for s in valid if all(h in s.signed_headers for h in present)]
        if not covered:
            found.append(finding("message.unsubscribe_unsigned",
                                 "no valid DKIM signature covers " + " and ".join(present),
                                 "; ".join(f"d={s.domain} h={':'.join(s.signed_headers)}" for s in valid)))
    found.extend(await _alignment(resolver, from_domain, return_path, valid))
    return found


async def _alignment(resolver: Resolver, from_domain: str | None, return_path: str | None,
                     valid: list[Signature]) -> list[Finding]:
    if from_domain is None:
        return [finding("message.alignment", "the From header has no address to align with", "")]
    policy = await find_policy(resolver, from_domain)
    adkim = policy.record.adkim if policy.record else "r"
    aspf = policy.record.aspf if policy.record else "r"
    if any(aligned(from_domain, s.domain, adkim) for s in valid):
        return []
    if return_path and aligned(from_domain, return_path, aspf):
        return []
    return [finding("message.alignment", f"From {from_domain} aligns with no valid DKIM d= nor the Return-Path",
                    f"DKIM d={','.join(s.domain for s in valid) or 'none valid'}; Return-Path domain {return_path}")]
