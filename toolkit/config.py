"""Effective configuration: flag > environment > inventory > default, with where each value came from."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sendhost.errors import ConfigError
from sendhost.redis_url import insecure_tls_reason, mask_url, validate_redis_url
from toolkit.inventory import Inventory

DEFAULT_INVENTORY = Path("inventory.yml")
DEFAULT_REGION = "us-east-1"
log = logging.getLogger("sendhost.config")


@dataclass(frozen=True)
class Setting:
    name: str
    value: str | None
    source: str  # flag, env NAME, inventory FILE:LINE, default
    secret: bool = False

    @property
    def shown(self) -> str:
        if self.value is None:
            return "-"
        return mask_url(self.value) if self.secret else self.value


@dataclass(frozen=True)
class Config:
    inventory_path: Setting
    redis_url: Setting
    state_dir: Setting
    aws_region: Setting
    aws_endpoint_url: Setting
    aws_profile: Setting

    def settings(self) -> list[Setting]:
        return [self.inventory_path, self.redis_url, self.state_dir, self.aws_region, self.aws_endpoint_url,
                self.aws_profile]


def _first_env(env: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    for name in names:
        if env.get(name):
            return name, env[name]
    return None


def resolve_inventory_path(flag: str | None, env: Mapping[str, str]) -> Setting:
    if flag:
        return Setting("inventory", flag, "flag --inventory")
    found = _first_env(env, "SENDHOST_INVENTORY")
    if found:
        return Setting("inventory", found[1], f"env {found[0]}")
    if DEFAULT_INVENTORY.exists():
        return Setting("inventory", str(DEFAULT_INVENTORY), "default")
    return Setting("inventory", None, "default (none: pass --inventory)")


def resolve_config(flags: Mapping[str, str | None], env: Mapping[str, str], inventory: Inventory | None) -> Config:
    """Apply the precedence rules to every setting sendhost reads."""
    inventory_path = resolve_inventory_path(flags.get("inventory"), env)
    redis_url = _redis_url(flags.get("redis_url"), env, inventory)
    state_dir = _simple("state_dir", flags.get("state_dir"), env, ("SENDHOST_STATE_DIR",), ".sendhost")
    region_from_inventory = inventory.hosts[0].region if inventory and inventory.hosts else None
    aws_region = _simple("aws_region", flags.get("region"), env, ("SENDHOST_AWS_REGION", "AWS_REGION",
                         "AWS_DEFAULT_REGION"), DEFAULT_REGION, inventory_value=region_from_inventory,
                         inventory_source=f"inventory {inventory.path}" if inventory else "")
    endpoint = _simple("aws_endpoint_url", None, env, ("AWS_ENDPOINT_URL_EC2", "AWS_ENDPOINT_URL"), None)
    profile = _simple("aws_profile", None, env, ("AWS_PROFILE",), None)
    return Config(inventory_path, redis_url, state_dir, aws_region, endpoint, profile)


def _simple(name: str, flag: str | None, env: Mapping[str, str], env_names: tuple[str, ...], default: str | None,
            inventory_value: str | None = None, inventory_source: str = "") -> Setting:
    if flag:
        return Setting(name, flag, "flag")
    found = _first_env(env, *env_names)
    if found:
        return Setting(name, found[1], f"env {found[0]}")
    if inventory_value:
        return Setting(name, inventory_value, inventory_source)
    return Setting(name, default, "default")


def _redis_url(flag: str | None, env: Mapping[str, str], inventory: Inventory | None) -> Setting:
    if flag:
        setting = Setting("redis_url", flag, "flag --redis-url", secret=True)
    elif found := _first_env(env, "SENDHOST_REDIS_URL", "REDIS_URL"):
        setting = Setting("redis_url", found[1], f"env {found[0]}", secret=True)
    elif inventory and inventory.redis_url:
        source = f"inventory {inventory.path}:{inventory.redis_url_line}"
        setting = Setting("redis_url", inventory.redis_url, source, secret=True)
    elif inventory and inventory.redis_url_vaulted:
        # Falling back to the embedded Redis here would split state between two servers without a word.
        raise ConfigError(f"{inventory.path}:{inventory.redis_url_line}: sendhost_redis_url is encrypted with "
                          "ansible-vault, which sendhost does not decrypt; give sendhost the URL in "
                          "SENDHOST_REDIS_URL (or --redis-url)")
    else:
        return Setting("redis_url", None, "default (embedded Redis under the state dir)")
    assert setting.value is not None
    try:
        validate_redis_url(setting.value)
    except ValueError as exc:
        raise ConfigError(f"redis_url from {setting.source}: {exc}") from None
    if reason := insecure_tls_reason(setting.value):
        log.warning("redis_url from %s: %s", setting.source, reason)
    return setting
