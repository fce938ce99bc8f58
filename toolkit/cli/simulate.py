"""`sendhost simulate`: run the whole toolkit on a simulated clock (embedded Redis, AWS in moto, zone files)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from sendhost.errors import ConfigError
from toolkit.app import App
from toolkit.output import emit_json, emit_table, format_option

T = TypeVar("T")

if TYPE_CHECKING:
    from simulation import SimInventory
    from simulation.fleet import FleetSection
    from simulation.summary import Summary
    from toolkit.inventory import Inventory

SCENARIOS = ("default", "pacing")
DEFAULT_SENDS_PER_DAY = 120
EXIT_HELP = "Exit 0 the simulation ran; 1 it could not finish; 2 bad input (the message names it)."


@click.command("simulate", epilog=EXIT_HELP,
               short_help="The whole toolkit on simulated days: pools, warm-up, a campaign, replies, an audit.")
@click.option("--inventory", "inventory_path", metavar="PATH",
              help="Inventory to simulate (default: sendhost --inventory, else the shipped example inventory).")
@click.option("--days", default=14, show_default=True, type=int, help="Simulated days.")
@click.option("--sends-per-day", type=int,
              help="Leads coming in each day for the simulated campaign of three steps (imported hourly while "
                   "the senders keep up; the guard decides how many messages go out). Default 120; 0 in the "
                   "pacing scenario, whose leads come as one list.")
@click.option("--scenario", type=click.Choice(SCENARIOS), default="default", show_default=True,
              help="pacing: two campaigns held to a Monday-Friday 09:00-17:00 window in each lead's time zone "
                   "(Berlin and New York leads) and a daily cap, from Wednesday 2026-10-21 across both autumn DST "
                   "changes, on the inventory's hosts and domains with mailboxes of its own (docs/simulation.md).")
@click.option("--seed", default=1, show_default=True, type=int, help="Same seed, same run.")
@click.option("--hosts", type=int, metavar="N",
              help="Run a fleet of N sender hosts: the inventory's, then hosts copying their pool policies in turn "
                   "(docs/simulation.md); the summary adds sends per host, the connections used and what bound "
                   "the run.")
@click.option("--mailboxes", type=int, metavar="M",
              help="Run M mailboxes: the inventory's, then mailboxes copying their group, time zone and start in "
                   "turn, spread over the inventory's domains (at most 250 each); adds the fleet section too.")
@click.option("--zone-dir", metavar="DIR",
              help="Zone files to audit the inventory's domains in (default: the shipped example zones when "
                   "they cover the inventory's domains, as for the example inventory; otherwise no audit).")
@click.option("--report", "report_path", metavar="FILE.html", help="Also write a self-contained HTML report.")
@format_option()
@click.pass_obj
def command(app: App, inventory_path: str | None, days: int, sends_per_day: int | None, scenario: str, seed: int,
            hosts: int | None, mailboxes: int | None, zone_dir: str | None, report_path: str | None,
            fmt: str | None) -> None:
    """Run the toolkit on simulated days: a campaign of three steps goes to the leads coming in, sender workers pick
    mailboxes through the warm-up guard and lease IPs from the pool, recipients reply, bounce and unsubscribe, a
    pool worker rotates and reaps parked EIPs, and the domains' zone files are audited.

    Needs nothing running: an embedded Redis in a temporary directory and AWS in moto, in process, with fake
    credentials (your AWS settings are hidden from it). Everything is removed at the end.
    """
    from simulation import SimConfig, run_simulation
    from simulation.dns_check import example_zone_dir
    from simulation.fleet import FleetSize, scale_inventory
    from simulation.report_html import render_report
    from simulation.summary import summarize
    from toolkit.inventory import load_inventory

    chosen = inventory_path or app.inventory_flag
    path = Path(chosen) if chosen else example_inventory()
    if not path.is_file():
        raise ConfigError(f"inventory {path}: no such file; pass --inventory PATH (or leave it out to simulate "
                          f"the example inventory)")
    inventory = to_sim_inventory(load_inventory(path))
    zones = Path(zone_dir) if zone_dir else _shipped_zones_for(inventory, example_zone_dir())
    report = Path(report_path) if report_path else None
    if report is not None and not report.parent.is_dir():
        raise ConfigError(f"--report {report}: directory {report.parent} does not exist")
    if scenario == "pacing":
        from simulation.pacing import pacing_config, pacing_inventory

        inventory = pacing_inventory(inventory)
        config = pacing_config(seed=seed, days=days, sends_per_day=sends_per_day or 0, zone_dir=zones)
    else:
        config = SimConfig(days=days, seed=seed, zone_dir=zones,
                           sends_per_day=DEFAULT_SENDS_PER_DAY if sends_per_day is None else sends_per_day)
    if hosts is not None or mailboxes is not None:
        inventory = scale_inventory(inventory, FleetSize(hosts, mailboxes))
        config = replace(config, measure_connections=True)
    config.check()
    with _terminated_cleanly(), _world_logs_quiet(app.verbose), _progress(config.days) as progress:
        result = run_simulation(inventory, config, progress)
    summary = summarize(result)
    if report is not None:
        _write_atomically(report, render_report(result, summary))
    if app.output_format(fmt) == "json":
        emit_json(summary.to_json())
    else:
        _render_tables(summary, zones)
    if report is not None:
        click.echo(f"report: {report}", err=True)


def example_inventory() -> Path:
    """The example inventory shipped with the package (a copy of the repository's inventory.example.yml)."""
    return Path(str(resources.files("simulation") / "data" / "inventory.example.yml"))


def to_sim_inventory(inventory: Inventory) -> SimInventory:
    """The simulation's view of a validated inventory."""
    from simulation import SimInventory

    region = inventory.hosts[0].region if inventory.hosts else "us-east-1"
    return SimInventory(inventory.hosts, inventory.mailboxes, inventory.domains, region)


def _shipped_zones_for(inventory: SimInventory, shipped: Path) -> Path | None:
    """The shipped example zones when they cover every domain of the inventory (the example's), else None."""
    names = {path.name.removesuffix(".zone") for path in shipped.glob("*.zone")}
    wanted = {domain.name.lower().rstrip(".") for domain in inventory.domains}
    return shipped if wanted and wanted <= names else None


@contextmanager
def _progress(days: int) -> Iterator[Callable[[float], None] | None]:
    """A progress bar on a terminal; nothing in a pipe."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("simulating {task.fields[days]} days"), BarColumn(),
                  TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(), console=Console(stderr=True),
                  transient=True) as bar:
        task = bar.add_task("simulate", total=1.0, days=days)
        yield lambda done: bar.update(task, completed=done)


@contextmanager
def _terminated_cleanly() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C: the sandbox's Redis is stopped and its directory removed, no report is
    written, and the exit status says which signal ended the run (143)."""
    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _world_logs_quiet(verbose: int) -> Iterator[None]:
    """The simulated pool's own warnings (a fallback lease, a failed rotation) are outcomes of the run, counted
    and explained in the summary; on stderr they would look like a problem with this command. -v shows them."""
    if verbose:
        yield
        return
    loggers = [logging.getLogger(name) for name in ("ippool", "warmup", "sendhost.warmup")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _write_atomically(path: Path, text: str) -> None:
    """Write the whole file or nothing: a temporary file beside it, renamed into place."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes it 0600; a report is an ordinary file
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _render_tables(summary: Summary, zones: Path | None) -> None:
    fallbacks = sum(summary.fallbacks.values())
    reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(summary.fallbacks.items()))
    attempts = sum(summary.rotation_outcomes.values())
    outcomes = ", ".join(f"{code} {count}" for code, count in summary.rotation_outcomes.items())
    refused = ", ".join(f"{code} {count}" for code, count in summary.redraw_reasons.items())
    skipped = ", ".join(f"{code} {count}" for code, count in summary.skips.items())
    fresh = "-" if summary.fresh_share is None else f"{summary.fresh_share:.0%} of {summary.rotations} new addresses"
    findings = summary.findings
    imported = sum(line.leads for line in summary.campaigns)
    rows = [
        ("sends", f"{summary.sends} ({summary.sends / summary.days:.0f}/day)"),
        ("what bound the run", summary.bound.text() if summary.bound is not None else "-"),
        ("leads", _leads_text(summary, imported)),
        ("recipients' answers", f"{summary.reactions_text()} (all but away end the lead's sequence)"),
        ("out-of-office leads", summary.away_text()),
        ("fallbacks to the primary IP", f"{fallbacks}" + (f" ({reasons})" if reasons else "")),
        ("attempts that reserved nothing", f"{sum(summary.skips.values())}" + (f" ({skipped})" if skipped else "")),
        ("rotations", f"{summary.rotations} ({summary.retired_by_command} retired by on-call)"),
        ("rotation attempts", f"{attempts}" + (f" ({outcomes})" if outcomes else "")),
        ("fresh-IP share", fresh),
        ("redraws", f"{summary.redraws} (AWS handed back a recently released address {summary.aws_handed_back} times)"
                    + (f"; refused as {refused}" if refused else "")),
        ("max sends on one address", f"{summary.max_sends_on_address} (budget "
                                     f"{summary.budget_range[0]}..{summary.budget_range[1]})"),
        ("fewest sends before retiring", "-" if summary.min_sends_at_retirement is None
         else str(summary.min_sends_at_retirement)),
        ("parked EIP-hours", f"{summary.parked_eip_hours:.1f} h = ${summary.parked_cost_usd:.2f} at $0.005/h"),
        ("most EIPs parked at once", str(summary.max_parked)),
        ("audit findings", "no audit (pass --zone-dir)" if zones is None else
         f"{findings['error']} error, {findings['warning']} warning, {findings['info']} info"),
    ]
    if summary.worker_errors:
        rows.append(("pool worker errors", f"{len(summary.worker_errors)}, first: {summary.worker_errors[0]}"))
    days = f"{summary.days} day{'s' if summary.days != 1 else ''}"
    emit_table(f"sendhost simulate: {days} from {summary.start}, seed {summary.seed}",
               ["measure", "value"], rows)
    if summary.promises:
        emit_table("the README's promises in this run", ["promise", "held", "figures"],
                   [(p.promise, "yes" if p.held else "NO", p.figures) for p in summary.promises])
    if summary.fleet is not None:
        _render_fleet(summary.fleet, summary.bound.text() if summary.bound is not None else "-")
    meanings = summary.outcomes()
    if meanings:
        emit_table("what the counts mean", ["outcome", "count", "meaning"], meanings)
    lines, more = _busiest(summary.mailboxes, lambda m: m.sends)
    mailbox_rows: list[Sequence[object]] = [
        (m.address, m.start, m.sends, m.capacity,
         f"{m.busiest_day[5:]} {m.busiest_sends}/{m.busiest_cap}" if m.busiest_day else "-", m.days_at_cap,
         m.days_over_cap) for m in lines]
    emit_table("mailboxes, by their own local days (the first and last may be partial)",
               ["mailbox", "start", "sends", "sum of caps", "busiest day", "days at cap", "over cap"],
               mailbox_rows + more.rows(7, 2), summary=more.hint("mailboxes"))
    _render_campaigns(summary)
    _render_deliveries(summary)
    found = [(d["domain"], f["severity"], f["code"], f["location"] or "-")
             for d in summary.domains for f in d["findings"]]
    if found:
        emit_table("DNS audit of the zone files", ["domain", "severity", "code", "where"], found,
                   summary=f"details: sendhost dns audit --zone-dir {zones} --inventory PATH")


def _render_fleet(fleet: FleetSection, bound: str) -> None:
    """What bound the fleet's run, sends per host folded (min, median, max, the busiest), and the connections the
    embedded services saw."""
    use = fleet.connections
    median = f"{fleet.sends_median:g}"
    emit_table(f"fleet: {fleet.hosts} hosts, {fleet.slots} slots, {fleet.mailboxes} mailboxes, {fleet.workers} "
               f"sender workers", ["measure", "value"], [
                   ("what bound it", bound),
                   ("sends per host", f"min {fleet.sends_min}, median {median}, max {fleet.sends_max} "
                                      f"({fleet.sends} over {fleet.hosts} hosts)"),
                   ("busiest hosts", ", ".join(f"{host} {sends}" for host, sends in fleet.top)),
                   ("hosts that sent nothing", str(fleet.idle_hosts)),
                   ("PostgreSQL connections", f"peak {use.postgres_peak} client backends in pg_stat_activity "
                                              f"(max_connections {use.postgres_max}), over {use.samples} samples"),
                   ("Redis connections", f"peak {use.redis_peak} connected clients in INFO clients (maxclients "
                                         f"{use.redis_max}), over {use.samples} samples"),
                   ("longest claim to send", f"{use.claim_wait_max_s:.0f} s (a row claimed ahead waits for its "
                                             f"worker)"),
               ], summary="every host's sends: --format json (fleet.sends_per_host.per_host)")


def _leads_text(summary: Summary, imported: int) -> str:
    campaigns = "campaigns" if len(summary.campaigns) > 1 else "campaign"
    if summary.sends_per_day == 0 and imported:  # the pacing scenario: each campaign's list, imported as it started
        return f"{imported} imported into the {campaigns}, as a list when each started (none came in after)"
    return (f"{imported} imported into the {campaigns}, {summary.leads_turned_away} turned away: they arrived beyond "
            f"what bound the run ({summary.sends_per_day}/day came in)")


def _render_campaigns(summary: Summary) -> None:
    """Per step of each campaign, and how its sequences ended (`campaign status`, read from the ledger)."""
    for line in summary.campaigns:
        emit_table(f"campaign {line.name} (group {line.group}): {line.leads} leads, each step at the end of the run",
                   ["step", "delay", "subject", "sent", "replied", "bounced", "unsubscribed", "clicked",
                    "scanner clicks", "failed", "cancelled", "queued", "waiting",
                    "after the step before (min, median)"],
                   [(step.step, step.delay, step.subject or "(reply in the thread)", step.sent, step.replied,
                     step.bounced, step.unsubscribed, step.clicked, step.scanned, step.failed, step.cancelled,
                     step.queued, step.waiting, _gap(step.min_after_previous_s, step.median_after_previous_s))
                    for step in line.steps])
    if summary.campaigns:
        emit_table("how the sequences ended", ["campaign", "end", "leads"],
                   [(line.name, reason, count) for line in summary.campaigns
                    for reason, count in [*line.ended.items(), ("still going", line.going)]])


def _gap(shortest_s: float | None, median_s: float | None) -> str:
    if shortest_s is None or median_s is None:
        return "-"
    return f"{shortest_s / 86_400:.2f} d, {median_s / 86_400:.2f} d"


def _render_deliveries(summary: Summary) -> None:
    """What the submission server accepted: per mailbox (its AUTH login) and per source address (the peer)."""
    found = summary.deliveries
    if found is None:
        return
    mailboxes, more = _busiest(list(found.per_mailbox.items()), lambda item: item[1])
    rows: list[Sequence[object]] = [*mailboxes, *more.rows(2, 1)]
    emit_table(f"delivered per mailbox ({found.total})", ["mailbox", "delivered"], rows,
               summary=more.hint("deliveries.per_mailbox"))
    sources, more = _busiest(found.per_source, lambda line: line.deliveries)
    rows = [(line.loopback, line.host, "primary" if line.slot is None else line.slot, line.public_ip or "-",
             line.deliveries, "-" if line.budget is None else line.budget) for line in sources]
    emit_table("delivered per source address (the peer the server saw)",
               ["source", "host", "slot", "stands for", "delivered", "budget"],
               rows + more.rows(6, 4),
               summary=more.hint("deliveries.per_source"))

# A table of more rows than this (a fleet's mailboxes, a run's source addresses) shows its busiest FOLDED_TO and
# one row for the rest; --format json has every row.
FOLD_OVER, FOLDED_TO = 20, 10


@dataclass(frozen=True)
class _Folded:
    """What a table left out of its rows (none: nothing)."""

    shown: int
    total: int
    rest_sum: int = 0  # the counts of the rows left out

    def rows(self, width: int, column: int) -> list[Sequence[object]]:
        """The row standing for the rest (a table `width` columns wide): how many, and their counts' sum in
        `column`."""
        if self.shown == self.total:
            return []
        cells = [""] * width
        cells[0], cells[column] = f"… {self.total - self.shown} more", str(self.rest_sum)
        return [tuple(cells)]

    def hint(self, key: str) -> str | None:
        if self.shown == self.total:
            return None
        return f"the {self.shown} busiest of {self.total} shown; every row: --format json ({key})"


def _busiest(lines: list[T], count: Callable[[T], int]) -> tuple[list[T], _Folded]:
    """`lines` as they are when few, else the FOLDED_TO with the highest `count`, busiest first (ties in their
    order)."""
    if len(lines) <= FOLD_OVER:
        return lines, _Folded(len(lines), len(lines))
    ranked = sorted(lines, key=lambda line: -count(line))
    return ranked[:FOLDED_TO], _Folded(FOLDED_TO, len(lines), sum(count(line) for line in ranked[FOLDED_TO:]))
