"""`sendhost sender`: the send ledger (migrate, enqueue, suppress, status, show, sweep) and the agent (run)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from toolkit.app import App
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from collections.abc import Callable

    from sender import Ledger
    from sender.sending.agent import Agent

EXIT_HELP = ("Exit 0 ok; 1 the database or a service failed; 2 bad input (the message names it). "
             "Database: --database-url > SENDHOST_DATABASE_URL > inventory sendhost_database_url > an embedded "
             "PostgreSQL under the state directory.")


@dataclass
class SenderContext:
    app: App
    database_url_flag: str | None

    def database_url(self) -> tuple[str, str]:
        """(URL, where it came from), by the precedence in EXIT_HELP."""
        from sender.ledger import connection as db

        configured = configured_database_url(self.app, self.database_url_flag)
        return configured if configured is not None else (db.embedded_url(self.app.state_dir), "embedded")

    def ledger(self, *, migrated: bool = True) -> Ledger:
        """The ledger; the embedded one is migrated on first use, a configured one must have been migrated."""
        from sender import Ledger

        url, source = self.database_url()
        ledger = Ledger.from_url(url)
        if migrated:
            if source == "embedded":
                ledger.migrate()
            else:
                ledger.check_schema()
        return ledger


def configured_database_url(app: App, flag: str | None = None) -> tuple[str, str] | None:
    """(URL, where it came from) of a configured ledger, by the precedence in EXIT_HELP; None when none is (the
    embedded one, which starting would write under the state directory)."""
    from sender.ledger import connection as db

    if flag:
        return db.validate_url(flag), "flag --database-url"
    if app.env.get("SENDHOST_DATABASE_URL"):
        return db.validate_url(app.env["SENDHOST_DATABASE_URL"]), "env SENDHOST_DATABASE_URL"
    inventory = app.inventory
    if inventory is not None and inventory.database_url:
        return db.validate_url(inventory.database_url), f"inventory {inventory.path}:{inventory.database_url_line}"
    return None


@click.group("sender", epilog=EXIT_HELP)
@click.option("--database-url", metavar="URL", help="The ledger's PostgreSQL (env SENDHOST_DATABASE_URL).")
@click.pass_context
def group(ctx: click.Context, database_url: str | None) -> None:
    """The sender agent and its PostgreSQL send ledger."""
    ctx.obj = SenderContext(ctx.ensure_object(App), database_url)


pass_sender = click.make_pass_decorator(SenderContext)


@group.command("migrate")
@format_option()
@pass_sender
def migrate_command(sc: SenderContext, fmt: str | None) -> None:
    """Create or upgrade the ledger's schema (idempotent; safe from several processes at once)."""
    with sc.ledger(migrated=False) as ledger:
        result = ledger.migrate()
    data = {"before": result.before, "after": result.after, "applied": list(result.applied)}
    if sc.app.output_format(fmt) == "json":
        emit_json(data)
    else:
        applied = ", ".join(result.applied) or "nothing (already current)"
        click.echo(f"ledger schema at version {result.after} (was {result.before}); applied: {applied}")


@group.command("enqueue")
@click.argument("csv_file", metavar="FILE.csv", type=click.Path(path_type=Path))
@format_option()
@pass_sender
def enqueue_command(sc: SenderContext, csv_file: Path, fmt: str | None) -> None:
    """Queue each row of FILE.csv (lead,step,to,group,subject,text[,not_before]); all rows or none."""
    from sender.ledger.csvfile import read_rows

    inventory = sc.app.inventory
    groups = {m.group for m in inventory.mailboxes} if inventory is not None and inventory.mailboxes else None
    rows = read_rows(csv_file, groups)
    with sc.ledger() as ledger:
        results = ledger.enqueue_many([row.params() for row in rows])
    counts = {"queued": 0, "duplicate": 0, "suppressed": 0}
    for result in results:
        counts[result.value] += 1
    if sc.app.output_format(fmt) == "json":
        emit_json(counts)
    else:
        click.echo(f"{counts['queued']} queued, {counts['duplicate']} refused as duplicates, "
                   f"{counts['suppressed']} refused as suppressed")


@group.command("suppress")
@click.argument("addresses", nargs=-1, required=True)
@click.option("--reason", default="suppressed by hand", show_default=True, help="Why, for the row's history.")
@format_option()
@pass_sender
def suppress_command(sc: SenderContext, addresses: tuple[str, ...], reason: str, fmt: str | None) -> None:
    """Never send to ADDRESS again; queued rows to it are withdrawn."""
    from sender.ledger.csvfile import ADDRESS_RE

    bad = [a for a in addresses if not ADDRESS_RE.match(a.strip())]
    if bad:
        sc.app.fail(f"{bad[0]!r} is not an email address like alice@example.com", 2)
    with sc.ledger() as ledger:
        withdrawn = {address.strip().lower(): ledger.suppress(address.strip(), reason) for address in addresses}
    if sc.app.output_format(fmt) == "json":
        emit_json({"suppressed": withdrawn})
    else:
        for address, count in withdrawn.items():
            click.echo(f"{address}: suppressed; {count} queued row(s) withdrawn")


@group.command("status")
@format_option()
@pass_sender
def status_command(sc: SenderContext, fmt: str | None) -> None:
    """Rows per status, and each mailbox's last 7 days: sends, hard bounces, complaints, their rates and what the
    warm-up gates make of them (ok, holding-ramp, paused)."""
    from toolkit.cli.mailbox_health import read_view, render_health

    url, _source = sc.database_url()
    with sc.ledger() as ledger:
        counts = ledger.counts()
    view = read_view(url)
    inventory = sc.app.inventory
    mailboxes = view.mailboxes([m.address for m in inventory.mailboxes] if inventory is not None else [])
    if sc.app.output_format(fmt) == "json":
        emit_json({"counts": counts, "health": [view.json_of(mailbox) for mailbox in mailboxes]})
    else:
        emit_table("send ledger", ["status", "rows"], list(counts.items()))
        render_health(view, mailboxes)


@group.command("show")
@click.argument("lead")
@click.argument("step", type=click.IntRange(min=1))
@format_option()
@pass_sender
def show_command(sc: SenderContext, lead: str, step: int, fmt: str | None) -> None:
    """The row of LEAD's STEP and its history: what happened to it."""
    with sc.ledger() as ledger:
        shown = ledger.show(lead, step)
    if shown is None:
        sc.app.fail(f"no row for lead {lead!r} step {step}; check the lead id (sendhost sender status)", 1)
    data: dict[str, Any] = {"row": shown.row, "send_log": shown.send_log, "events": shown.events}
    if sc.app.output_format(fmt) == "json":
        click.echo(json.dumps(data, indent=2, default=str))
        return
    emit_table(f"{lead} step {step}", ["field", "value"], [(k, v) for k, v in shown.row.items()])
    emit_table("history", ["at", "event", "detail"], [(e["at"], e["kind"], e["detail"]) for e in shown.events])


def _duration(value: str) -> float:
    """'30m', '2h', '45s' or a number of seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = value.strip().lower()
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a duration like 30m, 2h or 90s") from None


@group.command("sweep")
@click.option("--older-than", default="30m", show_default=True, help="Settle rows left sending this long.")
@format_option()
@pass_sender
def sweep_command(sc: SenderContext, older_than: str, fmt: str | None) -> None:
    """Settle rows whose agent died: back to the queue if the attempt never started, else unconfirmed."""
    with sc.ledger() as ledger:
        requeued, unconfirmed = ledger.sweep(_duration(older_than))
    if sc.app.output_format(fmt) == "json":
        emit_json({"requeued": requeued, "unconfirmed": unconfirmed})
    else:
        click.echo(f"{requeued} requeued (attempt never started), {unconfirmed} unconfirmed (check Sent Items)")


def build_agent(sc: SenderContext, host_name: str | None, checkpoint: Callable[[str], None] | None = None,
                smtp_timeout_s: float = 30.0) -> tuple[Agent, Callable[[], Ledger]]:
    """The agent for one host of the inventory, and a factory of ledger connections for its workers."""
    from ippool import Pool
    from sender import Ledger
    from sender.errors import SenderConfigError
    from sender.sending.agent import Agent
    from sender.sending.tokens import read_key_file
    from sender.settings import AgentSettings
    from sendhost import redis_conn
    from warmup import Guard

    inventory = sc.app.require_inventory()
    if host_name is None:
        if len(inventory.hosts) != 1:
            names = ", ".join(h.name for h in inventory.hosts) or "none"
            raise SenderConfigError(f"name the host this agent sends from with --host (hosts: {names})")
        host = inventory.hosts[0]
    else:
        host = inventory.host(host_name)
    mailboxes = tuple(m for m in inventory.mailboxes if m.smtp is not None)
    settings = AgentSettings(host=host.name, primary_ip=host.primary_ip, mailboxes=mailboxes,
                             unsubscribe_base_url=inventory.unsubscribe_base_url or "", smtp_timeout_s=smtp_timeout_s)
    for mailbox in mailboxes:  # a missing secret is bad input now, not a failed send at 3 a.m.
        assert mailbox.smtp is not None
        mailbox.smtp.credential.secret(sc.app.env)
    url, source = sc.database_url()
    with Ledger.from_url(url) as ledger:
        if source == "embedded":
            ledger.migrate()
        else:
            ledger.check_schema()
        key = (read_key_file(inventory.unsubscribe_key_file) if inventory.unsubscribe_key_file
               else ledger.unsubscribe_key())
    client = sc.app.redis(socket_timeout=redis_conn.DEFAULT_SOCKET_TIMEOUT_S)
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client.set_retry(Retry(NoBackoff(), 1))  # a sick Redis must cost a send a fallback, not seconds
    agent = Agent(settings, Guard(client), Pool(client), client, unsubscribe_key=key, checkpoint=checkpoint,
                  env=sc.app.env)
    return agent, lambda: Ledger.from_url(url)


@group.command("run")
@click.option("--host", "host_name", metavar="HOST", envvar="SENDHOST_HOST",
              help="The inventory host this agent sends from (env SENDHOST_HOST, as the sender_agent role sets).")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64), help="Parallel sends.")
@click.option("--once", is_flag=True, help="Send every due row (waiting out gaps up to a minute), then exit.")
@click.option("--smtp-timeout", default=30.0, show_default=True, type=click.FloatRange(0.1, 600),
              help="Seconds to wait for each SMTP reply; the lease covers every wait of one conversation.")
@format_option()
@pass_sender
def run_command(sc: SenderContext, host_name: str | None, workers: int, once: bool, smtp_timeout: float,
                fmt: str | None) -> None:
    """Drain the ledger: claim, reserve a mailbox, lease a source IP, submit, record."""
    import signal
    import threading

    agent, ledger_factory = build_agent(sc, host_name, smtp_timeout_s=smtp_timeout)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if not once:  # the agent also reads its mailboxes' inboxes (docs/feedback.md)
        from toolkit.cli.sender_feedback import start_inbox_reader

        start_inbox_reader(sc, stop)
    reports = agent.run(ledger_factory, workers, once=once, stop=stop)
    counts: dict[str, int] = {}
    for report in reports:
        counts[report.kind] = counts.get(report.kind, 0) + 1
    if sc.app.output_format(fmt) == "json":
        emit_json({"outcomes": counts})
    else:
        click.echo(", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "nothing was due")
    unreachable = [r for r in reports if r.unreachable]
    if once and unreachable:
        sc.app.fail(f"{len(unreachable)} send(s) could not reach their submission server; first, via "
                    f"{unreachable[0].mailbox}: {unreachable[0].detail}", 1)


def agent_main() -> None:
    """The `sendhost-sender` console script: `sendhost sender run` with the same options."""
    import sys

    from toolkit.cli import main

    main(["sender", "run", *sys.argv[1:]])


# feedback commands (web, inbox) live in their own module; registered last, once everything above is defined
from toolkit.cli.sender_feedback import register as _register_feedback  # noqa: E402

_register_feedback(group)
