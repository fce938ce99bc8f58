"""`sendhost sender web` and `sendhost sender inbox`: feedback into the ledger (sender.web, sender.inbox)."""

from __future__ import annotations

import logging
import os

import click

from toolkit.cli.sender import SenderContext

pass_sender = click.make_pass_decorator(SenderContext)


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535 or not host:
        raise click.BadParameter(f"{value!r} is not HOST:PORT, e.g. 127.0.0.1:8025")
    return host.strip("[]"), int(port)


@click.command("web")
@click.option("--listen", default="127.0.0.1:8025", show_default=True, metavar="HOST:PORT",
              help="Where to serve; put TLS in front (the List-Unsubscribe URL must be https).")
@click.option("--previous-key-file", metavar="FILE", envvar="SENDHOST_UNSUBSCRIBE_PREVIOUS_KEY_FILE",
              help="The older unsubscribe key, still accepted while rotating (env "
                   "SENDHOST_UNSUBSCRIBE_PREVIOUS_KEY_FILE).")
@click.option("--events-key-file", metavar="FILE", envvar="SENDHOST_EVENTS_KEY_FILE",
              help="HMAC key of POST /events (env SENDHOST_EVENTS_KEY_FILE); without it /events answers 404.")
@pass_sender
def web_command(sc: SenderContext, listen: str, previous_key_file: str | None, events_key_file: str | None) -> None:
    """Serve one-click unsubscribe (RFC 8058), its confirm page, relay events, /healthz and /metrics."""
    from sender.tokens import read_key_file
    from sender.web import WebKeys, serve

    host, port = _listen(listen)
    inventory = sc.app.inventory
    url, _source = sc.database_url()
    with sc.ledger() as ledger:
        current = (read_key_file(inventory.unsubscribe_key_file) if inventory is not None
                   and inventory.unsubscribe_key_file else ledger.unsubscribe_key())
    keys = [current, *([read_key_file(previous_key_file)] if previous_key_file else [])]
    events_key = read_key_file(events_key_file) if events_key_file else None
    logging.basicConfig(level=os.environ.get("SENDHOST_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    click.echo(f"sender web: serving on http://{host}:{port}", err=True)
    serve(url, WebKeys(tuple(keys), events_key), host, port)


def register(group: click.Group) -> None:
    group.add_command(web_command)
