"""`sendhost sender web` and `sendhost sender inbox`: feedback into the ledger (sender.feedback.web and .inbox)."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import click

from toolkit.cli.sender import SenderContext
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    import threading

    from sender.feedback.inbox import MailboxReport
    from sender.ledger.events import Feedback
    from sendhost.model import Mailbox

pass_sender = click.make_pass_decorator(SenderContext)


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
@click.option("--previous-key-file", metavar="FILE", envvar="SENDHOST_UNSUBSCRIBE_PREVIOUS_KEY_FILE",
              help="The older unsubscribe key, still accepted while rotating (env "
                   "SENDHOST_UNSUBSCRIBE_PREVIOUS_KEY_FILE).")
@click.option("--events-key-file", metavar="FILE", envvar="SENDHOST_EVENTS_KEY_FILE",
              help="HMAC key of POST /events (env SENDHOST_EVENTS_KEY_FILE); without it /events answers 404.")
@pass_sender
def web_command(sc: SenderContext, listen: str, previous_key_file: str | None, events_key_file: str | None) -> None:
    """Serve one-click unsubscribe (RFC 8058), its confirm page, relay events, /healthz and /metrics."""
    from sender.feedback.web import WebKeys, serve
    from sender.sending.tokens import read_key_file

    host, port = _listen(listen)
    inventory = sc.app.inventory
    url, _source = sc.database_url()
    with sc.ledger() as ledger:
        current = (read_key_file(inventory.unsubscribe_key_file) if inventory is not None
                   and inventory.unsubscribe_key_file else ledger.unsubscribe_key())
    keys = [current, *([_key_file(previous_key_file, "--previous-key-file")] if previous_key_file else [])]
    events_key = _key_file(events_key_file, "--events-key-file") if events_key_file else None
    logging.basicConfig(level=os.environ.get("SENDHOST_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    click.echo(f"sender web: serving on http://{host}:{port}", err=True)
    serve(url, WebKeys(tuple(keys), events_key), host, port)


def _accounts(sc: SenderContext, only: tuple[str, ...] = ()) -> list[Mailbox]:
    inventory = sc.app.inventory
    if inventory is None:
        return []
    wanted = {o.lower() for o in only}
    return [m for m in inventory.mailboxes if m.imap is not None and (not wanted or m.address.lower() in wanted)]


def _one_pass(sc: SenderContext, url: str, accounts: list[Mailbox]) -> list[MailboxReport]:
    from sender.feedback.inbox import read_all
    from sender.ledger.events import Feedback

    with Feedback.from_url(url) as feedback:
        reports = read_all(feedback, accounts, env=sc.app.env)
        _health(sc, feedback, [r.mailbox for r in reports if r.outcomes["bounced"] or r.outcomes["complained"]])
    return reports


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
    url, _source = sc.database_url()
    with sc.ledger():
        pass  # the schema check
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while True:
        reports = _one_pass(sc, url, accounts)
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


INBOX_EVERY_S = 60.0


def start_inbox_reader(sc: SenderContext, stop: threading.Event, every_s: float = INBOX_EVERY_S) -> None:
    """The agent's inbox reading: a daemon thread reading every mailbox with imap: settings every minute until
    `stop` (nothing when none has them). A failure is logged and tried again at the next pass."""
    import threading

    from sender.errors import SenderError

    accounts = _accounts(sc)
    if not accounts:
        return
    url, _source = sc.database_url()
    log = logging.getLogger("sendhost.sender.inbox")

    def loop() -> None:
        while not stop.is_set():
            try:
                _one_pass(sc, url, accounts)
            except SenderError as exc:  # the ledger down: the next pass reads the same messages again
                log.warning("inbox: pass failed: %s", exc)
            except Exception:  # a bug must not end the agent's inbox reading for good: log it, try next pass
                log.exception("inbox: pass failed")
            stop.wait(every_s)

    threading.Thread(target=loop, name="sender-inbox", daemon=True).start()


def _health(sc: SenderContext, feedback: Feedback, mailboxes: list[str]) -> None:
    """New bounces or complaints: judge those mailboxes and tell the warm-up guard (sender.feedback.health)."""
    if not mailboxes:
        return
    from datetime import UTC, datetime

    from redis.exceptions import RedisError

    from sender.feedback.health import apply_health
    from sendhost.errors import SendhostError
    from warmup import Guard

    try:
        apply_health(feedback, Guard(sc.app.redis()), mailboxes, datetime.now(UTC))
    except (SendhostError, OSError, RedisError) as exc:  # the reading is done; the next new bounce tries again
        logging.getLogger("sendhost.sender.health").error("health: the warm-up guard was not told: %s", exc)


@click.command("health")
@format_option()
@pass_sender
def health_command(sc: SenderContext, fmt: str | None) -> None:
    """Each mailbox's last 7 days: sends, hard bounces, complaints, and what the warm-up gates make of them."""
    from datetime import UTC, datetime

    from sender.feedback.health import judge, read_health
    from sender.ledger.events import Feedback
    from toolkit.cli.mailbox_health import COLUMNS, TITLE, health_row

    url, _source = sc.database_url()
    with sc.ledger():
        pass  # the schema check
    with Feedback.from_url(url) as feedback:
        seen = read_health(feedback, datetime.now(UTC))
    healths = [judge(seen, mailbox) for mailbox in sorted(seen)]
    if sc.app.output_format(fmt) == "json":
        emit_json({"mailboxes": [health.to_json() for health in healths]})
    else:
        emit_table(TITLE, COLUMNS, [health_row(health) for health in healths])


def register(group: click.Group) -> None:
    group.add_command(web_command)
    group.add_command(inbox_command)
    group.add_command(health_command)
