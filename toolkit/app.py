"""The App object every command receives: flags, lazily built configuration, inventory and clients."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import click

from sendhost.errors import ConfigError, SendhostError
from toolkit.config import Config, Setting, resolve_config, resolve_database_url, resolve_inventory_path
from toolkit.inventory import Inventory, load_inventory

if TYPE_CHECKING:
    import redis

log = logging.getLogger("sendhost")
C = TypeVar("C", bound=click.Command)
# Marks a command that only reads (reads_only): one that starts an embedded server says so, and which it read.
READS_ONLY = "sendhost_reads_only"
REDIS_SETTINGS = "no --redis-url, SENDHOST_REDIS_URL, REDIS_URL or inventory sendhost_redis_url"
DATABASE_SETTINGS = "no --database-url, SENDHOST_DATABASE_URL or inventory sendhost_database_url"


def reads_only(command: C) -> C:
    """Mark `command` (outermost decorator) as one that only reads: when it has to start the embedded Redis or
    PostgreSQL to read them, it says so on stderr (App.say_embedded_started)."""
    setattr(command, READS_ONLY, True)
    return command


@dataclass
class App:
    inventory_flag: str | None = None
    format_flag: str | None = None
    verbose: int = 0
    redis_url_flag: str | None = None
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    _redis_checked: bool = field(default=False, init=False, repr=False)

    def output_format(self, command_flag: str | None) -> str:
        return command_flag or self.format_flag or self.env.get("SENDHOST_FORMAT") or "table"

    @cached_property
    def inventory(self) -> Inventory | None:
        """The inventory, or None when none was named and ./inventory.yml does not exist."""
        setting = resolve_inventory_path(self.inventory_flag, self.env)
        return load_inventory(Path(setting.value)) if setting.value else None

    def require_inventory(self) -> Inventory:
        if self.inventory is None:
            raise ConfigError(
                "no inventory: pass --inventory PATH or set SENDHOST_INVENTORY (see inventory.example.yml)"
            )
        return self.inventory

    @cached_property
    def config(self) -> Config:
        flags = {"inventory": self.inventory_flag, "redis_url": self.redis_url_flag}
        return resolve_config(flags, self.env, self.inventory)

    @property
    def state_dir(self) -> Path:
        return Path(self.config.state_dir.value or ".sendhost")

    def database_url(self, flag: str | None = None) -> Setting:
        """The ledger's URL and its source (`flag` is `sender --database-url`), value None for the embedded one;
        SenderConfigError for a URL that is not PostgreSQL's."""
        setting = self.config.database_url if flag is None else resolve_database_url(flag, self.env, self.inventory)
        if setting.value is not None:
            from sender.ledger.connection import validate_url  # late: most commands never open the ledger

            validate_url(setting.value)
        return setting

    def redis(self, socket_timeout: float | None = None) -> redis.Redis:
        """A Redis client (the admin role of `sendhost.redis_conn`) for the configured URL, or the embedded server.
        Not created until asked for; `socket_timeout` overrides the role's. A configured Redis that refuses the
        URL's credentials, or a `rediss://` URL at a plain-text server, is exit 2 here (`check_redis`)."""
        from sendhost import redis_conn  # late: `sendhost --help` must not pay for the Redis client

        setting = self.config.redis_url
        starting = not setting.value and self.reading and not _embedded_redis_running(self.state_dir)
        try:
            client = redis_conn.connect(setting.value, role=redis_conn.ADMIN, state_dir=self.state_dir,
                                        socket_timeout=socket_timeout,
                                        source=setting.source if setting.value else None)
        except ValueError as exc:
            raise ConfigError(f"redis_url from {setting.source}: {exc}") from None
        try:
            self.check_redis()
        except BaseException:
            client.close()
            raise
        if starting:
            self.say_embedded_started("Redis", REDIS_SETTINGS)
        return client

    @property
    def reading(self) -> bool:
        """Whether the command running is one that only reads (reads_only)."""
        context = click.get_current_context(silent=True)
        return context is not None and getattr(context.command, READS_ONLY, False)

    def say_embedded_started(self, server: str, unset: str) -> None:
        """The one line a reading command prints on stderr when it started an embedded server to read it. The
        server is left running on purpose: every later command of this state directory uses it (a start costs up
        to seconds), and one stopped under a command that just began using it would fail that command."""
        click.echo(f"reading the embedded {server} under {self.state_dir}/ ({unset}): started it, and it stays up "
                   "for the next command (`sendhost embedded stop` stops it)", err=True)

    def check_redis(self) -> None:
        """Once per command, before the first use of a configured Redis: RedisRefused (exit 2, naming the URL's
        source and the fix) when it refuses the URL's user or password, or the URL is `rediss://` and the server
        speaks plain text. A Redis that is down is left to the command (it says so, or falls back)."""
        setting = self.config.redis_url
        if self._redis_checked or not setting.value:
            return
        from sendhost import redis_conn

        redis_conn.check_access(setting.value, setting.source)
        self._redis_checked = True

    def fail(self, message: str, code: int = 1) -> NoReturn:
        """The one way a command ends in failure."""
        error = SendhostError(message)
        error.exit_code = code
        raise error


def _embedded_redis_running(state_dir: Path) -> bool:
    from sendhost.embedded import embedded_status

    return embedded_status(state_dir).running
