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
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.exceptions import RedisClusterException
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
# Redis failing a call: redis-py's errors, and a cluster client's RedisClusterException, which is not one of them
# (it says no node answered when the client re-read the slot map: the whole cluster is down or unreachable).
FAILURES: tuple[type[Exception], ...] = (redis.RedisError, RedisClusterException)
# Redis refusing the URL's credentials (WRONGPASS, NOAUTH) or a command to its user (NOPERM).
REFUSALS: tuple[type[redis.RedisError], ...] = (redis.AuthenticationError, redis.exceptions.NoPermissionError)
# Where each client's URL came from ("env SENDHOST_REDIS_URL", "flag --redis-url", ...), for the refusal's message:
# keyed on a single client's connection pool, or on the cluster client itself (it has a pool per node).
_SOURCES: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
# `?cluster=yes` on a URL: its host is one node of a Redis Cluster, and the client discovers the others.
CLUSTER_PARAM = "cluster"
_YES, _NO = ("yes", "true", "1", "on"), ("no", "false", "0", "off")


def cluster_url(url: str) -> tuple[bool, str]:
    """Whether `url` names a Redis Cluster (`?cluster=yes`), and the URL without that parameter (what redis-py
    reads). ValueError on any other value of it."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    wanted = [value.strip().lower() for name, value in pairs if name.strip().lower() == CLUSTER_PARAM]
    if not wanted:
        return False, url
    if wanted[-1] not in _YES + _NO:
        raise ValueError(f"Redis URL parameter cluster={wanted[-1]!r}: write cluster=yes for a Redis Cluster "
                         "(any one node's address), or leave it out for a single Redis")
    rest = urlencode([(name, value) for name, value in pairs if name.strip().lower() != CLUSTER_PARAM])
    return wanted[-1] in _YES, urlunsplit(parts._replace(query=rest))


def _refusal_in(exc: BaseException | None) -> redis.RedisError | None:
    """The refusal (`REFUSALS`) `exc` is or was raised from, if any."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, REFUSALS):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _source_key(client: Any) -> Any:
    return getattr(client, "connection_pool", client)


def connect(url: str | None, *, role: Role = ADMIN, state_dir: Path = DEFAULT_STATE_DIR,
            socket_timeout: float | None = None, source: str | None = None) -> redis.Redis:
    """A client for `url`, or for the embedded server under `state_dir` when `url` is None or empty, with `role`'s
    timeout (`socket_timeout` overrides it) and retries; `source` says where `url` came from, for messages.

    A URL with `?cluster=yes` gives a `redis.cluster.RedisCluster` (typed as `redis.Redis`: its commands are the
    same), which reads the slot map from the node named and routes each command by its key; the role's timeout
    and retries hold for every node.

    Raises ValueError for a malformed URL (at construction, never later on a hot path).
    """
    if not url:
        url = ensure_embedded_redis(state_dir)
    validate_redis_url(url)
    is_cluster, url = cluster_url(url)
    timeout = role.socket_timeout_s if socket_timeout is None else socket_timeout
    handshake = LEAN_HANDSHAKE if role.lean else {}
    options: dict[str, Any] = dict(socket_timeout=timeout, socket_connect_timeout=timeout, decode_responses=True,
                                   retry=Retry(NoBackoff(), role.retries), **handshake)
    client: Any
    if is_cluster:
        from redis.cluster import RedisCluster

        if url.startswith("unix://"):
            raise ValueError("a Redis Cluster URL names a node by host and port (redis:// or rediss://), not a "
                             "unix socket; drop cluster=yes or give a node's TCP address")
        if urlsplit(url).path.strip("/") not in ("", "0"):
            raise ValueError(f"Redis URL {mask_url(url)!r}: a Redis Cluster has database 0 only; end the URL "
                             "with /0 (or no database), or drop cluster=yes")
        try:  # a cluster client reads the slot map as it is built, so a refusal or an outage is met here
            client = RedisCluster.from_url(url, **options)
        except FAILURES as exc:
            refusal = _refusal_in(exc)  # redis-py wraps a node's refusal in "cannot be connected"
            if refusal is not None:
                raise RedisRefused(refused_message(refusal, source=source)) from None
            raise RedisUnavailable(f"cannot read the slot map of the Redis Cluster at {mask_url(url)}: "
                                   f"{mask_text(str(exc))}; check that its nodes are running and reachable"
                                   f"{f' (the URL from {source})' if source else ''}") from None
    else:
        client = redis.Redis.from_url(url, **options)
    if source:
        _SOURCES[_source_key(client)] = source
    return client


class RedisRefused(ConfigError):
    """Redis refused the URL's user or password, or a command to that user, or a `rediss://` URL met a plain-text
    server: exit 2, naming where the URL came from and what to change there."""


def check_access(url: str, source: str) -> None:
    """One PING with a short timeout, before a command starts: RedisRefused when Redis refuses the URL's credentials
    or `url` is `rediss://` and the server speaks plain text. Any other failure (down, slow) is left to the command,
    which says it in its own words and may fall back."""
    try:
        url = cluster_url(url)[1]  # a cluster's node answers PING as a single Redis does
    except ValueError:
        return  # `connect` refuses the URL in its own words
    probe = redis.Redis.from_url(url, socket_timeout=CHECK_TIMEOUT_S, socket_connect_timeout=CHECK_TIMEOUT_S,
                                 retry=Retry(NoBackoff(), 0), **LEAN_HANDSHAKE)
    _SOURCES[_source_key(probe)] = source
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


def refused_message(exc: redis.RedisError, client: redis.Redis | None = None, *, source: str | None = None) -> str:
    """The one wording of a Redis refusal (`REFUSALS`): which server, what it said, where the URL came from (as
    `connect` was told, or `source`), the fix."""
    if source is None and client is not None:
        source = _SOURCES.get(_source_key(client))
    url = f"the Redis URL from {source}" if source else "the Redis URL"
    said = mask_text(str(exc))
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return (f"Redis{_where(client)} refused a command to the user of {url} ({said}): use an admin user's URL "
                f"in {_fix_place(source)}, or grant that user the command (ACL SETUSER)")
    return (f"Redis{_where(client)} refused the user or password of {url} ({said}): correct them in "
            f"{_fix_place(source)}")


def url_source(client: redis.Redis) -> str | None:
    """Where `client`'s URL came from, when `connect` was told."""
    return _SOURCES.get(_source_key(client))


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
    except FAILURES as exc:
        source = url_source(client) if client is not None else None
        raise error(f"cannot {what}: Redis{_where(client)} said {type(exc).__name__}: {mask_text(str(exc))}; check "
                    f"that it is running and reachable ({f'the URL from {source}' if source else 'redis_url'})"
                    ) from exc


def _where(client: redis.Redis | None) -> str:
    if client is None:
        return ""
    if not hasattr(client, "connection_pool"):  # a cluster client: the node it was pointed at
        node = getattr(client, "get_default_node", lambda: None)()
        return f" Cluster at {node.host}:{node.port}" if node is not None else " Cluster"
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f" at {kwargs['path']}"
    host, port, db = kwargs.get("host"), kwargs.get("port"), kwargs.get("db", 0)
    return f" at {mask_url(f'redis://{host}:{port}/{db}')}" if host else ""
