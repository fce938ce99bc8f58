"""The Redis ACL user of a sender host: it can take, renew and release leases on its own host's slots, and nothing
else. Every sender host holds a Redis URL; with the admin user's, any of them could rewrite any slot hash, flush
the pool or read every host's keys. With this user's, it reaches only its host's lease keys, through the commands
the lease path runs.

Redis checks the commands a script calls against the caller's ACL, so the user is allowed exactly the commands
`lease.lua`, `renew.lua` and the clock prelude call (HMGET, HSET, HINCRBY, ZADD, ZSCORE, TIME), the two ways of
running them (EVALSHA, and EVAL when the server answers NOSCRIPT) and the release (ZREM). HSET stays allowed on the
host's own slot hashes because the lease script writes a slot's used count and state with it: what a sender writes
there cannot steer AWS, since the pool checks every EIP and private IP Redis names against AWS first
(`ippool.ownership`).
"""

from __future__ import annotations

from typing import Any

from ippool.keys import HostKeys

# What the sender's hot path runs (`ippool.pool.Pool.lease/renew/release`).
CLIENT_COMMANDS = ("evalsha", "eval", "zrem", "ping")
# What lease.lua, renew.lua and sendhost/lua/_clock.lua call (tests/ippool/test_sender_acl.py holds this to them).
SCRIPT_COMMANDS = ("hmget", "hset", "hincrby", "zadd", "zscore", "time")


def sender_user(host: str) -> str:
    """The ACL user name of `host`'s sender."""
    return f"sender-{HostKeys(host).host}"


def sender_acl_rules(host: str) -> list[str]:
    """The `ACL SETUSER` rules (password aside) of `host`'s sender: its own host's lease keys, the lease commands."""
    keys = HostKeys(host)
    patterns = [keys.meta, keys.leases, f"{keys.prefix}:slot:*"]
    return ["reset", "on", "resetkeys", *(f"~{_glob_escape(p)}" for p in patterns), "resetchannels", "-@all",
            *(f"+{command}" for command in (*CLIENT_COMMANDS, *SCRIPT_COMMANDS))]


def sender_acl_command(host: str) -> str:
    """The rule as one `ACL SETUSER` line for redis-cli, with `>PASSWORD` to fill in from your secret store."""
    return " ".join(["ACL SETUSER", sender_user(host), *sender_acl_rules(host), ">PASSWORD"])


def apply_sender_acl(client: Any, host: str, password: str) -> str:
    """Create or replace `host`'s sender user on the Redis behind `client` (an admin connection); return its name.

    The password is passed as an argument, never logged or returned."""
    user = sender_user(host)
    client.execute_command("ACL", "SETUSER", user, *sender_acl_rules(host), f">{password}")
    return user


def _glob_escape(pattern: str) -> str:
    """Escape what Redis's glob would read as a pattern in a literal key prefix (`*` stays a wildcard only at the
    end, where `sender_acl_rules` puts it)."""
    literal, star = (pattern[:-1], "*") if pattern.endswith("*") else (pattern, "")
    for special in ("\\", "?", "[", "]", "*"):
        literal = literal.replace(special, "\\" + special)
    return literal + star
