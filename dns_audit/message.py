"""One message (.eml): RFC 8058 one-click unsubscribe, its DKIM coverage (verified with the key from DNS through
our resolver, using dkimpy), and From / DKIM d= / Return-Path alignment."""

from __future__ import annotations

import email
import email.message
import email.policy
import email.utils
import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser

import dkim

from dns_audit.dmarc import find_policy
from dns_audit.findings import Finding, clip, finding
from dns_audit.orgdomain import aligned
from dns_audit.resolver import Resolver
from dns_audit.tags import TagSyntaxError, parse_tags

ONE_CLICK = "List-Unsubscribe=One-Click"
UNSUBSCRIBE_HEADERS = ("list-unsubscribe", "list-unsubscribe-post")
# Words a reader recognizes as an unsubscribe link, in the languages cold mail is commonly sent in.
UNSUBSCRIBE_WORDS = ("unsubscribe", "opt out", "opt-out", "abmelden", "austragen", "désabonner", "desabonner",
                     "désinscri", "darse de baja", "cancelar suscripción", "annulla iscrizione", "uitschrijven",
                     "配信停止", "登録解除")
_URL = re.compile(r"https?://[^\s<>\"')]+", re.I)


class NotAMessage(ValueError):
    """The bytes are not an RFC 5322 message (no header fields)."""


def _silent_logger() -> logging.Logger:
    """dkimpy logs verification errors itself; we report them as findings, so its log lines go nowhere."""
    logger = logging.getLogger("sendhost.dns_audit.dkimpy")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


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
    if not uris:
        # RFC 2369 wants angle brackets; receivers commonly accept a bare URI, so this is a warning
        uris = [u.strip() for u in str(unsubscribe).split(",") if u.strip()]
        if uris:
            found.append(finding("message.unsubscribe_no_brackets", "List-Unsubscribe URIs are not in angle brackets",
                                 clip(f"List-Unsubscribe: {unsubscribe}")))
    if not any(uri.lower().startswith("https://") for uri in uris):
        found.append(finding("message.unsubscribe_not_https", "List-Unsubscribe has no https URI",
                             clip(f"List-Unsubscribe: {unsubscribe}")))
    post = message.get("List-Unsubscribe-Post")
    if post is None or str(post).strip() != ONE_CLICK:
        found.append(finding("message.unsubscribe_post_missing",
                             f"List-Unsubscribe-Post is not `{ONE_CLICK}`", f"List-Unsubscribe-Post: {post}"))
    return found


class _Links(HTMLParser):
    """The visible text of each link in an HTML part, with its href."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href, self._text = dict(attrs).get("href") or "", []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def _mentions_unsubscribe(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in UNSUBSCRIBE_WORDS)


def _part_has_link(part: email.message.Message, header_urls: list[str]) -> bool:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return False
    text = payload.decode(part.get_content_charset() or "utf-8", errors="replace")
    if part.get_content_type() == "text/html":
        parser = _Links()
        parser.feed(text)
        return any(href.startswith(("http://", "https://", "mailto:")) and (
            _mentions_unsubscribe(label) or _mentions_unsubscribe(href) or href in header_urls)
            for href, label in parser.links if label)
    urls = _URL.findall(text)
    return any(url in header_urls or _mentions_unsubscribe(url) for url in urls) or (
        bool(urls) and _mentions_unsubscribe(text))


def body_link_findings(message: email.message.Message) -> list[Finding]:
    """Each text and HTML body part shows a visible unsubscribe link (a link whose text or address says
    unsubscribe, or the List-Unsubscribe URL itself). No I/O."""
    header_urls = re.findall(r"https?://[^\s<>,]+", str(message.get("List-Unsubscribe", "")))
    found = []
    for part in message.walk():
        kind = part.get_content_type()
        if kind not in ("text/plain", "text/html") or part.get_content_disposition() == "attachment":
            continue
        if not _part_has_link(part, header_urls):
            found.append(finding("message.unsubscribe_link_missing", f"the {kind} part shows no unsubscribe link",
                                 "no link whose text or address says unsubscribe, nor the List-Unsubscribe URL",
                                 subject=kind))
    return found


def parse_message(raw: bytes) -> email.message.Message:
    """The message, or NotAMessage when the bytes have no header fields (an image, a text file, ...)."""
    message = email.message_from_bytes(raw, policy=email.policy.compat32)
    if not message.keys() or b"\x00" in raw.split(b"\n\n", 1)[0]:
        raise NotAMessage("no RFC 5322 header fields (From:, Subject:, ...) at its start")
    return message


async def check_message(raw: bytes, resolver: Resolver) -> list[Finding]:
    """Findings for one RFC 5322 message; NotAMessage when `raw` is not one."""
    message = parse_message(raw)
    found = unsubscribe_findings(message) + body_link_findings(message)
    from_domain = _address_domain(message.get("From"))
    return_path = _address_domain(message.get("Return-Path"))
    parsed = signatures([str(v) for v in message.get_all("DKIM-Signature", [])])
    if not parsed:
        found.append(finding("message.dkim_missing", "the message has no DKIM-Signature header", ""))
    keys: dict[str, bytes] = {}
    no_key: set[int] = set()
    for signature in parsed:
        if signature is None:
            continue
        name = f"{signature.selector}._domainkey.{signature.domain}"
        answer = await resolver.query(name, "TXT")
        if answer.failed:
            found.append(finding("dkim.lookup_failed", f"TXT lookup for {name} failed: {answer.error}"))
            no_key.add(signature.index)
        elif answer.unknown:
            found.append(finding("dkim.lookup_failed", f"{name} is outside the zone files: the signature was not "
                                 "verified", answer.error))
            no_key.add(signature.index)
        elif answer.records:
            keys[name] = answer.records[0].text.encode()
        else:
            # NXDOMAIN or no TXT: there is no key to verify with, which is not a signature that does not verify
            no_key.add(signature.index)
            found.append(finding("message.dkim_key_missing", f"DKIM signature d={signature.domain} "
                                     f"s={signature.selector}: no key published at {name}",
                                     f"TXT {name}: {answer.error or answer.status}", subject=name))

    def from_our_resolver(name: bytes | str, timeout: float = 5) -> bytes | None:
        text = name.decode() if isinstance(name, bytes) else name
        return keys.get(text.rstrip(".").lower())

    valid = []
    logger = _silent_logger()
    for signature in parsed:
        if signature is None:
            found.append(finding("message.dkim_invalid", "a DKIM-Signature header does not parse (needs d=, s=, h=)"))
            continue
        if signature.index in no_key:
            continue
        try:
            verified = dkim.DKIM(raw, logger=logger).verify(idx=signature.index, dnsfunc=from_our_resolver)
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
