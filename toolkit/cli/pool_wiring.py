"""Builds the pool machinery for `sendhost pool` commands from the App: Redis, the AWS adapter, host specs, through
ippool's one composition root (`ippool.assembly.build_machinery`)."""

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
    from ippool.assembly import PoolMachinery
    from ippool.aws.adapter import Ec2Adapter
    from ippool.screen import Screen
    from ippool.spec import HostSpec
    from toolkit.inventory import SenderHost


def host_spec(host: SenderHost) -> HostSpec:
    """The pool policy of an inventory host."""
    from ippool.spec import HostSpec

    policy = host.pool
    return HostSpec(name=host.name, instance_id=host.instance_id, primary_ip=host.primary_ip, slots=policy.slots,
                    budget=policy.budget, park_minutes=float(policy.park_minutes),
                    ptr_zone=policy.ptr_zone if policy.ptr else None, private_ips=policy.private_ips)


def owner_id() -> str:
    """A name for this process in rotation claims and tags: host, pid and a random part."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass
class PoolContext:
    """What a pool command may use: the App and the pool machinery built from it, closed together."""

    app: App
    machinery: PoolMachinery

    def spec(self, name: str) -> HostSpec:
        self.app.require_inventory().host(name)  # names the inventory and the known hosts when unknown
        return self.machinery.specs[name]


def _screen(app: App) -> Screen:
    from ippool.screen import DnsblScreen, no_screen

    zones = app.require_inventory().dnsbl
    if not zones:
        return no_screen
    from dns_audit.resolver import LiveResolver, system_nameservers

    return DnsblScreen(lambda: LiveResolver(system_nameservers()), zones)


def make_adapter(app: App, region: str | None = None) -> Ec2Adapter:
    """The AWS adapter from App config: region (the host's, else the configured one), AWS_ENDPOINT_URL, profile."""
    from ippool.aws.adapter import Ec2Adapter, default_session_factory
    from toolkit.aws_profile import check_profile

    config = app.config
    check_profile(config.aws_profile.value, app.env)  # a typo in AWS_PROFILE is exit 2, not "AWS unreachable"
    return Ec2Adapter(default_session_factory(config.aws_profile.value), region or config.aws_region.value or
                      "us-east-1", endpoint_url=config.aws_endpoint_url.value)


@contextmanager
def pool_context(app: App, *, need_aws: bool = True, need_inventory: bool = True) -> Iterator[PoolContext]:
    """Open Redis (and the AWS adapter), yield the context, close both. A Redis failure inside ends the command
    with one line naming it (exit 1), never an internal error."""
    from ippool.assembly import build_machinery
    from ippool.spec import DEFAULT_POOL_NAME
    from sendhost.redis_conn import redis_errors

    specs: dict[str, HostSpec] = {}
    region = None
    pool_name = DEFAULT_POOL_NAME
    if need_inventory:
        inventory = app.require_inventory()
        specs = {host.name: host_spec(host) for host in inventory.hosts}
        region = inventory.hosts[0].region if inventory.hosts else None
        pool_name = inventory.pool_name
    client = app.redis()
    aws = make_adapter(app, region)
    try:
        with redis_errors("run the pool command", client):
            screen = _screen(app) if need_inventory else None
            yield PoolContext(app, build_machinery(client, aws, specs, time.time, pool_name, screen=screen))
    finally:
        aws.close()
        client.close()
