"""Builds the pool machinery for `sendhost pool` commands from the App: Redis, one AWS adapter per region of the
inventory's hosts and the hosts' own records, through ippool's one composition root
(`ippool.assembly.build_regional`).

Each host is served by the adapter of its own `sendhost_region`; the configured region (`AWS_REGION`, ...) is only
for what no host names (an inventory with no hosts, `pool plan --hosts N`)."""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolkit.app import App

if TYPE_CHECKING:
    from ippool.assembly import PoolMachinery, RegionalPools
    from ippool.aws.adapter import Ec2Adapter
    from ippool.screen import Screen
    from sendhost.model import SenderHost


def owner_id() -> str:
    """A name for this process in rotation claims and tags: host, pid and a random part."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass
class PoolContext:
    """What a pool command may use: the App and the pool machinery of every region built from it, closed
    together."""

    app: App
    pools: RegionalPools

    def spec(self, name: str) -> SenderHost:
        self.app.require_inventory().host(name)  # names the inventory and the known hosts when unknown
        return self.pools.specs[name]

    def machinery(self, host: str) -> PoolMachinery:
        """The machinery of `host`'s region: its adapter speaks to the region the inventory puts the host in."""
        self.spec(host)
        return self.pools.of_host(host)

    def require_ptr_zones(self, hosts: list[str] | None = None) -> None:
        """Exit 2 naming the inventory key when a PTR zone of `hosts` (default: every host) is not a public Route 53
        zone: checked before a command allocates, so a wrong zone leaves no address behind."""
        from ippool.errors import HostedZoneNotFound

        for name in hosts if hosts is not None else list(self.pools.specs):
            spec = self.spec(name)
            if spec.forward_zone is None:
                continue
            try:
                self.pools.of_host(name).aws.public_zone_id(spec.forward_zone)
            except HostedZoneNotFound as exc:
                raise HostedZoneNotFound(f"{name}.sendhost_pool.ptr_zone {spec.forward_zone!r}: {exc}") from None


def _screen(app: App) -> Screen:
    from ippool.screen import DnsblScreen, no_screen

    zones = app.require_inventory().dnsbl
    if not zones:
        return no_screen
    from dns_audit.resolver import LiveResolver, system_nameservers

    return DnsblScreen(lambda: LiveResolver(system_nameservers()), zones)


def make_adapter(app: App, region: str | None = None) -> Ec2Adapter:
    """The AWS adapter of `region` (default: the configured region) with the configured profile. Endpoints are
    botocore's to resolve per service (AWS_ENDPOINT_URL_EC2, ..._ROUTE_53, AWS_ENDPOINT_URL, the profile): passing
    one URL here would send every service to it."""
    from ippool.aws.adapter import Ec2Adapter, default_session_factory
    from toolkit.aws_profile import check_profile
    from toolkit.config import DEFAULT_REGION

    config = app.config
    check_profile(config.aws_profile.value, app.env)  # a typo in AWS_PROFILE is exit 2, not "AWS unreachable"
    return Ec2Adapter(default_session_factory(config.aws_profile.value),
                      region or config.aws_region.value or DEFAULT_REGION)


@contextmanager
def pool_context(app: App, *, need_aws: bool = True, need_inventory: bool = True) -> Iterator[PoolContext]:
    """Open Redis and one AWS adapter per region of the inventory's hosts, yield the context, close them all.
    With `need_aws`, every region's credentials are checked first (exit 2 naming the region and profile). A Redis
    failure inside ends the command with one line naming it (exit 1), never an internal error."""
    from ippool.assembly import build_regional
    from ippool.spec import DEFAULT_POOL_NAME
    from sendhost.redis_conn import redis_errors
    from toolkit.config import DEFAULT_REGION

    specs: dict[str, dict[str, SenderHost]] = {}
    pool_name = DEFAULT_POOL_NAME
    if need_inventory:
        inventory = app.require_inventory()
        for host in inventory.hosts:
            specs.setdefault(host.region, {})[host.name] = host
        pool_name = inventory.pool_name
    regions = list(specs) or [app.config.aws_region.value or DEFAULT_REGION]
    adapters = {region: make_adapter(app, region) for region in regions}
    client = None
    try:
        if need_aws:
            for aws in adapters.values():
                aws.require_credentials(app.config.aws_profile.value)
        client = app.redis()
        with redis_errors("run the pool command", client):
            screen = _screen(app) if need_inventory else None
            yield PoolContext(app, build_regional(client, adapters, specs, time.time, pool_name, screen=screen))
    finally:
        for aws in adapters.values():
            aws.close()
        if client is not None:
            client.close()
