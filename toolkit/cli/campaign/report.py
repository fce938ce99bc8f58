"""`sendhost campaign status [NAME]`: each campaign's state, its leads, how their sequences ended, what became of
each step's rows and what each mailbox sent."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import click

from toolkit.cli.sender.context import SenderContext, pass_sender
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from sender.ledger.campaigns import Campaigns, CampaignStatus
    from sender.ledger.window_wait import WindowWait


@click.command("status")
@click.argument("name", required=False)
@format_option()
@pass_sender
def status_command(sc: SenderContext, name: str | None, fmt: str | None) -> None:
    """What became of campaign NAME, or of every campaign.

    Its state, group and leads, the sequences ended by reason, per step what became of its rows, per mailbox its
    sends and the follow-ups waiting for it. JSON: one object for NAME, a list without."""
    from sender.ledger.campaigns import Campaigns

    with sc.ledger() as ledger:
        campaigns = Campaigns(ledger)
        names = [name] if name is not None else campaigns.names()
        found = [_status(sc, campaigns, each) for each in names]
    if sc.app.output_format(fmt) == "json":
        emit_json(found[0].as_json() if name is not None else [shown.as_json() for shown in found])
        return
    if not found:
        click.echo("no campaigns yet; `sendhost campaign apply FILE.yml` creates one")
    for number, shown in enumerate(found):
        if number:
            click.echo()
        render_status(shown.status)
        render_window(shown.status.name, shown.window)


@dataclasses.dataclass(frozen=True)
class Shown:
    """A campaign's status and what of it waits for its sending window (None: it has no window)."""

    status: CampaignStatus
    window: WindowWait | None

    def as_json(self) -> dict[str, Any]:
        return {**self.status.as_json(), "window": self.window.as_json() if self.window else None}


def _status(sc: SenderContext, campaigns: Campaigns, name: str) -> Shown:
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
    wait = window_wait(campaigns.ledger, spec) if spec else None
    return Shown(dataclasses.replace(status, steps=dict(sorted(steps.items()))), wait)


def render_status(status: CampaignStatus) -> None:
    from sender.ledger.campaigns import STEP_COLUMNS

    ended = ", ".join(f"{reason} {n}" for reason, n in status.ended.items()) or "none"
    click.echo(f"campaign {status.name}: {status.state.value}, group {status.group or '-'}, {status.leads} "
               f"lead(s); sequences ended: {ended}")
    emit_table(f"{status.name}: steps", ["step", *STEP_COLUMNS],
               [(step, *(columns[c] for c in STEP_COLUMNS)) for step, columns in status.steps.items()])
    if status.mailboxes:
        emit_table(f"{status.name}: mailboxes", ["mailbox", "sent", "waiting follow-ups"],
                   [(box, n["sent"], n["waiting"]) for box, n in status.mailboxes.items()])
    else:
        click.echo(f"{status.name}: no mailbox has sent for it yet")


def render_window(name: str, wait: WindowWait | None) -> None:
    if wait is None:
        click.echo(f"{name}: no sending window (any day, any hour)")
        return
    opens = wait.opens.isoformat() if wait.opens else "never"
    click.echo(f"{name}: {wait.rows} row(s) due wait for the sending window, which next opens {opens}")
