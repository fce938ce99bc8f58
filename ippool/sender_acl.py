"""The Redis ACL user of a sender host: it runs the send path (the pool's lease functions, the warm-up guard, the
warm-up counters' rebuild) on its own host's lease keys and the warm-up keys of the mailbox groups it serves, and
nothing else. Every sender host holds a Redis URL; with the admin user's, any of them could rewrite any slot hash,
flush the pool or read every host's keys. With this user's, it reaches only what the agent's own Redis calls need.

The rule is written with Redis 7 ACL selectors, one per kind of key, so each command is allowed only on the keys
it is used on: INCR and GET on the host's slot used keys (the lease function counts a send there: INCR can only
add, so a sender can use up its own budget but never reset it), HMGET only on its slot and meta hashes (address,
budget, state, generation: the admin's), and nothing on any other host's keys. Redis holds a function's own
commands to the caller's ACL, so a sender cannot smuggle a DEL or FLUSHALL through one.

Only installed code runs for it: the user may FCALL (and FCALL_RO the keyless version check) but has no EVAL,
EVALSHA, SCRIPT or FUNCTION, so it can neither run Lua of its own (a busy loop would freeze the Redis every host
shares: SCRIPT KILL cannot stop a script that wrote) nor load any. ACLs cannot name functions: FCALL is allowed on
the grant's keys for every function, but Redis runs only functions a library registered, and only the admin loads
libraries (`sendhost.lua_library`), so `FCALL anything-else` is refused by Redis itself ("Function not found").

Each grant holds the commands the send path calls on its keys (tests/ippool/test_sender_acl.py holds the function
commands to what the Lua files call; tests/sender/sending/test_sender_acl_agent.py runs the agent's send cycle as
this user).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from ippool.keys import HostKeys
from sendhost.lua_calls import load_library
from sendhost.redis_url import SECRET_PARAMS
from warmup import keys as warmup_keys

# Selectors (`(~keys +commands)`) and Functions arrived in Redis 7.0: older servers can neither hold commands to the
# keys they are for nor keep a sender from running Lua of its own.
MIN_REDIS = (7, 0)
# Commands that take no key: liveness, the clock (`Mailboxes.now_ms`), the library's version check (FCALL_RO of
# `sendhost_version`, keyless: an FCALL_RO with keys is refused, no selector grants it), the MULTI/EXEC of the
# guard's schedule refresh and resume, and on a Redis Cluster the slots table and ASKING, which a client sends
# before its command when a reshard has moved the key (-ASK): it only lets the next command reach a slot still
# being imported, and the command itself is held to the grants.
KEYLESS_COMMANDS = ("ping", "time", "fcall_ro", "multi", "exec", "cluster|slots", "asking", "command")
# How the send path runs Lua: FCALL of the admin's library, on the keys of the grant that names it.
FUNCTION_RUNNERS = ("fcall",)
# What ippool/lua/lease.lua, renew.lua and warmup/lua/*.lua call, besides TIME (the clock prelude, keyless).
LEASE_SCRIPT_COMMANDS = ("hmget", "get", "incr", "zadd", "zscore")
WARMUP_SCRIPT_COMMANDS = ("hmget", "hget", "hset", "hincrby", "del", "zadd", "zcard", "zcount", "zrangebyscore",
                          "zrevrangebyscore", "zremrangebyscore")
# What `warmup.mailboxes.Mailboxes` sends itself for the agent on a group's keys: config/status/history
# (HGETALL), refresh_schedule (DEL, ZADD, HDEL), pause/resume (HSET, HDEL, DEL), status (ZREVRANGEBYSCORE,
# ZCOUNT), and the counters' rebuild marking a mailbox paused (HSET).
WARMUP_CLIENT_COMMANDS = ("hget", "hgetall", "hset", "hdel", "del", "zadd", "zrevrangebyscore", "zcount")
# On the registry (address -> group), shared by every group: read a mailbox's group (HGET, HEXISTS) and add a
# mailbox nobody registered yet (HSETNX, the rebuild after Redis lost it): never move or remove one.
REGISTRY_COMMANDS = ("hget", "hexists", "hsetnx")
# On the system-wide success window (successes.lua), which the breaker of every group reads.
SUCCESSES_COMMANDS = ("zadd", "zremrangebyscore", "zcount")


@dataclass(frozen=True)
class Grant:
    """Commands allowed on keys matching `patterns` (`%R~` for read-only), and why."""

    patterns: tuple[str, ...]
    commands: tuple[str, ...]
    why: str

    def selector(self) -> str:
        keys = " ".join(p if p.startswith("%") else f"~{p}" for p in self.patterns)
        return f"({keys} {' '.join(f'+{c}' for c in self.commands)})"


def sender_user(host: str) -> str:
    """The ACL user name of `host`'s sender."""
    return f"sender-{HostKeys(host).host}"


def sender_grants(host: str, groups: Sequence[str] | None = None) -> list[Grant]:
    """What `host`'s sender may run on which keys, one grant per kind of key; the warm-up keys it may write are
    those of `groups` (the mailbox groups it serves), every group when None."""
    keys = HostKeys(host)
    meta, leases, slots = _glob_escape(keys.meta), _glob_escape(keys.leases), f"{_glob_escape(keys.prefix)}:slot:*"
    # `slot:*` matches the used keys too; what it grants there (FCALL, HMGET) cannot change a string key.
    fallbacks, used = _glob_escape(keys.fallbacks), f"{_glob_escape(keys.prefix)}:slot:*:used"
    served = ["*"] if groups is None else [_glob_escape(_group_name(g)) for g in groups]
    group_keys = tuple(f"{warmup_keys.PREFIX}:{{{group}}}:*" for group in served)
    locks = tuple(warmup_keys.GroupKeys(group).rebuild_lock for group in served)
    grants = [
        Grant((meta, leases, fallbacks, slots), FUNCTION_RUNNERS, "run lease.lua and renew.lua on its own host's "
              "keys"),
        Grant((meta, slots), ("hmget",), "lease.lua reads the host's meta and slot hashes"),
        Grant((used,), ("get", "incr"), "lease.lua reads a slot's used count and counts a send (INCR: it can only "
              "add one)"),
        Grant((fallbacks,), ("incr",), "lease.lua counts a fallback (INCR: it can only add one)"),
        Grant((leases,), ("zadd", "zscore", "zrem"), "take and renew a lease (functions), release it (ZREM)"),
        Grant((_glob_escape(warmup_keys.REGISTRY),), REGISTRY_COMMANDS, "a mailbox's group; add one not yet "
              "registered (never move or remove one)"),
        Grant((_glob_escape(warmup_keys.SYSTEM_SUCCESSES),), (*FUNCTION_RUNNERS, *SUCCESSES_COMMANDS),
              "the system-wide success window the breaker reads (successes.lua)"),
        Grant((f"%R~{warmup_keys.domain_health('*')}",), ("hgetall",), "read the domains' spam rates"),
        Grant(locks, ("set", "get", "del"), "the warm-up counters' rebuild lock of its groups"),
    ]
    if group_keys:
        grants.insert(5, Grant(group_keys, tuple(sorted({*FUNCTION_RUNNERS, *WARMUP_SCRIPT_COMMANDS,
                                                         *WARMUP_CLIENT_COMMANDS})),
                               "the warm-up guard on its groups: reserve, confirm, cancel, restore, schedule "
                               "refresh, pause and resume"))
    return [grant for grant in grants if grant.patterns]


def sender_acl_rules(host: str, groups: Sequence[str] | None = None) -> list[str]:
    """The `ACL SETUSER` rules (password aside) of `host`'s sender serving `groups` (None: every group): keyless
    commands at the root, then one selector per grant."""
    return ["reset", "on", "resetkeys", "resetchannels", "-@all", *(f"+{c}" for c in KEYLESS_COMMANDS),
            *(grant.selector() for grant in sender_grants(host, groups))]


def sender_acl_command(host: str, groups: Sequence[str] | None = None) -> str:
    """The rule as one `ACL SETUSER` line for redis-cli, with `>PASSWORD` to fill in from your secret store."""
    rules = sender_acl_rules(host, groups)
    return " ".join(["ACL SETUSER", sender_user(host), *(_quoted(r) for r in rules), ">PASSWORD"])


def apply_sender_acl(client: Any, host: str, password: str, groups: Sequence[str] | None = None) -> str:
    """Load (or replace) the `sendhost` function library, then create or replace `host`'s sender user serving
    `groups` (None: every group) on the Redis behind `client` (an admin connection; on a Redis Cluster, every
    node); return the user's name.

    `reset` first: a rerun drops the old password and rules, so rotating the password is applying it again.
    Raises ValueError on a Redis older than 7.0 (no selectors, no Functions). The password is never logged or
    returned."""
    version = str(client.info("server").get("redis_version", "0"))
    if tuple(int(p) for p in version.split(".")[:2] if p.isdigit()) < MIN_REDIS:
        raise ValueError(f"Redis {version} cannot hold the sender's user to its keys and to sendhost's functions (ACL "
                         f"selectors and Functions need Redis >= {'.'.join(map(str, MIN_REDIS))}); upgrade Redis")
    load_library(client)  # the user may run nothing else: install it first
    user = sender_user(host)
    # ACL users are each node's own (a cluster does not share them): on a cluster, every node, replicas too, so a
    # failover promotes a node that knows the sender. redis-py would send ACL SETUSER to one node only.
    from redis.cluster import RedisCluster

    options = {"target_nodes": RedisCluster.ALL_NODES} if isinstance(client, RedisCluster) else {}
    client.execute_command("ACL", "SETUSER", user, *sender_acl_rules(host, groups), f">{password}", **options)
    return user


def sender_password(key: bytes, host: str) -> str:
    """`host`'s sender password: HMAC-SHA256 of its user name under the control machine's key, so every provision
    run derives the same one (no secret store, no change on a rerun) and a new key rotates them all."""
    return hmac.new(key, sender_user(host).encode(), hashlib.sha256).hexdigest()


def sender_key(path: Path, *, create: bool = True) -> bytes | None:
    """The key sender passwords derive from, at `path`: created 0600 (32 random bytes) on first use when `create`;
    None when it does not exist and may not be created (a dry run)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        if not create:
            return None
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    # O_EXCL: two runs at once must not each write a key and hand out passwords the other overwrote
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    with os.fdopen(fd, "wb") as file:
        file.write(key)
    return key


def sender_url(admin_url: str, host: str, password: str) -> str:
    """The URL `host`'s sender connects with: the admin URL's scheme, host, port, database and TLS settings, with
    the sender's user and password instead of the admin's (any password query parameter dropped)."""
    parts = urlsplit(admin_url)
    location = parts.netloc.rpartition("@")[2]
    query = "&".join(pair for pair in parts.query.split("&")
                     if pair and pair.partition("=")[0].strip().lower() not in SECRET_PARAMS | {"username"})
    userinfo = f"{quote(sender_user(host), safe='')}:{quote(password, safe='')}"
    return urlunsplit((parts.scheme, f"{userinfo}@{location}", parts.path, query, parts.fragment))


def _group_name(group: str) -> str:
    if not warmup_keys.GROUP_RE.match(group):
        raise ValueError(f"mailbox group {group!r} must be 1-64 letters, digits, '.', '_' or '-'")
    return group


def _quoted(rule: str) -> str:
    """A rule as redis-cli reads it: a selector holds spaces, so it is quoted."""
    return f'"{rule}"' if " " in rule else rule


def _glob_escape(pattern: str) -> str:
    """Escape what Redis's glob would read as a pattern in a literal key name."""
    for special in ("\\", "?", "[", "]", "*"):
        pattern = pattern.replace(special, "\\" + special)
    return pattern
