"""The `sendhost sender` group's shared state: the App, the --database-url flag, and the ledger they name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from toolkit.app import App

if TYPE_CHECKING:
    from sender import Ledger
    from sender.assembly import LedgerPlace

EXIT_HELP = ("Exit 0 ok; 1 the database or a service failed; 2 bad input (the message names it). "
             "Database: --database-url > SENDHOST_DATABASE_URL > inventory sendhost_database_url > an embedded "
             "PostgreSQL under the state directory.")


@dataclass
class SenderContext:
    app: App
    database_url_flag: str | None

    def ledger_place(self) -> LedgerPlace:
        """Where the ledger is, by the precedence in EXIT_HELP."""
        from sender.assembly import LedgerPlace

        configured = configured_database_url(self.app, self.database_url_flag)
        return LedgerPlace(configured[0] if configured is not None else None, self.app.state_dir)

    def database_url(self) -> tuple[str, str]:
        """(URL, where it came from), by the precedence in EXIT_HELP."""
        configured = configured_database_url(self.app, self.database_url_flag)
        if configured is not None:
            return configured
        from sender.assembly import LedgerPlace

        return LedgerPlace(None, self.app.state_dir).url, "embedded"

    def ledger(self, *, migrated: bool = True) -> Ledger:
        """The ledger; the embedded one is migrated on first use, a configured one must have been migrated."""
        from sender import Ledger

        place = self.ledger_place()
        return place.open() if migrated else Ledger.from_url(place.url)


def configured_database_url(app: App, flag: str | None = None) -> tuple[str, str] | None:
    """(URL, where it came from) of a configured ledger, by the precedence in EXIT_HELP; None when none is (the
    embedded one, which starting would write under the state directory)."""
    from sender.ledger import connection as db

    if flag:
        return db.validate_url(flag), "flag --database-url"
    if app.env.get("SENDHOST_DATABASE_URL"):
        return db.validate_url(app.env["SENDHOST_DATABASE_URL"]), "env SENDHOST_DATABASE_URL"
    inventory = app.inventory
    if inventory is not None and inventory.database_url:
        return db.validate_url(inventory.database_url), f"inventory {inventory.path}:{inventory.database_url_line}"
    return None


pass_sender = click.make_pass_decorator(SenderContext)
