"""Connections to the ledger's PostgreSQL (a configured URL, or the embedded server of sender.embedded).

Every call the sender makes is one database function in its own transaction (autocommit): no transaction is
ever held open across an SMTP conversation.

Safe through PgBouncer in transaction pooling mode (docs/pgbouncer.md), where each transaction may run on another
server connection: no startup `options` (PgBouncer refuses them), no server-side prepared statements
(`prepare_threshold=None`: a statement prepared on one server connection is unknown, or a duplicate, on the next),
no session setting. The statement timeout is set for each call's own transaction (`execute`, `set_local_timeout`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from sender.errors import LedgerUnavailable, SenderConfigError
from sender.ledger.queries import query
from sendhost import signals
from sendhost.database_url import database_url_problem
from sendhost.masking import mask_url, scrub

CONNECT_TIMEOUT_S = 5
# A statement that takes longer than this is a sick database, not a slow query: the ledger's are all tiny.
STATEMENT_TIMEOUT_MS = 15_000


def validate_url(url: str) -> str:
    """`url` if it is a PostgreSQL URL libpq reads as written; else SenderConfigError showing it masked."""
    problem = database_url_problem(url)
    if problem is not None:
        raise SenderConfigError(f"database URL {mask_url(url)!r}: {problem} (--database-url or "
                                "SENDHOST_DATABASE_URL)")
    return url


def connect(url: str, *, connect_timeout: int = CONNECT_TIMEOUT_S) -> psycopg.Connection[TupleRow]:
    """An autocommit connection to `url`; LedgerUnavailable naming the (masked) URL when it does not answer."""
    validate_url(url)
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout, prepare_threshold=None,
                               application_name="sendhost")
    except psycopg.ProgrammingError as exc:  # a malformed URL
        raise SenderConfigError(f"database URL {mask_url(url)!r}: {error_line(exc, url)}; fix --database-url or "
                                "SENDHOST_DATABASE_URL") from None
    except psycopg.OperationalError as exc:
        raise LedgerUnavailable(f"database {mask_url(url)} unreachable: {error_line(exc, url)}; start it or fix "
                                "--database-url / SENDHOST_DATABASE_URL") from None


def execute(conn: psycopg.Connection, statement: str, params: Mapping[str, Any] | None = None) -> psycopg.Cursor:
    """Run `statement` in an autocommit transaction of its own under the ledger's statement timeout: the timeout
    (set_config's is_local) and the statement go in one pipeline, one implicit transaction, one round trip; the
    cursor holds its rows. Inside an explicit transaction, `set_local_timeout` once instead."""
    with conn.pipeline():
        set_local_timeout(conn)
        cursor = conn.execute(statement, params)
    return cursor


def set_local_timeout(conn: psycopg.Connection, ms: int = STATEMENT_TIMEOUT_MS) -> None:
    """The statement timeout for the rest of the current transaction only (never the session's)."""
    conn.execute(query("local_statement_timeout"), {"ms": str(ms)})


def error_line(exc: Exception, url: str | None = None) -> str:
    """The first line of a psycopg error, scrubbed of anything of `url`'s secrets (libpq quotes what it misread)."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return scrub(first, *([url] if url else []))


@contextmanager
def transaction(conn: psycopg.Connection[TupleRow]) -> Iterator[None]:
    """A transaction on `conn` that a Ctrl-C or a stop waits for (sendhost.signals): committed or rolled back whole,
    never cut while a statement runs (which leaves the connection busy, its rollback failing with a warning)."""
    with signals.held(), conn.transaction():
        yield
