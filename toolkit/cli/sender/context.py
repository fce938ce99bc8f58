"""The shared state of the groups that open the ledger (`sender`, `campaign`, `lead`): the App, the --database-url
flag, and the ledger they name."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import click

from toolkit.app import App
from toolkit.cli.help_format import WholeHelpGroup

if TYPE_CHECKING:
    import redis

    from sender import Ledger
    from sender.assembly import LedgerPlace
    from warmup import Guard

# A status must answer even when Redis does not: a short wait, then what it reads from the guard is shown as unknown.
GUARD_TIMEOUT_S = 2.0

EXIT_HELP = ("Exit 0 ok; 1 the database or a service failed; 2 bad input (the message names it). "
             "Database: --database-url > SENDHOST_DATABASE_URL > inventory sendhost_database_url > an embedded "
             "PostgreSQL under the state directory.")


@dataclass
class SenderContext:
    app: App
    database_url_flag: str | None

    @cached_property
    def place(self) -> LedgerPlace:
        """Where the ledger is, by the precedence in EXIT_HELP (toolkit.config); the embedded one starts when its
        URL is first asked for."""
        from sender.assembly import LedgerPlace

        place = LedgerPlace(self.app.database_url(self.database_url_flag).value, self.app.state_dir)
        if place.embedded and self.app.reading:
            from sender.embedded_status import embedded_postgres_status
            from toolkit.app import DATABASE_SETTINGS

            if not embedded_postgres_status(place.state_dir).running:
                place.url  # noqa: B018 (starts it here, so the line below is true when it is read)
                self.app.say_embedded_started("PostgreSQL", DATABASE_SETTINGS)
        return place

    def ledger(self, *, migrated: bool = True) -> Ledger:
        """The ledger; the embedded one is migrated on first use, a configured one must have been migrated."""
        from sender import Ledger

        return self.place.open() if migrated else Ledger.from_url(self.place.url)

    def mailbox_groups(self) -> set[str] | None:
        """The inventory's mailbox groups, what a group named in a file is checked against; None (no check) without
        an inventory or without mailboxes in it."""
        inventory = self.app.inventory
        return {m.group for m in inventory.mailboxes} if inventory is not None and inventory.mailboxes else None

    def group_mailboxes(self, group: str) -> list[str] | None:
        """The inventory's mailboxes of `group` (lower-case); None (the guard's of the group) without an inventory
        or without mailboxes in it."""
        inventory = self.app.inventory
        if inventory is None or not inventory.mailboxes:
            return None
        return [m.address.lower() for m in inventory.mailboxes if m.group == group]

    def status_guard(self) -> tuple[Guard | None, str | None]:
        """The warm-up guard on the configured Redis, or None and why not (a status goes on without it); the caller
        closes it."""
        from warmup import Guard

        client, why = self.status_redis()
        return (Guard(client), None) if client is not None else (None, why)

    def status_redis(self) -> tuple[redis.Redis | None, str | None]:
        """A client of the configured Redis that answered, or None and why not; the caller closes it."""
        import redis

        from sendhost.errors import ConfigError, SendhostError

        try:
            client = self.app.redis(socket_timeout=GUARD_TIMEOUT_S)
            client.ping()
        except ConfigError:
            raise  # a malformed URL is bad input, not an outage
        except (redis.RedisError, SendhostError, OSError) as exc:
            return None, f"Redis unreachable: {type(exc).__name__}: {exc}"
        return client, None


def ledger_group(name: str, help_text: str) -> click.Group:
    """A command group whose commands open the ledger: `--database-url` on the group, a SenderContext as their obj."""

    @click.group(name, cls=WholeHelpGroup, help=help_text, epilog=EXIT_HELP)
    @click.option("--database-url", metavar="URL", help="The ledger's PostgreSQL (env SENDHOST_DATABASE_URL).")
    @click.pass_context
    def group(ctx: click.Context, database_url: str | None) -> None:
        ctx.obj = SenderContext(ctx.ensure_object(App), database_url)

    return group


pass_sender = click.make_pass_decorator(SenderContext)
