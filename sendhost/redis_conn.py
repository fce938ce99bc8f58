"""The one Redis policy: how every package opens a client (by role), and how a Redis failure becomes an error fit
for the user.

Roles say how long a caller may wait. The hot path (a sender's lease, a guard's reserve) must never wait long on a
sick Redis: a short socket timeout and one retry without backoff (a stale pooled connection after a restart), after
which it falls back. Admin commands (`sendhost pool ...`, `warmup ...`) may wait longer, and also retry once
without backoff: redis-py's own default backs off for seconds between three retries.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from sendhost.embedded import ensure_embedded_redis
from sendhost.errors import OperationFailed
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


def connect(url: str | None, *, role: Role = ADMIN, state_dir: Path = DEFAULT_STATE_DIR,
            socket_timeout: float | None = None) -> redis.Redis:
    """A client for `url`, or for the embedded server under `state_dir` when `url` is None or empty, with `role`'s
    timeout (`socket_timeout` overrides it) and retries.

    Raises ValueError for a malformed URL (at construction, never later on a hot path).
    """
    if not url:
        url = ensure_embedded_redis(state_dir)
    validate_redis_url(url)
    timeout = role.socket_timeout_s if socket_timeout is None else socket_timeout
    handshake = LEAN_HANDSHAKE if role.lean else {}
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                decode_responses=True, retry=Retry(NoBackoff(), role.retries), **handshake)


class RedisUnavailable(OperationFailed):
    """Redis could not be reached or failed a command: exit 1, naming the operation and the server."""


@contextmanager
def redis_errors(what: str, client: redis.Redis | None = None,
                 error: type[OperationFailed] = RedisUnavailable) -> Iterator[None]:
    """Turn a Redis failure inside the block into `error` (a package's own subclass of OperationFailed, exit 1):
    one line naming `what` and the server. The one place a Redis error becomes the toolkit's."""
    try:
        yield
    except redis.RedisError as exc:
        raise error(f"cannot {what}: Redis{_where(client)} said {type(exc).__name__}: {mask_text(str(exc))}; check "
                    "that it is "
                    f"running and reachable (redis_url)") from exc


def _where(client: redis.Redis | None) -> str:
    if client is None:
        return ""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f" at {kwargs['path']}"
    host, port, db = kwargs.get("host"), kwargs.get("port"), kwargs.get("db", 0)
    return f" at {mask_url(f'redis://{host}:{port}/{db}')}" if host else ""
