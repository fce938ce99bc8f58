"""`sendhost iam policy`: the IAM policy for this deployment, scoped to its pool name, regions and PTR zones, in the
ARN partition of its regions."""

from __future__ import annotations

import re

import click

from sendhost.errors import ConfigError
from toolkit.app import App
from toolkit.cli.help_format import WholeHelpGroup
from toolkit.iam_policy import Deployment
from toolkit.inventory import POOL_NAME_PATTERN
from toolkit.inventory_schema import DOMAIN_RE


@click.group("iam", cls=WholeHelpGroup)
def group() -> None:
    """The AWS permissions sendhost needs."""


@group.command("policy")
@click.option("--pool-name", metavar="NAME", help="The sendhost:pool tag value (default: the inventory's).")
@click.option("--region", "regions", multiple=True, metavar="REGION",
              help="A region the sender hosts run in; repeat for more (default: the inventory hosts' regions).")
@click.option("--ptr-zone", "ptr_zones", multiple=True, metavar="ZONE",
              help="A Route 53 zone for PTR forward records; repeat for more (default: the inventory's ptr_zone).")
@click.pass_obj
def policy(app: App, pool_name: str | None, regions: tuple[str, ...], ptr_zones: tuple[str, ...]) -> None:
    """Print the IAM policy (JSON) for this deployment: attach it to the role or user that runs sendhost.

    Mutations are allowed only on resources tagged sendhost:pool=NAME, so tag the sender instances and their
    network interfaces with it when launching them.
    """
    inventory = app.inventory
    regions_from = "--region"
    if inventory is not None:
        configured = Deployment.of(inventory)
        pool_name = pool_name or configured.pool_name
        regions_from = "--region" if regions else f"{inventory.path}: the hosts' sendhost_region"
        regions = regions or configured.regions
        ptr_zones = ptr_zones or configured.ptr_zones
    if not pool_name or not regions:
        raise ConfigError("iam policy: name the deployment: pass --inventory PATH, or --pool-name NAME and "
                          "--region REGION (and --ptr-zone ZONE if hosts set reverse DNS)")
    if not re.fullmatch(POOL_NAME_PATTERN, pool_name):
        raise ConfigError(f"--pool-name: {pool_name!r} is not a pool name: up to 63 letters, digits, '.', '_' or "
                          "'-', starting alphanumeric")
    for region in regions:
        if not re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d", region):
            raise ConfigError(f"--region: {region!r} is not an AWS region like us-east-1")
    for zone in ptr_zones:
        if not DOMAIN_RE.match(zone.rstrip(".").lower()):
            raise ConfigError(f"--ptr-zone: {zone!r} is not a zone name like mail.example.com")
    try:
        document = Deployment(pool_name, regions, ptr_zones).policy_json()
    except ValueError as exc:  # regions of two partitions, or of none botocore knows
        raise ConfigError(f"{regions_from}: {exc}") from None
    click.echo(document, nl=False)
