"""`sendhost inventory`: validate the one inventory file."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from sendhost.errors import ConfigError
from sendhost.masking import mask_url, scrub
from sendhost.redis_url import insecure_tls_reason
from toolkit.app import App
from toolkit.cli.help_format import WholeHelpGroup
from toolkit.inventory import load_inventory
from toolkit.output import emit_json, format_option

log = logging.getLogger("sendhost.inventory")


@click.group("inventory", cls=WholeHelpGroup)
def group() -> None:
    """Validate the inventory shared with Ansible."""


@group.command("check")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--offline", is_flag=True, help="Do not try to reach the inventory's Redis URL.")
@click.option("--tokens", is_flag=True,
              help="Also require each OAuth mailbox's refresh-token file, mode 0600 (on the sending host, where the "
                   "agent reads it; a controller holds none).")
@format_option()
@click.pass_obj
def check(app: App, path: Path | None, offline: bool, tokens: bool, fmt: str | None) -> None:
    """Validate PATH (default: --inventory) against sendhost's schema; exit 2 naming file:line and key on error."""
    if path is None:
        path = app.require_inventory().path
    inventory = load_inventory(path, require_refresh_tokens=tokens)
    if inventory.redis_url and (reason := insecure_tls_reason(inventory.redis_url)):
        log.warning("%s:%d: sendhost_redis_url: %s", path, inventory.redis_url_line, reason)
    if inventory.redis_url and not offline:
        _ping(inventory.redis_url, f"{path}:{inventory.redis_url_line}")
    summary = {
        "inventory": str(path),
        "valid": True,
        "hosts": len(inventory.hosts),
        "slots": sum(h.pool.slots for h in inventory.hosts),
        "domains": len(inventory.domains),
        "mailboxes": len(inventory.mailboxes),
    }
    if app.output_format(fmt) == "json":
        emit_json(summary)
        return
    click.echo(
        f"{path}: valid: {summary['hosts']} sender hosts, {summary['slots']} slots, "
        f"{summary['domains']} domains, {summary['mailboxes']} mailboxes"
    )


def _ping(url: str, where: str) -> None:
    import redis  # late: only this command needs a client

    from sendhost.redis_conn import check_access

    check_access(url, f"inventory {where}")  # a wrong password is not "cannot reach": the one wording of a refusal
    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise ConfigError(
            f"{where}: sendhost_redis_url: cannot reach {mask_url(url)} ({scrub(str(exc), url)}); start Redis, fix "
            "the URL, or pass --offline"
        ) from None
    finally:
        client.close()
