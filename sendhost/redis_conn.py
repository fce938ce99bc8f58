"""One way to open a Redis client: the configured server, or the embedded one when none is configured."""

from __future__ import annotations

from pathlib import Path

import redis

from sendhost.embedded import ensure_embedded_redis
from sendhost.redis_url import validate_redis_url

DEFAULT_STATE_DIR = Path(".sendhost")
# The hot path must never wait long on a sick Redis: a lease falls back instead.
DEFAULT_SOCKET_TIMEOUT_S = 0.5


def connect(
    url: str | None,
    *,
    state_dir: Path = DEFAULT_STATE_DIR,
    socket_timeout: float = DEFAULT_SOCKET_TIMEOUT_S,
) -> redis.Redis:
    """A client for `url`, or for the embedded server under `state_dir` when `url` is None or empty.

    Raises ValueError for a malformed URL (at construction, never later on a hot path).
    """
    if not url:
        url = ensure_embedded_redis(state_dir)
    validate_redis_url(url)
    return redis.Redis.from_url(
        url,
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_timeout,
        decode_responses=True,
    )
