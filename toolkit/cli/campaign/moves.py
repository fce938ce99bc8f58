"""`sendhost campaign start|pause|resume|stop|reassign`: a campaign's run. Which move each state allows is the
database's rule (sender_campaign_move); a refused move is its one-line message, exit 2."""

from __future__ import annotations

import click

from toolkit.cli.sender.context import SenderContext, pass_sender
from toolkit.output import emit_json, format_option

# move -> its help; the names are sender.ledger.campaigns.Move's values (imported late: `--help` stays fast)
MOVES = {
    "start": "Start campaign NAME.\n\ndraft -> running: its leads' first steps become due.",
    "pause": "Pause campaign NAME.\n\nrunning -> paused: nothing of it is claimed until `resume`; what an agent "
             "holds already finishes.",
    "resume": "Resume campaign NAME.\n\npaused -> running: what waited for it is due again.",
    "stop": "Stop campaign NAME for good.\n\nEvery sequence still going ends as `stopped`, its steps not sent are "
            "cancelled, and it takes no more leads.",
}


def _move_command(move: str, help_text: str) -> click.Command:
    @click.command(move, help=help_text)
    @click.argument("name")
    @format_option()
    @pass_sender
    def command(sc: SenderContext, name: str, fmt: str | None) -> None:
        from sender.ledger.campaigns import Campaigns, Move

        with sc.ledger() as ledger:
            state = Campaigns(ledger).move(name, Move(move))
        if sc.app.output_format(fmt) == "json":
            emit_json({"campaign": name, "state": state.value})
        else:
            click.echo(f"campaign {name}: {state.value}")

    return command


MOVE_COMMANDS = tuple(_move_command(move, help_text) for move, help_text in MOVES.items())


@click.command("reassign")
@click.argument("name")
@click.option("--from", "from_box", required=True, metavar="BOX", help="The mailbox the steps wait for now.")
@click.option("--to", "to_box", required=True, metavar="BOX", help="The mailbox to send them instead.")
@click.option("--force", is_flag=True,
              help="Move them even to a mailbox the inventory does not have in the campaign's group.")
@format_option()
@pass_sender
def reassign_command(sc: SenderContext, name: str, from_box: str, to_box: str, force: bool, fmt: str | None) -> None:
    """Move NAME's steps waiting for one mailbox to another.

    A lead's later steps go from the mailbox that sent its first one; when that mailbox is gone, this sends the
    steps not sent yet that wait for --from from --to instead. A --to that is not a mailbox of the campaign's group
    in the inventory is refused (exit 2): no agent would send those steps. --force moves them anyway, with a
    warning, for an inventory the agents run with that this one does not show yet."""
    from sender.addresses import canonical
    from sender.ledger.campaigns import Campaigns

    from_box, to_box = canonical(from_box), canonical(to_box)
    with sc.ledger() as ledger:
        head = ledger.fetch_one("campaign_head", {"name": name}, f"reassign {name}")
        if head is not None:
            _check_in_group(sc, to_box, str(head[1]), force)
        moved = Campaigns(ledger).reassign(name, from_box, to_box)  # an unknown campaign: exit 2, named
    if sc.app.output_format(fmt) == "json":
        emit_json({"campaign": name, "from": from_box, "to": to_box, "moved": moved})
    elif moved:
        click.echo(f"campaign {name}: {moved} row(s) moved from {from_box} to {to_box}")
    else:
        click.echo(f"campaign {name}: no step not sent yet waits for {from_box}; nothing moved")


def _check_in_group(sc: SenderContext, mailbox: str, group: str, force: bool) -> None:
    """Refuse a --to that no agent of this inventory sends from (its rows would wait for ever), unless --force: the
    inventory read here may not be the one the agents run with. With no inventory there is nothing to check
    against, so only --force moves."""
    inventory = sc.app.inventory
    where = f"group {group}" if group else "any group"
    if inventory is None:
        boxes: list[str] = []
        why = f"no inventory to check {mailbox} against"
    else:
        # the built-in `enqueue` campaign has no group: its rows name their own
        boxes = sorted(m.address.lower() for m in inventory.mailboxes if not group or m.group == group)
        if mailbox in boxes:
            return
        why = f"{mailbox} is not a mailbox of {where} in the inventory ({', '.join(boxes) or 'none'})"
    if not force:
        sc.app.fail(f"--to {mailbox}: {why}, so no agent would send the moved steps; name a mailbox of {where}, "
                    "or add --force if the agents' inventory has it", 2)
    click.echo(f"warning: {why}; the moved steps wait until an agent that has it runs", err=True)
