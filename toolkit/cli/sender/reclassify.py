"""`sendhost sender reclassify ROW --as VERDICT`: a person's correction of what came back about a row (a reply read
as an automatic one, a "please remove me" read as a reply, ...), applied with its effect under the rank guard: a row
never moves down, so a verdict that would lower it is recorded in its history and changes nothing else."""

from __future__ import annotations

import click

from toolkit.cli.sender.context import EXIT_HELP, SenderContext, pass_sender
from toolkit.output import emit_json, format_option

# The verdicts a person gives, as the command writes them, and the ledger's event for each.
VERDICTS = {"reply": "replied", "auto-reply": "auto_replied", "unsubscribe": "unsubscribed", "bounce": "bounced",
            "left": "left"}
EFFECTS = {
    "reply": "a reply: the lead's sequence ended",
    "auto-reply": "an automatic reply: the lead's steps not sent yet wait 7 days",
    "unsubscribe": "an unsubscribe: the address is suppressed and the lead's sequence ended",
    "bounce": "a hard bounce: the address is suppressed and the lead's sequence ended",
    "left": "the lead left or is the wrong person: the sequence ended as left",
}


@click.command("reclassify", epilog=f"Exit 1 when the row already stands above what the verdict gives it (the rank "
                                    f"guard kept it; the verdict stays in its history). {EXIT_HELP}")
@click.argument("row", type=click.IntRange(min=1))
@click.option("--as", "verdict", required=True, type=click.Choice(list(VERDICTS)),
              help="What came back about the row really was.")
@click.option("--note", metavar="TEXT", default="", help="Why; kept with the verdict in the row's history.")
@format_option()
@pass_sender
def reclassify_command(sc: SenderContext, row: int, verdict: str, note: str, fmt: str | None) -> None:
    """Correct what came back about row ROW: a reply, an automatic reply, an unsubscribe, a bounce, or a note that
    the lead left. Its effect is applied as the inbox would have (an unsubscribe or a bounce suppresses the address;
    a reply or `left` ends the sequence; an automatic reply holds the lead 7 days) under the rank guard."""
    from sender.ledger.events import Event, Feedback, Reclassified

    with sc.ledger() as ledger:
        answer = Feedback(ledger).reclassify(row, Event(VERDICTS[verdict]), note.strip())
        status = ledger.status_of(row)
    if answer is Reclassified.NO_ROW:
        sc.app.fail(f"no row {row}; check its id: `sendhost lead show ID_OR_ADDRESS --format json` shows every "
                    "step's", 2)
    if answer is Reclassified.NOT_SENT:
        sc.app.fail(f"row {row} was never sent ({status}): nothing came back about it to reclassify", 2)
    if sc.app.output_format(fmt) == "json":
        emit_json({"row": row, "as": verdict, "answer": answer.value, "status": status.value if status else None})
    elif answer is Reclassified.OUTRANKED:
        click.echo(f"row {row} is {status}, which stands above {verdict}: the rank guard kept it; the verdict is in "
                   "its history and nothing else changed")
    else:
        click.echo(f"row {row}: reclassified as {EFFECTS[verdict]}; the row is {status}")
    if answer is Reclassified.OUTRANKED:
        raise SystemExit(1)
