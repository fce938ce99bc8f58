"""PostgreSQL URLs: what makes one unusable, said without quoting it. No database client here, so the inventory
can check one cheaply (toolkit.inventory) where the ledger checks it before connecting (sender.ledger.connection)."""

from __future__ import annotations

import re

_URL_RE = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)
EXPECTED = "postgresql://USER:PASSWORD@HOST:PORT/DB"


def database_url_problem(url: str) -> str | None:
    """What is wrong with `url` as a PostgreSQL URL, never quoting it (it may hold a password); None if nothing."""
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in url):
        return "it holds a control character (a newline?); remove it"
    if not _URL_RE.match(url):
        return f"it is not a PostgreSQL URL; use {EXPECTED}"
    # libpq ends the user part at the first '@' (Python's parser at the last one) and at a '/': an unencoded '@',
    # '/', '?' or '#' in a password sends the rest of it to the host, the port or the database name, and from there
    # into libpq's error messages.
    userinfo, at, _ = url.partition("://")[2].rpartition("@")
    if at and any(char in userinfo for char in "@/?#"):
        return ("the user or password holds '@', '/', '?' or '#'; percent-encode them (%40, %2F, %3F, %23), and "
                "any '@' after the host")
    return None
