"""`sendhost sender retire-history`: drop whole months of the ledger's history (sender.ledger.history)."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime

import click

from toolkit.cli.sender.context import SenderContext, pass_sender
from toolkit.output import emit_json, format_option

RETIRE_HELP = ("Exit 0 ok (also when nothing was old enough); 1 a month holds the history of a row still sending or "
               "unconfirmed (nothing dropped), or the database failed; 2 bad input.")


@click.command("retire-history", epilog=RETIRE_HELP)
@click.option("--before", "before", metavar="DATE", required=True,
              help="Drop the months of history that end on or before DATE (YYYY-MM-DD, a month's first day; "
                   "another day is rounded down to its month's first). UTC months.")
@format_option()
@pass_sender
def retire_history_command(sc: SenderContext, before: str, fmt: str | None) -> None:
    """Drop whole months of the rows' history and send log before DATE: each month's history entries and send-log
    entries go; the rows, their leads, each send's time and mailbox (what follow-ups are timed from), the
    suppressions, the feedback and the counts `sender status` shows are kept. Refuses, dropping nothing, while a
    month holds the history of a row still sending or unconfirmed."""
    from sender.ledger.history import HistoryInUse, month_start, retire_history

    day = _day(sc, before)
    start = month_start(day)
    if start != day:
        click.echo(f"--before {day} is not a month's first day: retiring the months before {start}", err=True)
    with sc.ledger() as ledger:
        now = ledger.now() or datetime.now(UTC)
        this_month = month_start(now.astimezone(UTC).date())
        if start > this_month:
            sc.app.fail(f"--before {start} is after this month ({this_month}): the history being written now is "
                        f"never retired; give --before {this_month} or earlier", 2)
        try:
            retired = retire_history(ledger, start)
        except HistoryInUse as exc:
            sc.app.fail(str(exc), exc.exit_code)
    months: dict[date, dict[str, int]] = defaultdict(dict)
    for entry in retired:
        months[entry.month][entry.history] = entry.entries
    if sc.app.output_format(fmt) == "json":
        emit_json({"before": start.isoformat(), "retired": [
            {"month": month.strftime("%Y-%m"), "history_entries": parts.get("sender_events", 0),
             "send_log_entries": parts.get("sender_send_log", 0)} for month, parts in sorted(months.items())]})
        return
    if not months:
        click.echo(f"nothing to retire before {start}: no month of history ends by then")
        return
    for month, parts in sorted(months.items()):
        click.echo(f"{month:%Y-%m}: dropped {parts.get('sender_events', 0)} history entries and "
                   f"{parts.get('sender_send_log', 0)} send-log entries")


def _day(sc: SenderContext, value: str) -> date:
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        sc.app.fail(f"--before: {value!r} is not a date; write it like 2026-01-01 (YYYY-MM-DD)", 2)
