"""`sendhost pool exporter|sender-acl`: what the rest of a deployment reads from the pool's Redis, the Prometheus
metrics and the sender agent's own ACL user."""

from __future__ import annotations

import signal

import click

from toolkit.app import App


@click.command("exporter")
@click.option("--listen", default="127.0.0.1:9464", show_default=True, metavar="HOST:PORT",
              help="Address to serve /metrics on.")
@click.pass_obj
def exporter(app: App, listen: str) -> None:
    """Serve the pool's and the warm-up guard's Prometheus metrics (read from Redis at each scrape) until SIGTERM
    or Ctrl-C."""
    import threading

    from prometheus_client import CollectorRegistry, start_http_server

    from ippool.metrics import PoolCollector
    from warmup import Guard
    from warmup.metrics import WarmupCollector

    address, _, port = listen.rpartition(":")
    if not address or not port.isdigit() or not 0 < int(port) < 65536:
        app.fail(f"--listen {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:9464", code=2)
    client = app.redis()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PoolCollector(client))
    registry.register(WarmupCollector(Guard(client)))
    try:
        server, thread = start_http_server(int(port), addr=address.strip("[]"), registry=registry)
    except OSError as exc:
        client.close()
        app.fail(f"--listen {listen}: cannot listen there ({exc.strerror})", code=2)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopped.set())
    click.echo(f"serving metrics on http://{listen}/metrics", err=True)
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        client.close()


@click.command("sender-acl")
@click.argument("host")
@click.option("--group", "groups", multiple=True, metavar="GROUP",
              help="A warm-up group HOST sends for (repeatable); default: the inventory's sendhost_mailbox_groups "
                   "of HOST, else every group.")
@click.option("--apply", "apply_", is_flag=True,
              help="Load sendhost's function library and create or replace the user on the configured Redis (an "
                   "admin URL), with the password in SENDHOST_SENDER_REDIS_PASSWORD.")
@click.pass_obj
def sender_acl(app: App, host: str, groups: tuple[str, ...], apply_: bool) -> None:
    """Print the Redis ACL rule of HOST's sender user: what the sender agent runs (sendhost's functions, leases on
    its own host, the warm-up guard of its groups), on the keys it runs it on, nothing else (docs/security.md;
    Redis >= 7.0). The password shows as >PASSWORD; --apply sets it from the environment (`sendhost provision`
    applies it itself)."""
    import os

    from ippool.keys import check_host_name
    from ippool.sender_acl import apply_sender_acl, sender_acl_command
    from sendhost.redis_conn import redis_errors

    try:
        check_host_name(host)
        served = _served_groups(app, host, groups)
        if not apply_:
            click.echo(sender_acl_command(host, served))
            return
    except ValueError as exc:
        app.fail(str(exc), code=2)
    password = os.environ.get("SENDHOST_SENDER_REDIS_PASSWORD", "")
    if not password:
        app.fail("--apply needs the sender's password in SENDHOST_SENDER_REDIS_PASSWORD (from your secret store)",
                 code=2)
    client = app.redis()
    try:
        with redis_errors(f"create the ACL user of {host}'s sender", client):
            user = apply_sender_acl(client, host, password, served)
    except ValueError as exc:  # a Redis too old for the rule
        app.fail(str(exc), code=2)
    finally:
        client.close()
    click.echo(f"{user}: ACL user set on Redis (its URL: redis[s]://{user}:***@<your Redis>)")


def _served_groups(app: App, host: str, groups: tuple[str, ...]) -> tuple[str, ...] | None:
    """The warm-up groups of HOST's grant: --group, else its inventory's, else None (every group)."""
    if groups:
        return groups
    inventory = app.inventory
    if inventory is None or not any(h.name == host for h in inventory.hosts):
        return None
    return inventory.mailbox_groups_of(inventory.host(host))
