"""Each sender host's own Redis ACL user, for `sendhost provision`: created or refreshed on the pool's Redis before
the playbook runs, and the URL its agent connects with (docs/security.md#the-senders-redis-user)."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ippool.sender_acl import apply_sender_acl, sender_key, sender_password, sender_url
from sendhost.errors import ConfigError
from sendhost.redis_conn import redis_errors

if TYPE_CHECKING:
    import redis

KEY_FILE_ENV = "SENDHOST_SENDER_ACL_KEY_FILE"
KEY_FILE_NAME = "sender-acl.key"
MIN_KEY_BYTES = 16


def key_path(env: dict[str, str] | None, state_dir: Path) -> Path:
    """The key file sender passwords derive from: $SENDHOST_SENDER_ACL_KEY_FILE, else STATE_DIR/sender-acl.key."""
    named = (env or {}).get(KEY_FILE_ENV)
    return Path(named) if named else state_dir / KEY_FILE_NAME


def sender_redis_urls(connect: Callable[[], redis.Redis], admin_url: str, hosts: Sequence[str], key_file: Path, *,
                      check: bool = False, groups: Mapping[str, Sequence[str]] | None = None) -> dict[str, str]:
    """Load the function library and create or refresh each host's sender user on the Redis `connect()` reaches
    (as admin), its warm-up grant limited to `groups[host]` (the mailbox groups it serves; a host missing there:
    every group), and return each host's URL. Passwords derive from `key_file` (created 0600 on first use), so a
    rerun writes the same URLs.
    `check` (a dry run) changes neither Redis nor the key file. ConfigError when the key cannot be read or written
    or Redis is older than 7.0 (no selectors, no Functions); RedisUnavailable when Redis fails."""
    try:
        key = sender_key(key_file, create=not check)
    except OSError as exc:
        raise ConfigError(f"cannot read or create the sender ACL key {key_file}: {exc.strerror}; fix its "
                          f"permissions or set {KEY_FILE_ENV}") from None
    if key is None:  # a dry run before the first real one: a preview with passwords nobody will use
        key = secrets.token_bytes(32)
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(f"the sender ACL key {key_file} holds {len(key)} bytes, too few to derive passwords from; "
                          "delete it (provision creates a new one and rotates every sender's password)")
    if not check:
        client = connect()
        try:
            with redis_errors("create the sender hosts' Redis ACL users", client):
                for host in hosts:
                    apply_sender_acl(client, host, sender_password(key, host), (groups or {}).get(host))
        except ValueError as exc:  # a Redis too old for the rule
            raise ConfigError(f"{exc}, or provision against a Redis 7 (redis_url)") from None
        finally:
            client.close()
    return {host: sender_url(admin_url, host, sender_password(key, host)) for host in hosts}
