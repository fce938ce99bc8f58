"""The App object every command receives: flags, lazily built configuration, inventory and clients."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from sendhost.errors import ConfigError, SendhostError
from toolkit.config import Config, Setting, resolve_config, resolve_database_url, resolve_inventory_path
from toolkit.inventory import Inventory, load_inventory

if TYPE_CHECKING:
    import redis

log = logging.getLogger("sendhost")


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
        return client

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
