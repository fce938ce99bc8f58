"""Configuration precedence: flag > environment > inventory > default, and secrets masked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sendhost.errors import ConfigError
from tests.conftest import run_cli
from toolkit.config import resolve_config
from toolkit.inventory import load_inventory


@pytest.fixture
def inventory_with_redis(tmp_path: Path, example_inventory: Path) -> Path:
    text = example_inventory.read_text().replace(
        '    # sendhost_redis_url: "rediss://sender:CHANGE-ME@redis.internal:6380/0"',
        '    sendhost_redis_url: "redis://inv:inventory-secret@10.9.9.9:6379/2"',
    )
    path = tmp_path / "inventory.yml"
    path.write_text(text)
    return path


def redis_setting(flag: str | None, env: dict[str, str], inventory_path: Path) -> tuple[str | None, str]:
    config = resolve_config({"redis_url": flag}, env, load_inventory(inventory_path))
    return config.redis_url.value, config.redis_url.source


def test_flag_beats_env_beats_inventory_beats_default(inventory_with_redis: Path) -> None:
    env = {"REDIS_URL": "redis://env:6379/0"}
    assert redis_setting("redis://flag:6379/0", env, inventory_with_redis) == ("redis://flag:6379/0",
                                                                                "flag --redis-url")
    assert redis_setting(None, env, inventory_with_redis) == ("redis://env:6379/0", "env REDIS_URL")
    value, source = redis_setting(None, {}, inventory_with_redis)
    assert value == "redis://inv:inventory-secret@10.9.9.9:6379/2"
    assert source.startswith(f"inventory {inventory_with_redis}:")
    config = resolve_config({}, {}, None)
    assert config.redis_url.value is None and config.redis_url.source.startswith("default")


def test_sendhost_env_beats_generic_env(inventory_with_redis: Path) -> None:
    env = {"REDIS_URL": "redis://generic:6379/0", "SENDHOST_REDIS_URL": "redis://specific:6379/0"}
    assert redis_setting(None, env, inventory_with_redis)[1] == "env SENDHOST_REDIS_URL"


def _endpoints(env: dict[str, str]) -> dict[str, tuple[str | None, str]]:
    return {s.name: (s.value, s.source) for s in resolve_config({}, env, None).aws_endpoints}


def test_aws_settings_come_from_the_standard_variables(example_inventory: Path) -> None:
    inventory = load_inventory(example_inventory)
    config = resolve_config({}, {"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "AWS_REGION": "eu-west-1",
                                 "AWS_CONFIG_FILE": "/dev/null"}, inventory)
    assert {(s.value, s.source) for s in config.aws_endpoints} == {("http://127.0.0.1:5000", "env AWS_ENDPOINT_URL")}
    assert (config.aws_region.value, config.aws_region.source) == ("eu-west-1", "env AWS_REGION")
    assert resolve_config({}, {"AWS_CONFIG_FILE": "/dev/null"}, inventory).aws_region.source == \
        f"inventory {example_inventory}"
    assert resolve_config({}, {"AWS_CONFIG_FILE": "/dev/null"}, None).aws_region.value == "us-east-1"


def test_each_service_endpoint_follows_botocore_s_order() -> None:
    env = {"AWS_CONFIG_FILE": "/dev/null", "AWS_ENDPOINT_URL": "http://general:1",
           "AWS_ENDPOINT_URL_EC2": "http://ec2:2", "AWS_ENDPOINT_URL_ROUTE_53": "http://r53:3"}
    assert _endpoints(env) == {
        "aws_endpoint_url (ec2)": ("http://ec2:2", "env AWS_ENDPOINT_URL_EC2"),
        "aws_endpoint_url (route53)": ("http://r53:3", "env AWS_ENDPOINT_URL_ROUTE_53"),
        "aws_endpoint_url (service-quotas)": ("http://general:1", "env AWS_ENDPOINT_URL"),
    }
    assert _endpoints({**env, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"})["aws_endpoint_url (ec2)"][0] is None


def test_the_profile_s_region_and_endpoint_come_after_the_environment(tmp_path: Path,
                                                                     example_inventory: Path) -> None:
    aws_config = tmp_path / "config"
    aws_config.write_text("[default]\nregion = sa-east-1\n[profile ops]\nregion = ap-south-1\n"
                          "endpoint_url = http://profile:4\n")
    env = {"AWS_CONFIG_FILE": str(aws_config), "AWS_PROFILE": "ops"}
    inventory = load_inventory(example_inventory)
    config = resolve_config({}, env, inventory)
    assert (config.aws_region.value, config.aws_region.source) == ("ap-south-1", f"profile ops in {aws_config}")
    assert _endpoints(env)["aws_endpoint_url (route53)"] == ("http://profile:4", f"profile ops in {aws_config}")
    assert resolve_config({}, {"AWS_CONFIG_FILE": str(aws_config)}, None).aws_region.value == "sa-east-1"
    assert resolve_config({}, {**env, "AWS_DEFAULT_REGION": "eu-west-2"}, inventory).aws_region.value == "eu-west-2"
    assert resolve_config({}, {**env, "AWS_DEFAULT_REGION": "eu-west-2", "AWS_REGION": "eu-north-1"},
                          inventory).aws_region.value == "eu-north-1"
    assert _endpoints({**env, "AWS_ENDPOINT_URL": "http://env:5"})["aws_endpoint_url (ec2)"][0] == "http://env:5"


def test_malformed_redis_url_from_env_is_a_config_error(example_inventory: Path) -> None:
    with pytest.raises(ConfigError, match=r"redis_url from env REDIS_URL: malformed Redis URL 'redis://h:port'"):
        resolve_config({}, {"REDIS_URL": "redis://h:port"}, load_inventory(example_inventory))


def test_config_show_masks_secrets_and_names_sources(inventory_with_redis: Path) -> None:
    result = run_cli("--inventory", str(inventory_with_redis), "config", "show", "--format", "json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["redis_url"]["value"] == "redis://inv:***@10.9.9.9:6379/2"
    assert "inventory-secret" not in result.stdout
    assert shown["inventory"]["source"] == "flag --inventory"

    result = run_cli("--inventory", str(inventory_with_redis), "config", "show",
                     env={"SENDHOST_REDIS_URL": "redis://u:envsecret@h:1/0"})
    assert result.returncode == 0, result.stderr
    assert "env SENDHOST_REDIS_URL" in result.stdout and "envsecret" not in result.stdout


def test_config_show_exits_2_on_malformed_env_url(example_inventory: Path) -> None:
    result = run_cli("--inventory", str(example_inventory), "config", "show", env={"REDIS_URL": "ftp://x"})
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: redis_url from env REDIS_URL: malformed Redis URL 'ftp://x': scheme must be one of redis, rediss, "
        "unix; expected redis://[user:pass@]host:port/db"
    )


@pytest.fixture
def inventory_with_database(tmp_path: Path, example_inventory: Path) -> Path:
    path = tmp_path / "inventory.yml"
    url = "postgresql://inv:inventory-secret@db.internal:5432/ledger"
    line = f'    sendhost_database_url: "{url}"\n'
    path.write_text(example_inventory.read_text().replace("  vars:\n", "  vars:\n" + line, 1))
    return path


def test_database_url_flag_beats_env_beats_inventory_beats_embedded(inventory_with_database: Path) -> None:
    from toolkit.config import resolve_database_url

    inventory = load_inventory(inventory_with_database)
    env = {"SENDHOST_DATABASE_URL": "postgresql://env@h/db"}
    flag = resolve_database_url("postgresql://flag@h/db", env, inventory)
    assert (flag.value, flag.source) == ("postgresql://flag@h/db", "flag --database-url")
    from_env = resolve_database_url(None, env, inventory)
    assert (from_env.value, from_env.source) == ("postgresql://env@h/db", "env SENDHOST_DATABASE_URL")
    from_inventory = resolve_database_url(None, {}, inventory)
    assert from_inventory.value == "postgresql://inv:inventory-secret@db.internal:5432/ledger"
    assert from_inventory.source == f"inventory {inventory_with_database}:{inventory.database_url_line}"
    embedded = resolve_database_url(None, {}, None)
    assert (embedded.value, embedded.source) == (None, "default (embedded PostgreSQL under the state dir)")
    assert resolve_config({}, env, inventory).database_url == from_env


def test_config_show_names_the_database_url_masked(inventory_with_database: Path) -> None:
    result = run_cli("--inventory", str(inventory_with_database), "config", "show", "--format", "json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["database_url"]["value"] == "postgresql://inv:***@db.internal:5432/ledger"
    assert shown["database_url"]["source"].startswith(f"inventory {inventory_with_database}:")
    assert "inventory-secret" not in result.stdout

    result = run_cli("--inventory", str(inventory_with_database), "config", "show",
                     env={"SENDHOST_DATABASE_URL": "postgresql://u:envsecret@h:5432/db"})
    assert result.returncode == 0, result.stderr
    assert "env SENDHOST_DATABASE_URL" in result.stdout and "envsecret" not in result.stdout


def test_a_malformed_database_url_stops_only_what_opens_the_ledger(example_inventory: Path) -> None:
    env = {"SENDHOST_DATABASE_URL": "mysql://h/db"}
    assert run_cli("--inventory", str(example_inventory), "config", "show", env=env).returncode == 0
    result = run_cli("--inventory", str(example_inventory), "sender", "status", env=env)
    assert result.returncode == 2
    assert "is not a PostgreSQL URL" in result.stderr
