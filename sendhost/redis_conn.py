"""The one Redis policy: how every package opens a client (by role), and how a Redis failure becomes an error fit
for the user.

Roles say how long a caller may wait. The hot path (a sender's lease, a guard's reserve) must never wait long on a
sick Redis: a short socket timeout and one retry without backoff (a stale pooled connection after a restart), after
which it falls back. Admin commands (`sendhost pool ...`, `warmup ...`) may wait longer, and also retry once
without backoff: redis-py's own default backs off for seconds between three retries.

A Redis that refuses who we are (a wrong password, an unknown user, an ACL without the command) is configuration,
not an outage: `RedisRefused`, exit 2, in one wording naming where the URL came from (`connect(source=...)`). So is a
`rediss://` URL at a server that speaks plain text, which `check_access` finds in about a second instead of waiting
out every timeout of the TLS handshake.
"""

from __future__ import annotations

import socket
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from sendhost.embedded import ensure_embedded_redis
from sendhost.errors import ConfigError, OperationFailed
from sendhost.masking import mask_text, mask_url
from sendhost.redis_url import validate_redis_url

DEFAULT_STATE_DIR = Path(".sendhost")


@dataclass(frozen=True)
class Role:
    """What a client is for: how long one call may wait, how often it is retried (never with backoff), and whether
    a new connection skips the handshake's optional round trips.

    The socket timeout bounds each round trip, not a call: redis-py's default handshake on a new connection is four
    of them (HELLO 3, CLIENT MAINT_NOTIFICATIONS, CLIENT SETINFO twice), each allowed the whole timeout. A hot-path
    call that reconnects after a Redis restart paid them all, twice with its retry, and on a loaded machine a lease
    took 2.26 s against a 1 s bound. `lean` connections speak RESP2 and send no client info: nothing but the command.
    """

    name: str
    socket_timeout_s: float
    retries: int
    lean: bool = False


HOT_PATH = Role("hot path", socket_timeout_s=0.25, retries=1, lean=True)
ADMIN = Role("admin", socket_timeout_s=5.0, retries=1)
# RESP2 needs no HELLO; no driver info means no CLIENT SETINFO (and, on RESP2, no maintenance notifications).
LEAN_HANDSHAKE: dict[str, object] = {"protocol": 2, "driver_info": None}
# The timeout the warm-up guard's senders use (`Guard.from_url`): a hot path too, with the guard's own retries.
DEFAULT_SOCKET_TIMEOUT_S = 0.5
# How long `check_access` waits for Redis to answer: a TLS handshake or a PING is one round trip, and a server that
# answers more slowly is left to the command's own timeouts (the check says nothing then).
CHECK_TIMEOUT_S = 1.0
# Redis refusing the URL's credentials (WRONGPASS, NOAUTH) or a command to its user (NOPERM).
REFUSALS: tuple[type[redis.RedisError], ...] = (redis.AuthenticationError, redis.exceptions.NoPermissionError)
# Where each client's URL came from ("env SENDHOST_REDIS_URL", "flag --redis-url", ...), for the refusal's message.
_SOURCES: weakref.WeakKeyDictionary[redis.ConnectionPool, str] = weakref.WeakKeyDictionary()


def connect(url: str | None, *, role: Role = ADMIN, state_dir: Path = DEFAULT_STATE_DIR,
            socket_timeout: float | None = None, source: str | None = None) -> redis.Redis:
    """A client for `url`, or for the embedded server under `state_dir` when `url` is None or empty, with `role`'s
    timeout (`socket_timeout` overrides it) and retries; `source` says where `url` came from, for messages.

    Raises ValueError for a malformed URL (at construction, never later on a hot path).
    """
    if not url:
        url = ensure_embedded_redis(state_dir)
    validate_redis_url(url)
    timeout = role.socket_timeout_s if socket_timeout is None else socket_timeout
    handshake = LEAN_HANDSHAKE if role.lean else {}
    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                  decode_responses=True, retry=Retry(NoBackoff(), role.retries), **handshake)
    if source:
        _SOURCES[client.connection_pool] = source
    return client


class RedisRefused(ConfigError):
    """Redis refused the URL's user or password, or a command to that user, or a `rediss://` URL met a plain-text
    server: exit 2, naming where the URL came from and what to change there."""


def check_access(url: str, source: str) -> None:
    """One PING with a short timeout, before a command starts: RedisRefused when Redis refuses the URL's credentials
    or `url` is `rediss://` and the server speaks plain text. Any other failure (down, slow) is left to the command,
    which says it in its own words and may fall back."""
    probe = redis.Redis.from_url(url, socket_timeout=CHECK_TIMEOUT_S, socket_connect_timeout=CHECK_TIMEOUT_S,
                                 retry=Retry(NoBackoff(), 0), **LEAN_HANDSHAKE)
    _SOURCES[probe.connection_pool] = source
    try:
        probe.ping()
    except REFUSALS as exc:
        raise RedisRefused(refused_message(exc, probe)) from None
    except (redis.ConnectionError, redis.TimeoutError):
        kwargs = probe.connection_pool.connection_kwargs
        if url.startswith("rediss://") and _plain_text_redis(kwargs.get("host", ""), kwargs.get("port", 6379)):
            raise RedisRefused(
                f"the Redis URL from {source} is rediss:// (TLS), but {kwargs.get('host')}:{kwargs.get('port')} "
                f"speaks plain text (it answered PING in clear, not the TLS handshake): use redis:// in "
                f"{_fix_place(source)}, or the server's TLS port") from None
    except redis.RedisError:
        pass
    finally:
        probe.close()


def _plain_text_redis(host: str, port: int) -> bool:
    """Does `host:port` answer a clear-text PING as Redis does (+PONG, or -NOAUTH when it wants a password)? A TLS
    server answers it with an alert or by closing."""
    with suppress(OSError), socket.create_connection((host, port), timeout=CHECK_TIMEOUT_S) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(16)[:1] in (b"+", b"-")
    return False


def refused_message(exc: redis.RedisError, client: redis.Redis | None = None) -> str:
    """The one wording of a Redis refusal (`REFUSALS`): which server, what it said, where the URL came from, the fix."""
    source = _SOURCES.get(client.connection_pool) if client is not None else None
    url = f"the Redis URL from {source}" if source else "the Redis URL"
    said = mask_text(str(exc))
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return (f"Redis{_where(client)} refused a command to the user of {url} ({said}): use an admin user's URL "
                f"in {_fix_place(source)}, or grant that user the command (ACL SETUSER)")
    return (f"Redis{_where(client)} refused the user or password of {url} ({said}): correct them in "
            f"{_fix_place(source)}")


def url_source(client: redis.Redis) -> str | None:
    """Where `client`'s URL came from, when `connect` was told."""
    return _SOURCES.get(client.connection_pool)


def _fix_place(source: str | None) -> str:
    """The setting to edit, from a source such as "env SENDHOST_REDIS_URL", "flag --redis-url" or
    "inventory inventory.yml:4"."""
    if source is None:
        return "--redis-url, SENDHOST_REDIS_URL or sendhost_redis_url"
    kind, _, where = source.partition(" ")
    if kind == "inventory":
        return f"sendhost_redis_url ({where})"
    return where if kind in ("env", "flag") and where else source


class RedisUnavailable(OperationFailed):
    """Redis could not be reached or failed a command: exit 1, naming the operation and the server."""


@contextmanager
def redis_errors(what: str, client: redis.Redis | None = None,
                 error: type[OperationFailed] = RedisUnavailable) -> Iterator[None]:
    """Turn a Redis failure inside the block into `error` (a package's own subclass of OperationFailed, exit 1):
    one line naming `what` and the server; a refusal into RedisRefused (exit 2). The one place a Redis error becomes
    the toolkit's."""
    try:
        yield
    except REFUSALS as exc:
        raise RedisRefused(refused_message(exc, client)) from exc
    except RedisRefused as exc:  # from an inner block that did not know the client: now say where the URL came from
        if client is None or not isinstance(exc.__cause__, REFUSALS):
            raise
        raise RedisRefused(refused_message(exc.__cause__, client)) from exc.__cause__
    except redis.RedisError as exc:
        source = url_source(client) if client is not None else None
        raise error(f"cannot {what}: Redis{_where(client)} said {type(exc).__name__}: {mask_text(str(exc))}; check "
                    f"that it is running and reachable ({f'the URL from {source}' if source else 'redis_url'})"
                    ) from exc


def _where(client: redis.Redis | None) -> str:
    if client is None:
        return ""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f" at {kwargs['path']}"
    host, port, db = kwargs.get("host"), kwargs.get("port"), kwargs.get("db", 0)
    return f" at {mask_url(f'redis://{host}:{port}/{db}')}" if host else ""
