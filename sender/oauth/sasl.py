"""The OAuth SASL mechanisms on the wire: Google's and Microsoft's XOAUTH2, and OAUTHBEARER (RFC 7628), each sent
as one initial response; the one used is chosen from what the server offers."""

from __future__ import annotations

import base64
from enum import StrEnum


class Mechanism(StrEnum):
    OAUTHBEARER = "OAUTHBEARER"
    XOAUTH2 = "XOAUTH2"


# RFC 7628's own mechanism first; Exchange Online offers only XOAUTH2.
PREFERENCE = (Mechanism.OAUTHBEARER, Mechanism.XOAUTH2)


def choose(offered: str) -> Mechanism | None:
    """The mechanism to log in with, from the server's `AUTH` EHLO keyword's value; None: neither is offered."""
    names = {name.upper() for name in offered.split()}
    return next((mechanism for mechanism in PREFERENCE if mechanism.value in names), None)


def initial_response(mechanism: Mechanism, user: str, token: str) -> str:
    """The base64 initial response that carries the bearer token."""
    if mechanism is Mechanism.OAUTHBEARER:
        # gs2 header "n,a=USER," then key/value pairs, each ended by ^A, and a final ^A (RFC 7628 section 3.1).
        # `=` and `,` in the authzid are escaped as RFC 5801 says.
        authzid = user.replace("=", "=3D").replace(",", "=2C")
        raw = f"n,a={authzid},\x01auth=Bearer {token}\x01\x01"
    else:
        raw = f"user={user}\x01auth=Bearer {token}\x01\x01"
    return base64.b64encode(raw.encode()).decode("ascii")


def error_answer(mechanism: Mechanism) -> str:
    """What the client answers a failure challenge (334 with the server's JSON error) with, to get the final 535:
    OAUTHBEARER's dummy ^A (RFC 7628 section 3.2.3); XOAUTH2's empty line."""
    return base64.b64encode(b"\x01").decode("ascii") if mechanism is Mechanism.OAUTHBEARER else ""
