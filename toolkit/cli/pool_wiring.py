"""Builds the pool machinery for `sendhost pool` commands from the App: Redis, the AWS adapter, host specs."""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolkit.app import App

if TYPE_CHECKING:
    from ippool import Pool
    from ippool.aws import Ec2Adapter
    from ippool.denylist import Denylist
    from ippool.ledger import Ledger
    from ippool.provisioner import Provisioner
    from ippool.reaper import Reaper
    from ippool.reconcile import Reconciler
    from ippool.rotator import Rotator
    from ippool.spec import HostSpec
    from toolkit.inventory import SenderHost

# Admin commands wait longer on Redis than a sender's lease does.
ADMIN_SOCKET_TIMEOUT_S = 5.0


def host_spec(host: SenderHost) -> HostSpec:
    """The pool policy of an inventory host."""
    from ippool.spec import HostSpec

    policy = host.pool
    return HostSpec(name=host.name, instance_id=host.instance_id, primary_ip=host.primary_ip, slots=policy.slots,
                    budget=policy.budget, park_minutes=float(policy.park_minutes),
                    ptr_zone=policy.ptr_zone if policy.ptr else None)


def owner_id() -> str:
    """A name for this process in rotation claims and tags: host, pid and a random part."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass
class PoolContext:
    """Everything a pool command may use, made on demand and closed together."""

    app: Any
    client: Any
    pool: Pool
    aws: Ec2Adapter
    specs: dict[str, HostSpec]
    pool_name: str  # the `sendhost:pool` tag value of this inventory's EIPs
    clock: Any = time.time

    @property
    def ledger(self) -> Ledger:
        from ippool.ledger import Ledger

        return Ledger(self.client, self.clock)

    @property
    def denylist(self) -> Denylist:
        from ippool.denylist import Denylist

        return Denylist(self.client, self.clock)

    def spec(self, name: str) -> HostSpec:
        self.app.require_inventory().host(name)  # names the inventory and the known hosts when unknown
        return self.specs[name]

    def rotator(self, owner: str | None = None) -> Rotator:
        from ippool.rotator import Rotator

        return Rotator(self.pool, self.aws, self.specs, self.denylist, self.ledger, self.clock,
                       owner or owner_id(), screen=self._screen(), pool_name=self.pool_name)

    def reaper(self) -> Reaper:
        from ippool.reaper import Reaper

        return Reaper(self.aws, self.denylist, self.ledger, self.clock, pool_name=self.pool_name)

    def provisioner(self) -> Provisioner:
        from ippool.provisioner import Provisioner

        return Provisioner(self.aws, self.pool, self.reaper(), pool_name=self.pool_name)

    def reconciler(self, grace_s: float = 120.0) -> Reconciler:
        from ippool.reconcile import Reconciler

        return Reconciler(self.pool, self.aws, self.specs, self.ledger, self.reaper(), self.clock,
                          pool_name=self.pool_name, grace_s=grace_s)

    def _screen(self) -> Any:
        from ippool.screen import DnsblScreen, no_screen

        zones = self.app.require_inventory().dnsbl
        if not zones:
            return no_screen
        from dns_audit.resolver import LiveResolver, system_nameservers

        return DnsblScreen(lambda: LiveResolver(system_nameservers()), zones)


def make_adapter(app: App, region: str | None = None) -> Ec2Adapter:
    """The AWS adapter from App config: region (the host's, else the configured one), AWS_ENDPOINT_URL, profile."""
    from ippool.aws import Ec2Adapter, default_session_factory
    from toolkit.aws_profile import check_profile

    config = app.config
    check_profile(config.aws_profile.value, app.env)  # a typo in AWS_PROFILE is exit 2, not "AWS unreachable"
    return Ec2Adapter(default_session_factory(config.aws_profile.value), region or config.aws_region.value or
                      "us-east-1", endpoint_url=config.aws_endpoint_url.value)


@contextmanager
def pool_context(app: App, *, need_aws: bool = True, need_inventory: bool = True) -> Iterator[PoolContext]:
    """Open Redis (and the AWS adapter), yield the context, close both."""
    from ippool import Pool
    from ippool.spec import DEFAULT_POOL_NAME

    specs: dict[str, HostSpec] = {}
    region = None
    pool_name = DEFAULT_POOL_NAME
    if need_inventory:
        inventory = app.require_inventory()
        specs = {host.name: host_spec(host) for host in inventory.hosts}
        region = inventory.hosts[0].region if inventory.hosts else None
        pool_name = inventory.pool_name
    client = app.redis(socket_timeout=ADMIN_SOCKET_TIMEOUT_S)
    aws = make_adapter(app, region)
    try:
        yield PoolContext(app, client, Pool(client), aws, specs, pool_name)
    finally:
        aws.close()
        client.close()
