"""A Redis that refuses who we are is configuration, not an outage: exit 2 in one wording for every command, naming
the setting the URL came from and the fix; a `rediss://` URL at a plain-text Redis says so at once."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.redis_server import RedisServer

USER = "sendhost-refusal-test"


@pytest.fixture
def ping_only_user(redis_service: RedisServer) -> Iterator[str]:
    """An ACL user (password `pw`) allowed PING and nothing else; deleted after the test."""
    client = redis_service.client()
    client.acl_setuser(USER, enabled=True, passwords=["+pw"], keys=["*"], commands=["+ping"])
    try:
        yield USER
    finally:
        client.acl_deluser(USER)
        client.close()


def _with_user(url: str, user: str, password: str) -> str:
    return url.replace("redis://", f"redis://{user}:{password}@", 1)


def _write_inventory(path: Path, redis_url: str) -> None:
    """One sender host, and `redis_url` on line 3."""
    path.write_text(f"all:\n  vars:\n    sendhost_redis_url: '{redis_url}'\n"
                    "  children:\n    senders:\n      hosts:\n        sender-1:\n"
                    "          sendhost_instance_id: i-0123456789abcdef0\n          sendhost_region: us-east-1\n"
                    "          sendhost_primary_ip: 10.0.1.10\n          sendhost_pool: {slots: 1}\n")


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("command", [("pool", "status"), ("warmup", "status")])
@pytest.mark.parametrize(("how", "setting"), [("env", "SENDHOST_REDIS_URL"), ("env", "REDIS_URL"),
                                              ("flag", "--redis-url")])
def test_a_wrong_password_exits_2_naming_the_setting_it_came_from(redis_url: str, command: tuple[str, ...],
                                                                  how: str, setting: str) -> None:
    wrong = _with_user(redis_url, "nobody", "wrong")
    result = run_cli(*command, env={setting: wrong}) if how == "env" else run_cli(setting, wrong, *command)
    assert result.returncode == 2, result.stderr
    error = _one_error_line(result)
    assert error.startswith("error: Redis at redis://"), error
    assert f"refused the user or password of the Redis URL from {how} {setting} (" in error
    assert error.endswith(f"correct them in {setting}")
    assert "wrong" not in error  # the password is never shown


def test_a_wrong_password_in_the_inventory_names_its_line(tmp_path: Path, redis_url: str) -> None:
    inventory = tmp_path / "inventory.yml"
    _write_inventory(inventory, _with_user(redis_url, "nobody", "wrong"))
    result = run_cli("--inventory", str(inventory), "pool", "status")
    assert result.returncode == 2, result.stderr
    error = _one_error_line(result)
    assert f"refused the user or password of the Redis URL from inventory {inventory}:3 (" in error
    assert error.endswith(f"correct them in sendhost_redis_url ({inventory}:3)")


def test_inventory_check_says_a_wrong_password_is_refused_not_unreachable(tmp_path: Path, redis_url: str) -> None:
    inventory = tmp_path / "inventory.yml"
    _write_inventory(inventory, _with_user(redis_url, "nobody", "wrong"))
    result = run_cli("inventory", "check", str(inventory))
    assert result.returncode == 2, result.stderr
    error = _one_error_line(result)
    assert f"refused the user or password of the Redis URL from inventory {inventory}:3 (" in error
    assert "cannot reach" not in error


def test_a_user_refused_a_command_exits_2_saying_so(redis_url: str, ping_only_user: str) -> None:
    result = run_cli("pool", "status", env={"SENDHOST_REDIS_URL": _with_user(redis_url, ping_only_user, "pw")})
    assert result.returncode == 2, result.stderr
    error = _one_error_line(result)
    assert "refused a command to the user of the Redis URL from env SENDHOST_REDIS_URL (" in error
    assert error.endswith("use an admin user's URL in SENDHOST_REDIS_URL, or grant that user the command "
                          "(ACL SETUSER)")


def test_tls_to_a_plain_text_redis_exits_2_at_once(redis_url: str) -> None:
    """The handshake goes unanswered by a plain-text Redis; before, each attempt waited out the 5 s timeout (10.7 s
    in all) and said "Timeout connecting", exit 1: the exit code and the words tell the two apart, not a time."""
    tls = redis_url.replace("redis://", "rediss://", 1)
    host_port = tls.split("//", 1)[1].rsplit("@", 1)[-1].split("/", 1)[0]
    result = run_cli("pool", "status", env={"SENDHOST_REDIS_URL": tls}, timeout=60)
    assert result.returncode == 2, result.stderr
    assert _one_error_line(result) == (
        f"error: the Redis URL from env SENDHOST_REDIS_URL is rediss:// (TLS), but {host_port} speaks plain text "
        f"(it answered PING in clear, not the TLS handshake): use redis:// in SENDHOST_REDIS_URL, or the server's "
        f"TLS port")
