"""`sendhost sender web`, `inbox` and `health`: feedback into the ledger (sender.feedback.web and .inbox)."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import click

from toolkit.app import reads_only
from toolkit.cli.sender.context import SenderContext, pass_sender
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    import threading

    from sender.assembly import InboxReading
    from sendhost.model import Mailbox


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535 or not host:
        raise click.BadParameter(f"{value!r} is not HOST:PORT, e.g. 127.0.0.1:8025")
    return host.strip("[]"), int(port)


def _key_file(path: str, option: str) -> bytes:
    from sender.errors import SenderConfigError
    from sender.sending.tokens import read_key_file

    try:
        return read_key_file(path)
    except SenderConfigError as exc:
        detail = str(exc).split(";")[0].replace("unsubscribe key file", "key file")
        raise SenderConfigError(f"{option}: {detail}; write at least 32 bytes of key there as hex "
                                "(`openssl rand -hex 32`)") from None


@click.command("web")
@click.option("--listen", default="127.0.0.1:8025", show_default=True, metavar="HOST:PORT",
              help="Where to serve; put TLS in front (the List-Unsubscribe URL must be https).")
@click.option("--metrics-listen", default="127.0.0.1:9025", show_default=True, metavar="HOST:PORT",
              envvar="SENDHOST_METRICS_LISTEN",
              help="Where to serve /metrics/ (env SENDHOST_METRICS_LISTEN): its own listener, never --listen's, "
                   "since it names every mailbox with its bounces.")
@click.option("--previous-key-file", metavar="FILE", envvar="SENDHOST_UNSUBSCRIBE_PREVIOUS_KEY_FILE",
              help="The older unsubscribe key, still accepted while rotating (env "
                   "SENDHOST_UNSUBSCRIBE_PREVIOUS_KEY_FILE).")
@click.option("--events-key-file", metavar="FILE", envvar="SENDHOST_EVENTS_KEY_FILE",
              help="HMAC key of POST /events (env SENDHOST_EVENTS_KEY_FILE); without it /events answers 404.")
@click.option("--events-legacy-signatures", is_flag=True, envvar="SENDHOST_EVENTS_LEGACY_SIGNATURES",
              help="Also accept POST /events signed the old way, X-Sendhost-Signature: sha256=<hex> (no time, so a "
                   "captured request verifies forever; env SENDHOST_EVENTS_LEGACY_SIGNATURES=1). For this release "
                   "only, while a relay moves to t=...,v1=....")
@click.option("--events-signature-tolerance", default=300, show_default=True, type=click.IntRange(1, 3600),
              metavar="SECONDS", envvar="SENDHOST_EVENTS_SIGNATURE_TOLERANCE",
              help="How far the t= of a POST /events signature may be from this host's clock, either way (env "
                   "SENDHOST_EVENTS_SIGNATURE_TOLERANCE); past it the request is refused, 401.")
@click.option("--pool-size", default=8, show_default=True, type=click.IntRange(1, 100), metavar="N",
              envvar="SENDHOST_WEB_POOL_SIZE",
              help="The most ledger connections the service holds (env SENDHOST_WEB_POOL_SIZE); its share of the "
                   "database's connection budget (docs/pgbouncer.md).")
@pass_sender
def web_command(sc: SenderContext, listen: str, metrics_listen: str, previous_key_file: str | None,
                events_key_file: str | None, events_legacy_signatures: bool, events_signature_tolerance: int,
                pool_size: int) -> None:
    """Serve one-click unsubscribe (RFC 8058), its confirm page, relay events, tracked links and the open image
    (docs/tracking.md), /healthz and /metrics."""
    from sender.assembly import unsubscribe_key, web_keys
    from sender.feedback.web import serve

    host, port = _listen(listen)
    metrics_host, metrics_port = _listen(metrics_listen)
    if port == metrics_port and (port != 0 or host == metrics_host):
        raise click.BadParameter(f"{metrics_listen!r} is --listen's port; give /metrics/ its own, e.g. "
                                 "127.0.0.1:9025", param_hint="--metrics-listen")
    inventory = sc.app.inventory
    url = sc.place.url
    with sc.ledger() as ledger:
        current = unsubscribe_key(ledger, inventory.unsubscribe_key_file if inventory is not None else None)
    keys = web_keys(current, _key_file(previous_key_file, "--previous-key-file") if previous_key_file else None,
                    _key_file(events_key_file, "--events-key-file") if events_key_file else None,
                    events_legacy_signatures, events_signature_tolerance)
    logging.basicConfig(level=os.environ.get("SENDHOST_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    click.echo(f"sender web: serving on http://{host}:{port}, /metrics/ on http://{metrics_host}:{metrics_port}",
               err=True)
    serve(url, keys, host, port, metrics_host, metrics_port, pool_size=pool_size)


def _accounts(sc: SenderContext, only: tuple[str, ...] = ()) -> list[Mailbox]:
    inventory = sc.app.inventory
    if inventory is None:
        return []
    wanted = {o.lower() for o in only}
    return [m for m in inventory.mailboxes if m.imap is not None and (not wanted or m.address.lower() in wanted)]


def _reading(sc: SenderContext, url: str, accounts: list[Mailbox]) -> InboxReading:
    from sender.assembly import InboxReading
    from warmup import Guard

    return InboxReading(url, tuple(accounts), lambda: Guard(sc.app.redis()), env=sc.app.env)


@click.command("inbox")
@click.option("--once", is_flag=True, help="Read every mailbox once, then exit (1 if a mailbox could not be read).")
@click.option("--interval", default=60.0, show_default=True, type=click.FloatRange(1, 86400),
              help="Seconds between passes without --once.")
@click.option("--mailbox", "only", multiple=True, metavar="ADDRESS", help="Read only these mailboxes.")
@format_option()
@pass_sender
def inbox_command(sc: SenderContext, once: bool, interval: float, only: tuple[str, ...], fmt: str | None) -> None:
    """Read each mailbox's inbox over IMAP: bounces, complaints, replies, auto-replies and unsubscribe mails."""
    import signal
    import threading

    sc.app.require_inventory()
    accounts = _accounts(sc, only)
    if not accounts:
        sc.app.fail("no mailbox to read: add imap: {host: ...} to the mailboxes in sendhost_mailboxes"
                    + (f" (or fix --mailbox {', '.join(only)})" if only else ""), 2)
    url = sc.place.url
    with sc.ledger():
        pass  # the schema check
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    reading = _reading(sc, url, accounts)
    while True:
        reports = reading.one_pass()
        if sc.app.output_format(fmt) == "json":
            emit_json({"mailboxes": [r.as_dict() for r in reports]})
        else:
            for report in reports:
                counts = ", ".join(f"{n} {k}" for k, n in sorted(report.outcomes.items())) or "nothing new"
                click.echo(f"{report.mailbox}: {counts}" + (f"; FAILED: {report.error}" if report.error else ""))
        if once:
            if any(r.error for r in reports):
                raise SystemExit(1)
            return
        if stop.wait(interval):
            return


def start_inbox_reader(sc: SenderContext, stop: threading.Event, every_s: float | None = None) -> None:
    """The agent's inbox reading: a daemon thread reading every mailbox with imap: settings every minute until
    `stop` (nothing when none has them)."""
    from sender.assembly import INBOX_EVERY_S

    accounts = _accounts(sc)
    if not accounts:
        return
    url = sc.place.url
    _reading(sc, url, accounts).start(stop, INBOX_EVERY_S if every_s is None else every_s)


@reads_only
@click.command("health")
@format_option()
@pass_sender
def health_command(sc: SenderContext, fmt: str | None) -> None:
    """Each mailbox's last 7 days: sends, hard bounces, complaints, and what the warm-up gates make of them."""
    from datetime import UTC, datetime

    from sender.feedback.health import judge, read_health
    from sender.ledger.events import Feedback
    from toolkit.cli.mailbox_health import COLUMNS, TITLE, health_row

    url = sc.place.url
    with sc.ledger():
        pass  # the schema check
    with Feedback.from_url(url) as feedback:
        seen = read_health(feedback, datetime.now(UTC))
    healths = [judge(seen, mailbox) for mailbox in sorted(seen)]
    if sc.app.output_format(fmt) == "json":
        emit_json({"mailboxes": [health.to_json() for health in healths]})
    else:
        emit_table(TITLE, COLUMNS, [health_row(health) for health in healths])
