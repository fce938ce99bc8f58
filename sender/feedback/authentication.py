"""How sure a message in the inbox is of its From: the DMARC result the mailbox provider itself wrote.

The receiving provider checks SPF, DKIM and DMARC on arrival and writes what it found in an `Authentication-Results`
header (RFC 8601) under its own authserv-id (Gmail: `mx.google.com`). Anyone can write such a header into the mail
they send, so only headers under the provider's id (the mailbox's `imap.authserv_id`) are read, and of those:

- `fail` when any says the From domain's DMARC fails (a header under the trusted id that the sender wrote and the
  provider did not strip can only make the sender's own mail count for less);
- `pass` when the topmost one, the provider's own last word, says it passes;
- `none` otherwise: no trusted id configured, no header under it, no DMARC result, a domain that publishes no DMARC
  policy (`dmarc=none`), a temporary or permanent error, or a result about another domain than the From's.

Headers are parsed with `authres` (the RFC 8601 parser of dkimpy's author); one it cannot parse is not trusted.
"""

from __future__ import annotations

from collections.abc import Iterator
from email.message import Message
from typing import Any

import authres
import authres.arc
import authres.dmarc

from sender.feedback.mime import MAX_HEADER, headers
from sender.ledger.events import Verdict

MAX_RESULTS_HEADERS = 16  # a message that passed through a few hops of one provider carries 2-4
_CONTEXT = authres.FeatureContext(authres.dmarc, authres.arc)


def trusted_results(message: Message, authserv_id: str) -> Iterator[tuple[str, Any]]:
    """Each `Authentication-Results` header of `message` written under `authserv_id`, topmost first: the header's
    text and what `authres` parsed of it. A header cut to fit, or one off the grammar, is not trusted."""
    trusted = authserv_id.strip().lower()
    for value in headers(message, "Authentication-Results", MAX_RESULTS_HEADERS):
        if len(value) >= MAX_HEADER:
            continue  # cut to fit: no longer what the provider wrote
        try:
            parsed = _CONTEXT.parse("Authentication-Results: " + value)
        except Exception:  # authres raises its own SyntaxError and friends on anything off the grammar
            continue
        if str(parsed.authserv_id or "").lower() == trusted:
            yield value, parsed


def dmarc_verdict(message: Message, authserv_id: str | None, from_domain: str) -> Verdict:
    """The provider's DMARC verdict on `message`'s From domain `from_domain`, read only under `authserv_id`."""
    if not authserv_id:
        return Verdict.NONE
    results = [_dmarc_result(parsed.results, from_domain) for _, parsed in trusted_results(message, authserv_id)]
    if Verdict.FAIL in results:
        return Verdict.FAIL
    return results[0] if results and results[0] is Verdict.PASS else Verdict.NONE


def _dmarc_result(results: list[object], from_domain: str) -> Verdict:
    """The DMARC result among one header's results about `from_domain` (FAIL wins within a header)."""
    found = Verdict.NONE
    for result in results:
        if str(getattr(result, "method", "")).lower() != "dmarc":
            continue
        about = str(getattr(result, "header_from", "") or "").strip().rstrip(".").lower()
        if about and about != from_domain.strip().rstrip(".").lower():
            continue  # a result about another domain says nothing of this From
        outcome = str(getattr(result, "result", "")).lower()
        if outcome == "fail":
            return Verdict.FAIL
        if outcome == "pass":
            found = Verdict.PASS
    return found
