"""What the seed's provider found of a placement message: SPF, DKIM (with the signing domain), DMARC and ARC, read
from its own `Authentication-Results` headers (RFC 8601).

As the inbox reader does (sender.feedback.authentication), only headers under the provider's authserv-id (the
seed's `imap.authserv_id`) are believed: anyone can write such a header into what they send. A provider may write
one header with every result (Gmail) or one per checker (OpenDKIM, policyd-spf and OpenDMARC each add their own):
each method's result is the one in the topmost trusted header that has it (the provider's last word); the DKIM
result is, of that header's signatures, the one whose signing domain aligns with the From domain when there is one
(the signature DMARC reads), else the first. No trusted id, no header under it: every verdict is `none`, and the
message is still placed by its folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.message import Message

from sender.feedback.authentication import trusted_results

NONE = "none"


@dataclass(frozen=True)
class Verdicts:
    """One message's results as the receiver wrote them; `header` is the trusted header itself, for the record."""

    spf: str = NONE
    dkim: str = NONE
    dkim_domain: str | None = None
    dmarc: str = NONE
    arc: str = NONE
    header: str | None = None


def read_verdicts(message: Message, authserv_id: str | None, from_domain: str) -> Verdicts:
    """The trusted Authentication-Results of `message` (From domain `from_domain`) under `authserv_id`."""
    if not authserv_id:
        return Verdicts()
    found: dict[str, str] = {}
    signatures: list[tuple[str, str | None]] | None = None
    kept: list[str] = []
    for value, parsed in trusted_results(message, authserv_id):
        kept.append(" ".join(value.split()))
        own: list[tuple[str, str | None]] = []
        for result in parsed.results:
            method = str(getattr(result, "method", "")).lower()
            outcome = str(getattr(result, "result", "")).lower() or NONE
            if method == "dkim":
                own.append((outcome, _property(result, "header", "d")))
            elif method in ("spf", "dmarc", "arc"):
                found.setdefault(method, outcome)
        if own and signatures is None:
            signatures = own
    if not kept:
        return Verdicts()
    dkim, domain = _chosen_signature(signatures or [], from_domain)
    return Verdicts(spf=found.get("spf", NONE), dkim=dkim, dkim_domain=domain, dmarc=found.get("dmarc", NONE),
                    arc=found.get("arc", NONE), header="\n".join(kept))


def _chosen_signature(signatures: list[tuple[str, str | None]], from_domain: str) -> tuple[str, str | None]:
    """The aligned signature's result (relaxed: the From domain or a parent/child of it), else the first one's."""
    if not signatures:
        return NONE, None
    wanted = from_domain.strip().rstrip(".").lower()
    for outcome, domain in signatures:
        if domain and aligned(domain, wanted):
            return outcome, domain
    return signatures[0]


def aligned(signing_domain: str, from_domain: str) -> bool:
    """Relaxed alignment as a receiver without the public suffix list can tell it: the same domain, or one
    inside the other (mail.example.com signs for example.com)."""
    a = signing_domain.strip().rstrip(".").lower()
    b = from_domain.strip().rstrip(".").lower()
    return a == b or a.endswith("." + b) or b.endswith("." + a)


def _property(result: object, kind: str, name: str) -> str | None:
    for prop in getattr(result, "properties", []) or []:
        if getattr(prop, "type", None) == kind and getattr(prop, "name", None) == name:
            value = str(getattr(prop, "value", "") or "").strip().rstrip(".").lower()
            return value or None
    return None
