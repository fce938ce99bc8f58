"""Connections to the ledger's PostgreSQL (a configured URL, or the embedded server of sender.embedded).

Every call the sender makes is one database function in its own transaction (autocommit): no transaction is
ever held open across an SMTP conversation.
"""

from __future__ import annotations

import re

import psycopg
from psycopg.rows import TupleRow

from sender.errors import LedgerUnavailable, SenderConfigError

CONNECT_TIMEOUT_S = 5
# A statement that takes longer than this is a sick database, not a slow query: the ledger's are all tiny.
STATEMENT_TIMEOUT_MS = 15_000
_URL_RE = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


def mask(url: str) -> str:
    """The URL with any password replaced, fit for messages and logs."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def validate_url(url: str) -> str:
    if not _URL_RE.match(url):
        raise SenderConfigError(f"database URL {mask(url)!r} is not a PostgreSQL URL; use "
                                "postgresql://USER@HOST:PORT/DB (--database-url or SENDHOST_DATABASE_URL)")
    return url


def connect(url: str, *, connect_timeout: int = CONNECT_TIMEOUT_S) -> psycopg.Connection[TupleRow]:
    """An autocommit connection to `url`; LedgerUnavailable naming the (masked) URL when it does not answer."""
    validate_url(url)
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout,
                               options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}", application_name="sendhost")
    except psycopg.ProgrammingError as exc:  # a malformed URL
        raise SenderConfigError(f"database URL {mask(url)!r}: {exc}; fix --database-url or "
                                "SENDHOST_DATABASE_URL") from None
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LedgerUnavailable(f"database {mask(url)} unreachable: {first}; start it or fix --database-url / "
                                "SENDHOST_DATABASE_URL") from None
