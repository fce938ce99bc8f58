"""Secrets are never printed: Redis passwords (however malformed the URL), secret query parameters, AWS tokens."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
import redis

from sendhost.redis_url import insecure_tls_reason, mask_url, validate_redis_url
from tests.conftest import REPO_ROOT, run_cli
from tests.support.ippool_cli import cli_env, server_instance, unique_host, write_inventory
from toolkit.logging_setup import configure_logging

SECRET = "s3cr"  # every password below starts with it, so one search finds any leak


@pytest.mark.parametrize(("url", "masked"), [
    ("redis://:s3cr#et@host:6379/0", "redis://***@host:6379/0"),
    ("redis://:s3cr/et@host:6379/0", "redis://***@host:6379/0"),
    ("redis://user:s3cr?et@host:6379/0", "redis://***@host:6379/0"),
    ("redis://user:s3cr@et@host:6379/0", "redis://user:***@host:6379/0"),
    ("rediss://user:s3cret@host:6380/0", "rediss://user:***@host:6380/0"),
    ("redis://:s3cr%23et@host/0", "redis://:***@host/0"),
    ("redis://host:6379/0?password=s3cret&db=1", "redis://host:6379/0?password=***&db=1"),
    ("redis://host/0?PassWord=s3cret", "redis://host/0?PassWord=***"),
    ("unix://:s3cret@/run/redis.sock?db=0", "unix://:***@/run/redis.sock?db=0"),
    ("unix:///run/redis.sock?password=s3cret", "unix:///run/redis.sock?password=***"),
    ("redis://user@host/0", "redis://user@host/0"),
    ("redis://host:6379/0", "redis://host:6379/0"),
])
def test_mask_url_hides_every_password_form(url: str, masked: str) -> None:
    assert mask_url(url) == masked


@pytest.mark.parametrize("url", [
    "redis://:s3cr#et@host:6379/0", "redis://:s3cr/et@host:6379/0", "redis://u:s3cr?et@host:6379/0",
    "redis://u:s3cret@host:port/0", "redis://u:s3cret@/0",
    "redis://u:s3cret@host/x", "http://u:s3cret@host/0", "redis://u:s3cr\net@host/0", "redis://:s3cret@host:99999/0",
])
def test_malformed_url_errors_never_quote_the_password(url: str) -> None:
    with pytest.raises(ValueError, match="malformed Redis URL") as caught:
        validate_redis_url(url)
    assert SECRET not in str(caught.value)


def test_an_unencoded_hash_is_named_with_the_fix() -> None:
    with pytest.raises(ValueError) as caught:
        validate_redis_url("redis://:s3cr#et@host:6379/0")
    assert str(caught.value) == (
        "malformed Redis URL 'redis://***@host:6379/0': the user or password holds '/', '?' or '#'; "
        "percent-encode them (%2F, %3F, %23), and any '@' after the host (%40)"
    )


def test_an_at_sign_after_the_host_is_read_as_a_broken_password_unless_encoded() -> None:
    # Ambiguous by nature: `redis://ab#cd@host` parses as host "ab". Refusing (and masking) is the safe reading.
    with pytest.raises(ValueError, match="percent-encode"):
        validate_redis_url("redis://host:6379/0?client_name=me@team")
    assert validate_redis_url("redis://host:6379/0?client_name=me%40team")


def test_the_percent_encoded_form_is_valid_and_the_client_reads_the_real_password() -> None:
    url = "redis://:s3cr%23et@host:6379/0"
    assert validate_redis_url(url) == url
    assert redis.connection.parse_url(url)["password"] == "s3cr#et"


def test_malformed_url_from_the_flag_is_exit_2_without_the_password() -> None:
    result = run_cli("--redis-url", "redis://:s3cr#et@host:6379/0", "config", "show")
    assert result.returncode == 2
    assert SECRET not in result.stdout + result.stderr
    assert result.stderr.startswith("error: redis_url from flag --redis-url: malformed Redis URL 'redis://***@host")


def test_malformed_url_in_the_inventory_is_exit_2_with_its_line_without_the_password(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yml"
    path.write_text((REPO_ROOT / "inventory.example.yml").read_text().replace(
        "  vars:\n", '  vars:\n    sendhost_redis_url: "redis://:s3cr#et@host:6379/0"\n', 1))
    result = run_cli("inventory", "check", "--offline", str(path))
    assert result.returncode == 2
    assert SECRET not in result.stdout + result.stderr
    assert f"{path}:10: sendhost_redis_url: malformed Redis URL 'redis://***@host:6379/0'" in result.stderr


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_config_show_masks_a_password_query_parameter(fmt: str) -> None:
    result = run_cli("config", "show", "--format", fmt, env={"REDIS_URL": "redis://10.9.9.9:6379/0?password=s3cret"})
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr
    if fmt == "json":
        assert json.loads(result.stdout)["redis_url"]["value"] == "redis://10.9.9.9:6379/0?password=***"
    else:
        assert "redis://10.9.9.9:6379/0?password=***" in result.stdout


def test_config_show_warns_when_tls_is_not_verified() -> None:
    url = "rediss://sender:s3cret@10.9.9.9:6380/0?ssl_cert_reqs=none"
    result = run_cli("config", "show", "--format", "json", env={"REDIS_URL": url})
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("WARNING sendhost.config: redis_url from env REDIS_URL: ssl_cert_reqs=none "
                                    "turns off checking the Redis server's certificate")
    assert SECRET not in result.stdout + result.stderr


def test_inventory_check_warns_at_the_url_line_when_tls_is_not_verified(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yml"
    path.write_text((REPO_ROOT / "inventory.example.yml").read_text().replace(
        "  vars:\n", '  vars:\n    sendhost_redis_url: "rediss://r:s3cret@h:6380/0?ssl_cert_reqs=none"\n', 1))
    result = run_cli("inventory", "check", "--offline", str(path))
    assert result.returncode == 0, result.stderr
    assert f"WARNING sendhost.inventory: {path}:10: sendhost_redis_url: ssl_cert_reqs=none" in result.stderr


@pytest.mark.parametrize(("url", "insecure"), [
    ("rediss://h:6380/0?ssl_cert_reqs=none", True), ("rediss://h:6380/0?ssl_cert_reqs=CERT_NONE", True),
    ("rediss://h:6380/0?ssl_check_hostname=false", True), ("rediss://h:6380/0?ssl_cert_reqs=required", False),
    ("rediss://h:6380/0", False), ("redis://h:6379/0", False),
])
def test_insecure_tls_is_recognised(url: str, insecure: bool) -> None:
    assert (insecure_tls_reason(url) is not None) is insecure


def test_very_verbose_logs_sendhost_debug_but_not_the_aws_session_token(moto_url: str, redis_url: str,
                                                                       tmp_path: Path) -> None:
    token = "s3cr-session-token-FwoGZXIvYXdzE"
    host = unique_host()
    inventory = write_inventory(tmp_path / "inventory.yml", host, server_instance(moto_url), slots=1)
    env = {**cli_env(moto_url, redis_url, inventory), "AWS_SESSION_TOKEN": token}
    result = run_cli("-vv", "pool", "create", host, "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    assert token not in result.stderr
    assert "botocore" not in result.stderr and "urllib3" not in result.stderr
    destroyed = run_cli("pool", "destroy", host, "--yes", "--format", "json", env=env)
    assert destroyed.returncode == 0, destroyed.stderr


def test_own_loggers_reach_debug_and_libraries_stay_at_warning() -> None:
    stream = io.StringIO()
    try:
        configure_logging(2, stream=stream)
        logging.getLogger("ippool.rotator").debug("rotating slot 0")
        logging.getLogger("botocore.endpoint").debug("Sending http request: X-Amz-Security-Token: s3cret")
        logging.getLogger("sendhost.config").warning("using redis://u:s3cret@host:6379/0 now")
    finally:
        configure_logging(0, stream=io.StringIO())
    assert stream.getvalue() == ("DEBUG ippool.rotator: rotating slot 0\n"
                                 "WARNING sendhost.config: using redis://u:***@host:6379/0 now\n")


VAULTED = ("!vault |\n          $ANSIBLE_VAULT;1.1;AES256\n"
           "          6231336539666234306139346433616338376437376461363365\n")


def _vaulted_inventory(tmp_path: Path, key_line: str) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text((REPO_ROOT / "inventory.example.yml").read_text().replace(
        "  vars:\n", f"  vars:\n    {key_line} {VAULTED}", 1))
    return path


def test_an_ansible_vault_value_in_the_inventory_does_not_stop_sendhost(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yml"
    path.write_text((REPO_ROOT / "inventory.example.yml").read_text().replace(
        "        ansible_become: true\n",
        f"        ansible_become: true\n        ansible_become_password: {VAULTED}", 1))
    result = run_cli("inventory", "check", "--offline", str(path))
    assert result.returncode == 0, result.stderr


def test_a_vaulted_redis_url_needs_the_url_from_the_environment(tmp_path: Path) -> None:
    path = _vaulted_inventory(tmp_path, "sendhost_redis_url:")
    missing = run_cli("--inventory", str(path), "config", "show")
    assert missing.returncode == 2
    assert missing.stderr == (f"error: {path}:10: sendhost_redis_url is encrypted with ansible-vault, which sendhost "
                              "does not decrypt; give sendhost the URL in SENDHOST_REDIS_URL (or --redis-url)\n")
    given = run_cli("--inventory", str(path), "config", "show", "--format", "json",
                    env={"SENDHOST_REDIS_URL": "redis://:s3cret@10.9.9.9:6379/0"})
    assert given.returncode == 0, given.stderr
    assert json.loads(given.stdout)["redis_url"] == {"value": "redis://:***@10.9.9.9:6379/0",
                                                     "source": "env SENDHOST_REDIS_URL"}


def test_other_sendhost_keys_cannot_be_vaulted(tmp_path: Path) -> None:
    path = _vaulted_inventory(tmp_path, "sendhost_pool_name:")
    result = run_cli("inventory", "check", "--offline", str(path))
    assert result.returncode == 2
    assert result.stderr == (f"error: {path}:10: sendhost_pool_name: is encrypted with ansible-vault, which "
                             "sendhost does not decrypt; keep it in clear (only sendhost_redis_url may be vaulted)\n")
