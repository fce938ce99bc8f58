"""`sendhost campaign status [NAME]`: each campaign's state, its leads, how their sequences ended, what became of
each step's rows and what each mailbox sent."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import click

from toolkit.cli.sender.context import SenderContext, pass_sender
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from sender.ledger.campaigns import Campaigns, CampaignStatus


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
        emit_json(found[0].as_json() if name is not None else [status.as_json() for status in found])
        return
    if not found:
        click.echo("no campaigns yet; `sendhost campaign apply FILE.yml` creates one")
    for number, status in enumerate(found):
        if number:
            click.echo()
        render_status(status)


def _status(sc: SenderContext, campaigns: Campaigns, name: str) -> CampaignStatus:
    from sender.ledger.campaigns import STEP_COLUMNS

    status = campaigns.status(name)
    if status is None:
        sc.app.fail(f"no campaign {name!r}; `sendhost campaign status` lists them, `sendhost campaign apply "
                    "FILE.yml` creates one", 2)
    spec = campaigns.spec(name)
    # every step of the file, those no lead has reached yet at 0
    steps = {number: dict.fromkeys(STEP_COLUMNS, 0) for number in range(1, len(spec.steps) + 1)} if spec else {}
    steps.update(status.steps)
    return dataclasses.replace(status, steps=dict(sorted(steps.items())))


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
