"""`sendhost provision`'s sender Redis users (provisioning.sender_redis), against real Redis servers: each host's user
applied, the same URLs on a rerun, nothing changed by a dry run, and a Redis too old for the rule refused in one line
before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from ippool.sender_acl import MIN_REDIS, sender_user
from provisioning.sender_redis import key_path, sender_redis_urls
from sendhost.errors import ConfigError
from sendhost.lua_library import library_version
from tests.conftest import run_cli
from tests.provisioning.conftest import write_inventory
from tests.provisioning.test_cli_input import sender
from tests.support.redis_server import RedisServer

HOSTS = ["sender-1", "sender-2"]


def test_each_host_gets_its_own_user_and_a_rerun_the_same_url(tmp_path: Path, redis7: RedisServer,
                                                               redis7_admin: redis.Redis) -> None:
    key_file = key_path({}, tmp_path / "state")
    urls = sender_redis_urls(redis7.client, redis7.url, HOSTS, key_file)

    assert sorted(urls) == HOSTS
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    for host, url in urls.items():
        assert url.startswith(f"redis://{sender_user(host)}:") and url.endswith(redis7.url.removeprefix("redis://"))
        client = redis.Redis.from_url(url)
        try:
            assert client.ping()
            with pytest.raises(redis.exceptions.NoPermissionError):
                client.flushall()
        finally:
            client.close()
    assert urls["sender-1"].split("@")[0] != urls["sender-2"].split("@")[0]
    assert sender_redis_urls(redis7.client, redis7.url, HOSTS, key_file) == urls  # the role sees no change

    # rotation: a new key, new passwords, and the old one no longer works
    key_file.rename(tmp_path / "old.key")
    rotated = sender_redis_urls(redis7.client, redis7.url, HOSTS, key_file)
    assert rotated["sender-1"] != urls["sender-1"]
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(urls["sender-1"]).ping()


def test_provision_loads_the_library_and_grants_each_host_its_groups(tmp_path: Path, redis7: RedisServer,
                                                                     redis7_admin: redis.Redis) -> None:
    sender_redis_urls(redis7.client, redis7.url, HOSTS, tmp_path / "k", groups={"sender-1": ["g1"]})
    assert redis7_admin.fcall_ro("sendhost_version", 0) == library_version()
    rules = {line.split()[1]: line for line in redis7_admin.acl_list()}
    assert "~sendhost:warmup:{g1}:*" in rules[sender_user("sender-1")]
    assert "{*}" not in rules[sender_user("sender-1")]
    assert "~sendhost:warmup:{*}:*" in rules[sender_user("sender-2")]  # named no groups: every group
    assert all("+eval" not in rules[sender_user(h)] and "+script" not in rules[sender_user(h)] for h in HOSTS)


def test_a_dry_run_changes_neither_redis_nor_the_key_file(tmp_path: Path, redis7: RedisServer,
                                                          redis7_admin: redis.Redis) -> None:
    key_file = tmp_path / "state" / "sender-acl.key"
    urls = sender_redis_urls(redis7.client, redis7.url, HOSTS, key_file, check=True)
    assert sorted(urls) == HOSTS
    assert not key_file.exists()
    assert redis7_admin.acl_users() == ["default"]


def test_the_key_file_can_be_named_and_a_truncated_one_is_refused(tmp_path: Path, redis7: RedisServer,
                                                                   redis7_admin: redis.Redis) -> None:
    named = tmp_path / "elsewhere.key"
    assert key_path({"SENDHOST_SENDER_ACL_KEY_FILE": str(named)}, tmp_path / "state") == named
    assert key_path({}, tmp_path / "state") == tmp_path / "state" / "sender-acl.key"
    named.write_bytes(b"")
    with pytest.raises(ConfigError, match=r"holds 0 bytes, too few .* delete it"):
        sender_redis_urls(redis7.client, redis7.url, HOSTS, named)
    assert redis7_admin.acl_users() == ["default"]


def test_a_redis_without_selectors_is_refused_before_anything_runs(tmp_path: Path, redis6_url: str) -> None:
    redis_url = redis6_url
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    version = client.info("server")["redis_version"]
    client.close()
    assert tuple(int(p) for p in version.split(".")[:2]) < MIN_REDIS
    with pytest.raises(ConfigError, match=rf"Redis {version} cannot hold the sender's user"):
        sender_redis_urls(lambda: redis.Redis.from_url(redis_url), redis_url, HOSTS, tmp_path / "k")

    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path)}, redis_url=redis_url)
    result = run_cli("provision", "--inventory", str(inventory), env={"SENDHOST_STATE_DIR": str(tmp_path / "s")})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "ACL selectors and Functions need Redis >= 7.0" in result.stderr
    assert "Traceback" not in result.stderr
