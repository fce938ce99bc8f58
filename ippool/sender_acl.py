"""The Redis ACL user of a sender host: it runs the send path (the pool's lease scripts, the warm-up guard, the
warm-up counters' rebuild) on its own host's lease keys and the warm-up keys, and nothing else. Every sender host
holds a Redis URL; with the admin user's, any of them could rewrite any slot hash, flush the pool or read every
host's keys. With this user's, it reaches only what the agent's own Redis calls need.

The rule is written with Redis 7 ACL selectors, one per kind of key, so each command is allowed only on the keys
it is used on: INCR and GET on the host's slot used keys (the lease script counts a send there: INCR can only add,
so a sender can use up its own budget but never reset it), HMGET only on its slot and meta hashes (address, budget,
state, generation: the admin's), and nothing on any other host's keys. Redis holds a script's own
commands to the caller's ACL, so a sender cannot smuggle a DEL or FLUSHALL through EVAL.

Each grant holds the commands the send path calls on its keys (tests/ippool/test_sender_acl.py holds the script
commands to what the Lua files call; tests/sender/test_sender_acl_agent.py runs the agent's send cycle as this user).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from ippool.keys import HostKeys
from sendhost.redis_url import SECRET_PARAMS
from warmup import keys as warmup_keys

# Selectors (`(~keys +commands)`) arrived in Redis 7.0: older servers cannot hold commands to the keys they are for.
MIN_REDIS = (7, 0)
# The agent's rebuild lock (`sender.sending.counters`, `warmup.Guard.rebuilding`): one per warm-up group.
REBUILD_LOCK_PATTERN = warmup_keys.GroupKeys("*").rebuild_lock
# Commands that take no key: liveness, the clock (`Mailboxes.now_ms`), loading a script redis-py's Script finds
# missing (a pipeline asks SCRIPT EXISTS first), and the MULTI/EXEC of the guard's schedule refresh and resume.
KEYLESS_COMMANDS = ("ping", "time", "script|load", "script|exists", "multi", "exec")
# How a script runs: EVALSHA, and EVAL when the server answers NOSCRIPT (`ippool.pool.Pool._run`).
SCRIPT_RUNNERS = ("evalsha", "eval")
# What ippool/lua/lease.lua, renew.lua and warmup/lua/*.lua call, besides TIME (the clock prelude, keyless).
LEASE_SCRIPT_COMMANDS = ("hmget", "get", "incr", "zadd", "zscore")
WARMUP_SCRIPT_COMMANDS = ("hmget", "hget", "hset", "hincrby", "del", "zadd", "zcard", "zcount", "zrangebyscore",
                          "zrevrangebyscore", "zremrangebyscore")
# What `warmup.mailboxes.Mailboxes` sends itself for the agent: group_of/exists/add (registry), config/status/
# history (HGETALL), refresh_schedule (DEL, ZADD, HDEL), pause/resume (HSET, HDEL, DEL), status (ZREVRANGEBYSCORE,
# ZCOUNT), and the counters' rebuild marking a mailbox paused (HSET).
WARMUP_CLIENT_COMMANDS = ("hget", "hexists", "hgetall", "hset", "hdel", "del", "zadd", "zrevrangebyscore", "zcount")


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


def sender_grants(host: str) -> list[Grant]:
    """What `host`'s sender may run on which keys, one grant per kind of key."""
    keys = HostKeys(host)
    meta, leases, slots = _glob_escape(keys.meta), _glob_escape(keys.leases), f"{_glob_escape(keys.prefix)}:slot:*"
    # `slot:*` matches the used keys too; what it grants there (scripts, HMGET) cannot change a string key.
    fallbacks, used = _glob_escape(keys.fallbacks), f"{_glob_escape(keys.prefix)}:slot:*:used"
    warmup = (_glob_escape(warmup_keys.REGISTRY), f"{warmup_keys.PREFIX}:{{*}}:*")
    return [
        Grant((meta, leases, fallbacks, slots), SCRIPT_RUNNERS, "run lease.lua and renew.lua on its own host's keys"),
        Grant((meta, slots), ("hmget",), "lease.lua reads the host's meta and slot hashes"),
        Grant((used,), ("get", "incr"), "lease.lua reads a slot's used count and counts a send (INCR: it can only "
              "add one)"),
        Grant((fallbacks,), ("incr",), "lease.lua counts a fallback (INCR: it can only add one)"),
        Grant((leases,), ("zadd", "zscore", "zrem"), "take and renew a lease (scripts), release it (ZREM)"),
        Grant(warmup, tuple(sorted({*SCRIPT_RUNNERS, *WARMUP_SCRIPT_COMMANDS, *WARMUP_CLIENT_COMMANDS})),
              "the warm-up guard: reserve, confirm, cancel, restore, schedule refresh, pause and resume"),
        Grant((f"%R~{warmup_keys.domain_health('*')}",), ("hgetall",), "read the domains' spam rates"),
        Grant((REBUILD_LOCK_PATTERN,), ("set", "get", "del"), "the warm-up counters' rebuild lock"),
    ]


def sender_acl_rules(host: str) -> list[str]:
    """The `ACL SETUSER` rules (password aside) of `host`'s sender: keyless commands at the root, then one
    selector per grant."""
    return ["reset", "on", "resetkeys", "resetchannels", "-@all", *(f"+{c}" for c in KEYLESS_COMMANDS),
            *(grant.selector() for grant in sender_grants(host))]


def sender_acl_command(host: str) -> str:
    """The rule as one `ACL SETUSER` line for redis-cli, with `>PASSWORD` to fill in from your secret store."""
    return " ".join(["ACL SETUSER", sender_user(host), *(_quoted(r) for r in sender_acl_rules(host)), ">PASSWORD"])


def apply_sender_acl(client: Any, host: str, password: str) -> str:
    """Create or replace `host`'s sender user on the Redis behind `client` (an admin connection); return its name.

    `reset` first: a rerun drops the old password and rules, so rotating the password is applying it again.
    Raises ValueError on a Redis older than 7.0 (no selectors). The password is never logged or returned."""
    version = str(client.info("server").get("redis_version", "0"))
    if tuple(int(p) for p in version.split(".")[:2] if p.isdigit()) < MIN_REDIS:
        raise ValueError(f"Redis {version} cannot hold the sender's user to its keys (ACL selectors need Redis >= "
                         f"{'.'.join(map(str, MIN_REDIS))}); upgrade Redis")
    user = sender_user(host)
    client.execute_command("ACL", "SETUSER", user, *sender_acl_rules(host), f">{password}")
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


def _quoted(rule: str) -> str:
    """A rule as redis-cli reads it: a selector holds spaces, so it is quoted."""
    return f'"{rule}"' if " " in rule else rule


def _glob_escape(pattern: str) -> str:
    """Escape what Redis's glob would read as a pattern in a literal key name."""
    for special in ("\\", "?", "[", "]", "*"):
        pattern = pattern.replace(special, "\\" + special)
    return pattern
