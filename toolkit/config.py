"""Effective configuration: flag > environment > inventory > default, with where each value came from.

The ledger's database: `sender --database-url` > SENDHOST_DATABASE_URL > the inventory's sendhost_database_url >
the embedded PostgreSQL under the state directory. It is checked where it is used (`App.database_url`), not here:
a malformed one must not stop the commands that never open the ledger.

The AWS settings follow botocore's own order, so `sendhost config show` tells what the AWS calls will use: region
`AWS_REGION` > `AWS_DEFAULT_REGION` > the profile's `region` (then the inventory's first host, then us-east-1), and
per service `AWS_ENDPOINT_URL_<SERVICE>` > `AWS_ENDPOINT_URL` > the profile's `endpoint_url` > AWS's public
endpoint. The region is only for what names no host: a host's own `sendhost_region` always wins for its pool. The
endpoints are shown, not passed: botocore resolves them itself, per service.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sendhost.errors import ConfigError
from sendhost.masking import mask_url
from sendhost.redis_url import insecure_tls_reason, validate_redis_url
from toolkit.inventory import Inventory

DEFAULT_INVENTORY = Path("inventory.yml")
DEFAULT_REGION = "us-east-1"
# The AWS services the pool calls and the variable botocore reads for each one's endpoint: AWS_ENDPOINT_URL_ and
# the service id in upper snake case ("Route 53" -> ROUTE_53, not ROUTE53).
SERVICE_ENDPOINT_VARS = {"ec2": "AWS_ENDPOINT_URL_EC2", "route53": "AWS_ENDPOINT_URL_ROUTE_53",
                         "service-quotas": "AWS_ENDPOINT_URL_SERVICE_QUOTAS"}
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
    database_url: Setting
    state_dir: Setting
    aws_region: Setting
    aws_endpoints: tuple[Setting, ...]  # one per service of SERVICE_ENDPOINT_VARS, in its order
    aws_profile: Setting

    def settings(self) -> list[Setting]:
        return [self.inventory_path, self.redis_url, self.database_url, self.state_dir, self.aws_region,
                *self.aws_endpoints, self.aws_profile]


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
    database_url = resolve_database_url(flags.get("database_url"), env, inventory)
    state_dir = _simple("state_dir", flags.get("state_dir"), env, ("SENDHOST_STATE_DIR",), ".sendhost")
    profile = _simple("aws_profile", None, env, ("AWS_PROFILE",), None)
    region_from_inventory = inventory.hosts[0].region if inventory and inventory.hosts else None
    aws_region = _simple("aws_region", flags.get("region"), env, ("SENDHOST_AWS_REGION", "AWS_REGION",
                         "AWS_DEFAULT_REGION"), DEFAULT_REGION, inventory_value=region_from_inventory,
                         inventory_source=f"inventory {inventory.path}" if inventory else "")
    if not aws_region.source.startswith(("flag", "env")) and (found := _from_profile(profile.value, "region", env)):
        aws_region = Setting("aws_region", *found)
    return Config(inventory_path, redis_url, database_url, state_dir, aws_region, _endpoints(profile.value, env),
                  profile)


def _from_profile(profile: str | None, key: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """`key` of the AWS profile, or None; an unreadable AWS config file is left for the AWS commands to report
    (toolkit.aws_profile.check_profile), not an error of every command."""
    from toolkit.aws_profile import profile_value

    try:
        return profile_value(profile, key, env)
    except ConfigError:
        return None


def _endpoints(profile: str | None, env: Mapping[str, str]) -> tuple[Setting, ...]:
    """Each service's endpoint in botocore's order (AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true turns them all off)."""
    settings = []
    ignored = env.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true"
    from_profile = None if ignored else _from_profile(profile, "endpoint_url", env)
    for service, variable in SERVICE_ENDPOINT_VARS.items():
        name = f"aws_endpoint_url ({service})"
        found = None if ignored else _first_env(env, variable, "AWS_ENDPOINT_URL")
        if found:
            settings.append(Setting(name, found[1], f"env {found[0]}"))
        elif from_profile:
            settings.append(Setting(name, *from_profile))
        else:
            settings.append(Setting(name, None, "default (AWS's public endpoint of the region)"))
    return tuple(settings)


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


def resolve_database_url(flag: str | None, env: Mapping[str, str], inventory: Inventory | None) -> Setting:
    """The ledger's PostgreSQL URL and its source; value None for the embedded one."""
    if flag:
        return Setting("database_url", flag, "flag --database-url", secret=True)
    if found := _first_env(env, "SENDHOST_DATABASE_URL"):
        return Setting("database_url", found[1], f"env {found[0]}", secret=True)
    if inventory is not None and inventory.database_url:
        return Setting("database_url", inventory.database_url,
                       f"inventory {inventory.path}:{inventory.database_url_line}", secret=True)
    return Setting("database_url", None, "default (embedded PostgreSQL under the state dir)")


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
