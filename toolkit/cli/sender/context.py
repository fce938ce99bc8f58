"""The `sendhost sender` group's shared state: the App, the --database-url flag, and the ledger they name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from toolkit.app import App

if TYPE_CHECKING:
    from sender import Ledger

EXIT_HELP = ("Exit 0 ok; 1 the database or a service failed; 2 bad input (the message names it). "
             "Database: --database-url > SENDHOST_DATABASE_URL > inventory sendhost_database_url > an embedded "
             "PostgreSQL under the state directory.")


@dataclass
class SenderContext:
    app: App
    database_url_flag: str | None

    def database_url(self) -> tuple[str, str]:
        """(URL, where it came from), by the precedence in EXIT_HELP."""
        from sender.ledger import connection as db

        configured = configured_database_url(self.app, self.database_url_flag)
        return configured if configured is not None else (db.embedded_url(self.app.state_dir), "embedded")

    def ledger(self, *, migrated: bool = True) -> Ledger:
        """The ledger; the embedded one is migrated on first use, a configured one must have been migrated."""
        from sender import Ledger

        url, source = self.database_url()
        ledger = Ledger.from_url(url)
        if migrated:
            if source == "embedded":
                ledger.migrate()
            else:
                ledger.check_schema()
        return ledger


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
