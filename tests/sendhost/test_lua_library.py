"""The `sendhost` Redis Functions library: every Lua file of ippool and warmup is one function, each prelude is in
it once, it loads (and replaces an old one) on Redis 7, and a Redis without Functions (the embedded 6.2) runs the
same files as scripts."""

from __future__ import annotations

import re
from importlib import resources

import pytest
import redis

from ippool import Pool
from sendhost import lua_library
from sendhost.lua_calls import FunctionsUnavailable, LuaCaller, Mode, load_library
from tests.conftest import run_cli
from tests.support.ippool_backends import register

REGISTERED = re.compile(r"redis\.register_function\('(\w+)', (\w+)\)")


def test_every_lua_file_is_one_function_and_every_prelude_is_there_once() -> None:
    source = lua_library.library_source()
    assert source.startswith("#!lua name=sendhost\n")
    files = {f"{package}_{entry.name[:-4]}" for package in lua_library.PACKAGES
             for entry in (resources.files(package) / "lua").iterdir()
             if entry.name.endswith(".lua") and not entry.name.startswith("_")}
    registered = REGISTERED.findall(source)
    assert {name for name, _callback in registered} == files
    assert all(name == callback for name, callback in registered)
    for prelude in ("now_ms", "live_leases", "place", "slot_used"):
        assert source.count(f"local function {prelude}(") == 1, prelude
    assert re.fullmatch(r"1:[0-9a-f]{12}", lua_library.library_version())
    assert "flags={'no-writes'}" in source.split("sendhost_version", 1)[1]  # FCALL_RO may call the version


def test_the_library_loads_idempotently_and_replaces_an_old_one(redis7_admin: redis.Redis) -> None:
    redis7_admin.function_load("#!lua name=sendhost\nredis.register_function{function_name='sendhost_version', "
                               "callback=function() return '0:old' end, flags={'no-writes'}}", replace=True)
    assert load_library(redis7_admin) == lua_library.library_version()
    assert load_library(redis7_admin) == lua_library.library_version()  # again: nothing changes
    assert redis7_admin.fcall_ro("sendhost_version", 0) == lua_library.library_version()
    [library] = redis7_admin.function_list(library="sendhost")
    names = {str(f[1]) for f in library[library.index("functions") + 1]}
    assert {"ippool_lease", "warmup_reserve", "sendhost_version"} <= names


def test_without_functions_the_same_lua_runs_as_scripts(redis6_url: str) -> None:
    client = redis.Redis.from_url(redis6_url, decode_responses=True)
    try:
        client.flushall()
        pool = Pool(client)
        register(pool, slots=1)
        with pool.lease("sender-1") as lease:
            assert not lease.fallback, lease.reason
        assert pool._scripts.lease.caller.mode is Mode.SCRIPTS
        client.script_flush()  # the server forgot the scripts: EVAL, then EVALSHA again
        assert not pool.lease("sender-1").fallback
        with pytest.raises(FunctionsUnavailable, match=r"^Redis 6\.2\.\d+ has no Functions \(FUNCTION LOAD needs "
                                                      r"Redis >= 7\.0\)"):
            load_library(client)
    finally:
        client.close()


def test_the_first_call_checks_the_version_and_later_ones_do_not(redis7_admin: redis.Redis) -> None:
    caller = LuaCaller(redis7_admin)
    assert caller.mode is Mode.UNKNOWN
    assert caller.call("ippool", "renew", ["sendhost:{h}:leases"], ["0:x", "", 1000]) == 0
    assert caller.mode is Mode.FUNCTIONS
    redis7_admin.function_delete("sendhost")  # lost mid-run: this client may load it, so it does
    assert caller.call("ippool", "renew", ["sendhost:{h}:leases"], ["0:x", "", 1000]) == 0


def test_the_cli_refuses_a_redis_without_functions_in_one_line(redis6_url: str) -> None:
    applied = run_cli("pool", "sender-acl", "sender-1", "--apply",
                      env={"REDIS_URL": redis6_url, "SENDHOST_SENDER_REDIS_PASSWORD": "pw"})
    assert applied.returncode == 2, applied.stderr
    assert applied.stderr.count("\n") == 1
    assert "selectors and Functions need Redis >= 7.0" in applied.stderr
