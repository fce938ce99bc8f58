"""`sendhost provision`: run the Ansible playbook on the sender hosts and report per host."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click

from provisioning.agent_package import agent_package
from provisioning.plan import ProvisionPlan, SlotSource, resolve_plan, slot_extravars
from provisioning.pool_source import no_redis_source
from provisioning.runner import ProvisionResult, find_ansible_playbook, run_playbook
from provisioning.targets import load_targets, require_connectable
from sendhost.errors import ConfigError
from toolkit.app import App
from toolkit.inventory import Inventory
from toolkit.output import emit_json, emit_table, format_option

ADDRESSES_TAG = "sender_addresses"  # playbooks/site.yml's tag of the role binding the slot addresses


@click.command("provision")
@click.option("--inventory", "inventory_path", metavar="PATH", type=click.Path(dir_okay=False, path_type=Path),
              help="Inventory file (overrides the global --inventory).")
@click.option("--limit", metavar="PATTERN", help="Ansible host pattern narrowing group senders.")
@click.option("--check", is_flag=True, help="Dry run: report what would change, change nothing.")
@click.option("--tags", metavar="T", help="Only tasks with these tags (comma-separated): sender_base, "
              "sender_addresses, sender_agent, packages, sysctl, timesync, users.")
@format_option()
@click.pass_obj
def command(app: App, inventory_path: Path | None, limit: str | None, check: bool, tags: str | None,
            fmt: str | None) -> None:
    """Provision sender hosts with playbooks/site.yml, run by ansible-runner.

    Each host gets this sendhost in a venv: a wheel built from this checkout (or SENDHOST_AGENT_WHEEL), or the
    same version from the inventory's sendhost_package_index_url.

    Ends with a table per host (ok, changed, failed, unreachable); exits 1 when any host failed or was
    unreachable, 2 for bad input (a host without ansible_host or key, a host without an IP pool, a slot outside
    its subnet, ansible-playbook missing). Slot addresses come from each host's IP pool in Redis (`sendhost pool
    create` first); a run whose --tags leave out sender_addresses needs no pool.
    """
    if inventory_path is not None:
        app.inventory_flag = str(inventory_path)
    inventory = app.require_inventory()
    tag_list = [t.strip() for t in (tags or "").split(",") if t.strip()]
    binds = binds_slots(tag_list)
    plans = _plans(inventory, limit, slot_source(app) if binds else None)
    binary = find_ansible_playbook(app.env)
    extravars: dict[str, object] = slot_extravars(plans) if binds else {}
    redis_url = app.config.redis_url
    if redis_url.value and not redis_url.source.startswith("inventory"):
        extravars["sendhost_redis_url"] = redis_url.value  # a flag or env var beats the inventory, as everywhere
    if redis_url.value:  # each agent gets its own host's ACL user, never the admin URL
        from provisioning.sender_redis import key_path, sender_redis_urls  # late: only a configured Redis needs it

        extravars["sendhost_sender_redis_urls"] = sender_redis_urls(
            app.redis, redis_url.value, [plan.name for plan in plans], key_path(app.env, app.state_dir), check=check,
            groups={host.name: inventory.mailbox_groups_of(host) for host in inventory.hosts})
    if app.env.get("SENDHOST_DATABASE_URL"):
        extravars["sendhost_database_url"] = app.env["SENDHOST_DATABASE_URL"]  # the agent's ledger, env over inventory
    progress = (lambda line: click.echo(line, err=True)) if sys.stderr.isatty() else None
    # the wheel the hosts install lives only as long as the run that copies it
    with tempfile.TemporaryDirectory(prefix="sendhost-agent-wheel-") as build_dir:
        extravars.update(agent_package(inventory.path, app.env, Path(build_dir)).extravars())
        result = run_playbook(inventory.path, binary=binary, extravars=extravars, limit=limit,
                              tags=tag_list, check=check,
                              progress=progress)
    _render(result, app.output_format(fmt))
    if result.failed:
        bad = ", ".join(f"{h.host} ({h.status})" for h in result.hosts if h.status in ("failed", "unreachable"))
        app.fail(f"provisioning failed on {bad or 'the playbook run'}", 1)


def binds_slots(tags: list[str]) -> bool:
    """Whether the run includes the sender_addresses role, the one that needs the slot addresses."""
    return not tags or ADDRESSES_TAG in tags or "all" in tags


def slot_source(app: App) -> SlotSource:
    """The IP pool in the configured Redis: the one source of slot addresses (the embedded Redis a command starts
    when none is configured never holds a pool, so that is an error naming the fix)."""
    if not app.config.redis_url.value:
        return no_redis_source
    from ippool.pool import Pool  # late: only a configured Redis needs the client
    from provisioning.pool_source import pool_slot_source

    return pool_slot_source(Pool(app.redis()))


def _plans(inventory: Inventory, limit: str | None, source: SlotSource | None) -> list[ProvisionPlan]:
    """Check every targeted host is reachable in principle and, with a `source`, resolve its slot addresses from
    its pool (an error for a host without one); without, plans carry no slots (the run binds none)."""
    by_name = {h.name: h for h in inventory.hosts}
    plans = []
    for target in load_targets(inventory.path, limit):
        require_connectable(target)
        host = by_name.get(target.name)
        if host is None:
            raise ConfigError(f"{inventory.path}: host {target.name} is not a sender host sendhost knows")
        if source is None:
            plans.append(ProvisionPlan(host.name, host.interface, host.subnet, ()))
        else:
            plans.append(resolve_plan(host.name, host.interface, host.subnet, source))
    return plans


def _render(result: ProvisionResult, fmt: str) -> None:
    if fmt == "json":
        emit_json({
            "check": result.check,
            "failed": result.failed,
            "hosts": [{"host": h.host, "status": h.status, "ok": h.ok, "changed": h.changed, "failed": h.failed,
                       "unreachable": h.unreachable, "skipped": h.skipped, "message": h.message}
                      for h in result.hosts],
        })
        return
    title = "sendhost provision" + (" (check mode: nothing changed)" if result.check else "")
    emit_table(title, ["host", "status", "ok", "changed", "failed", "unreachable", "skipped", "message"],
               [(h.host, h.status, h.ok, h.changed, h.failed, h.unreachable, h.skipped, h.message)
                for h in result.hosts])
