"""`sendhost campaign status [NAME]`: each campaign's state, its leads, how their sequences ended, what became of
each step's rows and what each mailbox sent; and its pace now: what is due, what waits for the window, for the
campaign's cap or a mailbox's, each mailbox's day against its cap, and the follow-ups stalled behind a paused or
disconnected mailbox (from the warm-up guard in Redis)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import click

from toolkit.app import reads_only
from toolkit.cli.campaign.forecast import Unavailable, read_forecast
from toolkit.cli.sender.context import SenderContext, pass_sender
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from sender.ledger.campaigns import Campaigns, CampaignStatus
    from sender.ledger.cap_wait import CapWait
    from sender.ledger.stalled import Stalled
    from sender.ledger.store import Ledger
    from sender.ledger.waits import Waits
    from sender.ledger.window_wait import WindowWait
    from simulation.forecast import ForecastDay
    from warmup import Guard


@reads_only
@click.command("status")
@click.argument("name", required=False)
@click.option("--forecast/--no-forecast", "with_forecast", default=True, show_default=True,
              help="With NAME: today's line of `campaign forecast` (a few seconds: the send path run ahead).")
@format_option()
@pass_sender
def status_command(sc: SenderContext, name: str | None, with_forecast: bool, fmt: str | None) -> None:
    """What became of campaign NAME, or of every campaign.

    Its state, group and leads, the sequences ended by reason, per step what became of its rows, per mailbox its
    sends and the follow-ups waiting for it; its pace now: the rows due, those waiting for the sending window (and
    when it opens), for the campaign's daily cap or a mailbox's cap, each mailbox's sends today against its cap,
    and the due follow-ups stalled behind a paused or disconnected mailbox, since when and what to do (read from
    the warm-up guard: "couldn't look" when Redis cannot be reached). For NAME, running, today's line of its
    forecast: what more goes today and the limit that binds (`sendhost campaign forecast`). JSON: one object for
    NAME, a list without."""
    from sender.ledger.campaigns import Campaigns

    guard, unreachable = sc.status_guard()
    try:
        with sc.ledger() as ledger:
            campaigns = Campaigns(ledger)
            names = [name] if name is not None else campaigns.names()
            found = [_status(sc, campaigns, each, guard, unreachable) for each in names]
    finally:
        if guard is not None:
            guard.close()
    if name is not None and with_forecast and found[0].status.state.value == "running":
        found[0] = dataclasses.replace(found[0], today=_today(sc, name))
    if sc.app.output_format(fmt) == "json":
        emit_json(found[0].as_json() if name is not None else [shown.as_json() for shown in found])
        return
    if not found:
        click.echo("no campaigns yet; `sendhost campaign apply FILE.yml` creates one")
    for number, shown in enumerate(found):
        if number:
            click.echo()
        render_status(shown.status)
        stopped = shown.status.state.value == "stopped"
        if not stopped:  # a stopped campaign sends nothing more: no window, no pace
            render_window(shown.status.name, shown.window)
        if shown.pace is not None:
            render_waits(shown.status.name, shown.pace)
            if not stopped:
                render_pace(shown.status.name, shown.pace)
        render_stalled(shown.stalled)
        if shown.today is not None:
            render_today(shown.status.name, shown.today)


@dataclasses.dataclass(frozen=True)
class Shown:
    """A campaign's status, what of it waits for its sending window (None: it has no window), its pace (None: no
    campaign file to read it from) and its follow-ups stalled behind a paused mailbox (None: the guard unread)."""

    status: CampaignStatus
    window: WindowWait | None
    pace: CapWait | None = None
    stalled: tuple[Stalled, ...] | None = None
    today: ForecastDay | Unavailable | None = None  # today's line of its forecast, or why none; None: not asked

    def as_json(self) -> dict[str, Any]:
        today = None if self.today is None else (
            {"unavailable": self.today.why} if isinstance(self.today, Unavailable) else self.today.as_json())
        return {**self.status.as_json(), "window": self.window.as_json() if self.window else None,
                "pace": self.pace.as_json() if self.pace else None,
                "waits": self.pace.waits.as_json() if self.pace and self.pace.waits else None,
                "stalled": None if self.stalled is None else [s.as_json() for s in self.stalled],
                "forecast_today": today}


def _status(sc: SenderContext, campaigns: Campaigns, name: str, guard: Guard | None,
            unreachable: str | None) -> Shown:
    from sender.assembly import campaign_pace
    from sender.ledger.campaigns import STEP_COLUMNS
    from sender.ledger.window_wait import window_wait

    status = campaigns.status(name)
    if status is None:
        sc.app.fail(f"no campaign {name!r}; `sendhost campaign status` lists them, `sendhost campaign apply "
                    "FILE.yml` creates one", 2)
    spec = campaigns.spec(name)
    # every step of the file, those no lead has reached yet at 0
    steps = {number: dict.fromkeys(STEP_COLUMNS, 0) for number in range(1, len(spec.steps) + 1)} if spec else {}
    steps.update(status.steps)
    wait = pace = None
    if spec is not None:
        group = sc.group_mailboxes(spec.group)
        pinned = [box for box, counts in status.mailboxes.items() if counts["waiting"]]
        pace = campaign_pace(campaigns.ledger, spec, guard, group, pinned, unreachable, status.state.value)
        wait = window_wait(campaigns.ledger, spec, pace.waits)
    return Shown(dataclasses.replace(status, steps=dict(sorted(steps.items()))), wait, pace,
                 read_stalled(campaigns.ledger, guard, name))


def _today(sc: SenderContext, name: str) -> ForecastDay | Unavailable:
    """Today's line of campaign `name`'s forecast, or why there is none."""
    found = read_forecast(sc, name, days=1)
    return found if isinstance(found, Unavailable) else found.days[0]


def render_today(name: str, today: ForecastDay | Unavailable) -> None:
    """Two lines at most as wide as a terminal's 100 columns (a campaign name of 30)."""
    from simulation.forecast.days import WORDS

    if isinstance(today, Unavailable):
        click.echo(f"{name}: no forecast: {today.why}")
        return
    click.echo(f"{name}: forecast today: {today.sends} more go ({today.first_steps} first steps, "
               f"{today.follow_ups} follow-ups)")
    click.echo(f"{name}: bound by {WORDS[today.limit]}; `sendhost campaign forecast {name}`: the days ahead")


def read_stalled(ledger: Ledger, guard: Guard | None, campaign: str | None = None) -> tuple[Stalled, ...] | None:
    """The due follow-ups of `campaign` (None: all) stalled behind a paused or disconnected mailbox; None when the
    guard cannot be read."""
    from sender.assembly import stalled_followups
    from warmup.errors import WarmupUnavailable

    if guard is None:
        return None
    try:
        return tuple(stalled_followups(ledger, guard, campaign))
    except WarmupUnavailable:
        return None


def render_stalled(stalled: tuple[Stalled, ...] | None) -> None:
    """One line per (campaign, mailbox) stalled, with what to do; nothing when none is (or the guard is unread:
    the pace's lines say so)."""
    for each in stalled or ():
        click.echo(f"{each.campaign}: {each.rows} follow-up(s) due since {each.due_since.isoformat(timespec='seconds')}"
                   f" wait for {each.mailbox}, {each.state} ({each.reason}): {each.advice()}")


def render_status(status: CampaignStatus) -> None:
    from sender.ledger.campaigns import STEP_COLUMNS

    ended = ", ".join(f"{reason} {n}" for reason, n in status.ended.items()) or "none"
    click.echo(f"campaign {status.name}: {status.state.value}, group {status.group or '-'}, {status.leads} "
               f"lead(s); sequences ended: {ended}")
    emit_table(f"{status.name}: steps", ["step", *STEP_COLUMNS],
               [(step, *(columns[c] for c in STEP_COLUMNS)) for step, columns in status.steps.items()])
    render_worked(status)
    if status.mailboxes:
        emit_table(f"{status.name}: mailboxes", ["mailbox", "sent", "waiting follow-ups"],
                   [(box, n["sent"], n["waiting"]) for box, n in status.mailboxes.items()])
    else:
        click.echo(f"{status.name}: no mailbox has sent for it yet")


def render_worked(status: CampaignStatus) -> None:
    """What worked per step and mailbox: each count with its rate over the rows sent (docs/tracking.md)."""
    from sender.ledger.campaigns import WORKED_COLUMNS

    if not status.worked:
        return
    columns = [c for c in WORKED_COLUMNS if status.opens or c != "opened"]
    headers = ["step", "mailbox", "sent", *("opened (estimate)" if c == "opened" else c for c in columns)]
    emit_table(f"{status.name}: what worked (rates over sent)", headers,
               [(w.step, w.mailbox, w.sent, *(f"{w.counts[c]} ({w.rate(c):.1%})" for c in columns))
                for w in status.worked])


def render_window(name: str, wait: WindowWait | None) -> None:
    if wait is None:
        click.echo(f"{name}: no sending window (any day, any hour)")
        return
    if wait.closes is not None:
        click.echo(f"{name}: window open now until {wait.closes.isoformat(timespec='minutes')}")
        return
    opens = wait.opens.isoformat(timespec="minutes") if wait.opens else "never"
    click.echo(f"{name}: window closed now; it next opens {opens}")


def every_waits(sc: SenderContext, ledger: Ledger, guard: Guard | None,
                unreachable: str | None) -> dict[str, Waits]:
    """Each campaign's rows not sent yet (those of `sender enqueue` as `enqueue`), each in one reason; a campaign
    with none is left out. For `sender status` and `sender run --once`."""
    from sender.assembly import campaign_pace, enqueue_waits
    from sender.ledger.campaigns import Campaigns

    campaigns = Campaigns(ledger)
    found: dict[str, Waits] = {}
    for name in campaigns.names():
        head = ledger.fetch_one("campaign_head", {"name": name}, f"status of {name}")
        spec = campaigns.spec(name)
        if head is None or spec is None:
            continue
        pace = campaign_pace(ledger, spec, guard, sc.group_mailboxes(spec.group), (), unreachable, str(head[0]))
        if pace.waits is not None and pace.waits.rows:
            found[name] = pace.waits
    inventory = sc.app.inventory
    groups: dict[str, list[str]] = {}
    for mailbox in inventory.mailboxes if inventory is not None else ():
        groups.setdefault(mailbox.group, []).append(mailbox.address.lower())
    enqueued = enqueue_waits(ledger, guard, groups, unreachable)
    if enqueued.rows:
        found["enqueue"] = enqueued
    return found


def render_every_waits(found: dict[str, Waits]) -> None:
    for name, waits in found.items():
        render_waits(name, waits)


def render_waits(name: str, waits: Waits | CapWait | None) -> None:
    """Every row not sent yet, in the one line of the reason it waits for (sender.ledger.waits)."""
    from sender.ledger.cap_wait import CapWait
    from sender.ledger.waits import describe

    if isinstance(waits, CapWait):
        waits = waits.waits
    if waits is None:
        return
    known = "" if waits.unknown is None else f" (the mailboxes' part unknown: couldn't look, {waits.unknown})"
    click.echo(f"{name}: {waits.rows} row(s) not sent yet{known}" + (":" if waits.rows else ""))
    for line in waits.lines:
        click.echo(f"  {describe(line, waits, name)}")


def render_pace(name: str, pace: CapWait) -> None:
    from sender.ledger.cap_wait import NOT_GUARDED

    if pace.unknown is not None:
        click.echo(f"{name}: what waits for a cap is unknown: couldn't look ({pace.unknown})")
        return
    if pace.daily_cap is None:
        click.echo(f"{name}: campaign day {pace.day}: {pace.sent_today} reserved (no daily cap)")
    else:
        click.echo(f"{name}: campaign day {pace.day}: {pace.sent_today} of {pace.daily_cap} reserved (the day ends "
                   f"{pace.day_ends.isoformat(timespec='seconds')})")
    if pace.mailboxes:
        share = f"{name} today" + (f" (max {pace.per_mailbox_cap})" if pace.per_mailbox_cap else "")
        emit_table(f"{name}: mailboxes today", ["mailbox", "day", "sent", "reserved", "cap", "state", share],
                   [(m.address, m.day, m.sent, m.reserved, m.cap,
                     "not under the guard yet" if m.state == NOT_GUARDED else m.state, m.campaign)
                    for m in pace.mailboxes])
