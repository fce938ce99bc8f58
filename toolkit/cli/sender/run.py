"""`sendhost sender run`: the agent."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from toolkit.cli.sender.context import SenderContext, pass_sender
from toolkit.output import emit_json, format_option

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from sender import Ledger
    from sender.ledger.waits import Waits
    from sender.sending.agent import Agent, Report
    from sendhost.model import Mailbox


LOG_LEVELS = ("debug", "info", "warning", "error")


class InventoryMailboxes:
    """The inventory's mailboxes as its file is now, for the agent's cycles: parsed again only when the file's bytes
    changed (a fingerprint), so a cycle costs one read. ConfigError when it is unreadable or does not parse."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fingerprint: str | None = None
        self._mailboxes: tuple[Mailbox, ...] = ()

    def __call__(self) -> tuple[Mailbox, ...]:
        from toolkit.inventory import load_inventory

        fingerprint = self._digest()
        if fingerprint != self._fingerprint:
            self._mailboxes = load_inventory(self.path).mailboxes
            self._fingerprint = fingerprint
        return self._mailboxes

    def _digest(self) -> str:
        import hashlib

        from sendhost.errors import ConfigError

        try:
            return hashlib.sha256(self.path.read_bytes()).hexdigest()
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read the inventory: {exc.strerror}") from None


def build_agent(sc: SenderContext, host_name: str | None, checkpoint: Callable[[str], None] | None = None,
                smtp_timeout_s: float = 30.0) -> tuple[Agent, Callable[[], Ledger]]:
    """The agent for one host of the inventory, and a factory of ledger connections for its workers."""
    from sender.assembly import build_agent as assemble
    from sender.errors import SenderConfigError
    from sender.postmaster.sync import sending_domains
    from sender.settings import AgentSettings

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
    app = sc.app
    app.check_redis()  # a wrong password is exit 2 now, not every row `blocked` by an "unavailable" guard
    postmaster = inventory.postmaster
    # once a day, this host's own domains (or the ones sendhost_postmaster names) from Postmaster Tools
    domains = sending_domains(postmaster.domains, (), [m.domain for m in mailboxes]) if postmaster else []
    return assemble(settings, sc.place, redis_url=app.config.redis_url.value, state_dir=app.state_dir,
                    unsubscribe_key_file=inventory.unsubscribe_key_file, env=app.env, checkpoint=checkpoint,
                    mailbox_settings=InventoryMailboxes(inventory.path), postmaster=postmaster,
                    postmaster_domains=domains)


@click.command("run")
@click.option("--host", "host_name", metavar="HOST", envvar="SENDHOST_HOST",
              help="The inventory host this agent sends from (env SENDHOST_HOST, as the sender_agent role sets).")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64), help="Parallel sends.")
@click.option("--once", is_flag=True, help="Send every due row (waiting out gaps up to a minute), then exit.")
@click.option("--smtp-timeout", default=30.0, show_default=True, type=click.FloatRange(0.1, 600),
              help="Seconds to wait for each SMTP reply; the lease covers every wait of one conversation.")
@click.option("--quiet", "-q", is_flag=True,
              help="Warnings and errors only: no line per send, put-back or idle minute.")
@click.option("--log-level", type=click.Choice(LOG_LEVELS), envvar="SENDHOST_LOG_LEVEL",
              help="The level of sendhost's own loggers on stderr (env SENDHOST_LOG_LEVEL); default: info for the "
                   "agent's line per send, put-back and idle minute, warning for the rest (-v: info, -vv: debug).")
@format_option()
@pass_sender
def run_command(sc: SenderContext, host_name: str | None, workers: int, once: bool, smtp_timeout: float,
                quiet: bool, log_level: str | None, fmt: str | None) -> None:
    """Drain the ledger: claim, reserve a mailbox, lease a source IP, submit, record.

    On stderr (the journal under systemd), at the default level: a line per send (row, lead, step, mailbox, source
    IP, the server's reply), per row put back (why, until when) and a summary per idle minute."""
    import signal
    import threading

    from sender.sending.activity import Activity

    _set_log_level(sc, quiet, log_level)
    agent, ledger_factory = build_agent(sc, host_name, smtp_timeout_s=smtp_timeout)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if not once:  # the agent also reads its mailboxes' inboxes (docs/feedback.md)
        from toolkit.cli.sender.feedback import start_inbox_reader

        start_inbox_reader(sc, stop)
    reports = agent.run(ledger_factory, workers, once=once, stop=stop, activity=Activity())
    counts: dict[str, int] = {}
    for report in reports:
        counts[report.kind] = counts.get(report.kind, 0) + 1
    waits = _waits_left(sc) if once else {}
    if sc.app.output_format(fmt) == "json":
        emit_json({"outcomes": counts, **({"waits": {n: w.as_json() for n, w in waits.items()}} if once else {})})
    else:
        from toolkit.cli.campaign.report import render_every_waits

        click.echo(", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "nothing was due")
        render_every_waits(waits)  # what `blocked` (and every row left) waits for, and until when
    stuck = [r for r in reports if r.unreachable or r.login_failed]
    if once and stuck:
        what = ("could not reach their submission server" if all(r.unreachable for r in stuck)
                else "could not reach or log in to their submission server")
        sc.app.fail(f"{len(stuck)} send(s) {what}; first, via {stuck[0].mailbox}: {stuck[0].detail}"
                    f"{_source_hint(sc, agent, stuck[0])}", 1)


def _set_log_level(sc: SenderContext, quiet: bool, level: str | None) -> None:
    """The agent's activity lines at INFO unless --quiet; --log-level sets every sendhost logger (as -v does)."""
    import logging

    from sender.sending.activity import log as activity_log
    from toolkit.logging_setup import OWN_LOGGERS

    if level is not None:
        for name in OWN_LOGGERS:
            logging.getLogger(name).setLevel(level.upper())
        activity_log.setLevel(level.upper())
        return
    if quiet:
        activity_log.setLevel(logging.WARNING)
    elif not sc.app.verbose:
        activity_log.setLevel(logging.INFO)
    else:
        activity_log.setLevel(logging.NOTSET)  # as -v / -vv set sendhost's loggers


def _waits_left(sc: SenderContext) -> dict[str, Waits]:
    """After `--once`: each campaign's rows not sent, by the one reason each waits for (as `sender status`)."""
    from toolkit.cli.campaign.report import every_waits

    guard, unreachable = sc.status_guard()
    try:
        with sc.ledger() as ledger:
            return every_waits(sc, ledger, guard, unreachable)
    finally:
        if guard is not None:
            guard.close()


def _source_hint(sc: SenderContext, agent: Agent, report: Report) -> str:
    """Where a source address this machine does not have came from, and the fix; "" for any other failure."""
    from sender.sending.submission import NOT_A_LOCAL_ADDRESS

    if NOT_A_LOCAL_ADDRESS not in report.detail:
        return ""
    host = agent.settings.host
    inventory = sc.app.require_inventory()
    if report.source_ip == agent.settings.primary_ip:
        where = f"{host}'s sendhost_primary_ip in {inventory.path}"
    else:
        where = f"an address of {host}'s pool in Redis (`sendhost pool status {host}`)"
    return (f"; {report.source_ip} is {where}: run the agent on {host} itself, or to try it on this machine set "
            f"--host to a host whose addresses this machine has (sendhost_primary_ip: 127.0.0.1 for a local try)")
