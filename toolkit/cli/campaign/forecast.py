"""`sendhost campaign forecast NAME`: day by day on the campaign's clock, what goes (first steps, follow-ups, from
which mailboxes), the limit that binds each day, and the day the last lead's last step goes if nobody answers.

The agent's own send path runs ahead on a simulated clock over a private copy of the ledger and the warm-up guard
(simulation.forecast): the ledger and Redis it reads are never written."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from toolkit.app import reads_only
from toolkit.cli.sender.context import SenderContext, pass_sender
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from simulation.forecast import Forecast

MAX_DAYS = 90


@reads_only
@click.command("forecast")
@click.argument("name")
@click.option("--days", type=int, default=30, show_default=True, metavar="N",
              help=f"How many days ahead, 1 to {MAX_DAYS}.")
@click.option("--reply-rate", type=float, default=0.0, show_default=True, metavar="R",
              help="The share of messages answered (0 to 1), each answer ending its lead's sequence.")
@format_option()
@pass_sender
def forecast_command(sc: SenderContext, name: str, days: int, reply_rate: float, fmt: str | None) -> None:
    """When campaign NAME will finish, and what limits it.

    Day by day in the campaign's time zone: the first steps and follow-ups that go and from which mailboxes, the
    limit that binds the day (the mailboxes' ramp or caps, the provider's limit, the campaign's cap, the window's
    hours, the gap between sends, or the leads: everything due went), and the day the last lead's last step goes if
    nobody answers (or R of the messages are answered). It runs the agent's own claim, warm-up guard and sequence
    rules on a private copy of the ledger and of the guard's counts today, on a simulated clock: what it reads is
    never written. The inventory's mailboxes are the ones that send."""
    if not 1 <= days <= MAX_DAYS:
        sc.app.fail(f"--days {days}: forecast 1 to {MAX_DAYS} days ahead, e.g. --days 30", 2)
    if not 0.0 <= reply_rate <= 1.0:
        sc.app.fail(f"--reply-rate {reply_rate:g}: a share from 0 to 1, e.g. --reply-rate 0.05", 2)
    found = read_forecast(sc, name, days, reply_rate)
    if isinstance(found, Unavailable):
        sc.app.fail(f"{found.why}; {found.fix}", 2)
    if sc.app.output_format(fmt) == "json":
        emit_json(found.as_json())
        return
    render_forecast(found)


@dataclass(frozen=True)
class Unavailable:
    """Why a campaign has no forecast, and what to do."""

    why: str
    fix: str


def read_forecast(sc: SenderContext, name: str, days: int, reply_rate: float = 0.0) -> Forecast | Unavailable:
    """Campaign `name`'s forecast, or why there is none (no such campaign, no mailbox to send it)."""
    from sender.ledger.campaigns import Campaigns
    from simulation.forecast import Sources, forecast

    with sc.ledger() as ledger:
        spec = Campaigns(ledger).spec(name)
    if spec is None:
        return Unavailable(f"no campaign {name!r} with a file", "`sendhost campaign status` lists them")
    inventory = sc.app.inventory
    mailboxes = tuple(m for m in inventory.mailboxes if m.smtp is not None) if inventory is not None else ()
    if not any(m.group == spec.group for m in mailboxes):
        return Unavailable(f"no mailbox of group {spec.group} with smtp settings in the inventory",
                           "pass the inventory the agents send from (--inventory or SENDHOST_INVENTORY)")
    client, why = sc.status_redis()
    try:
        return forecast(name, Sources(sc.place.url, client, why), mailboxes, now_s=time.time(), days=days,
                        reply_rate=reply_rate)
    finally:
        if client is not None:
            client.close()


def render_forecast(found: Forecast) -> None:
    from simulation.forecast.days import WORDS

    rows = [(f"{day.day:%a %Y-%m-%d}", day.first_steps, day.follow_ups, day.sends,
             ", ".join(f"{box} {n}" for box, n in sorted(day.by_mailbox.items())) or "-", WORDS[day.limit])
            for day in found.days]
    answered = f"if {found.reply_rate:.0%} of messages are answered" if found.reply_rate else "if nobody answers"
    if found.last_day is not None:
        ends = f"the last step goes on {found.last_day:%a %Y-%m-%d} {answered}"
    else:
        ends = f"not finished within {len(found.days)} days {answered}: {found.steps_left} step(s) left to send"
    click.echo(f"campaign {found.campaign} forecast from {found.start:%Y-%m-%d %H:%M} UTC, days in {found.timezone}")
    emit_table(None, ["day", "first", "follow-ups", "sends", "from", "limit"], rows, summary=ends)
    if found.guard is not None:
        click.echo(f"the guard's counts today were not read ({found.guard}): rebuilt from the ledger's sends")
