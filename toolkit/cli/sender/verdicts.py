"""`sendhost sender unconfirmed|conflicts|resolve|retry`: the rows nobody can decide alone, and a person's answers.

An `unconfirmed` row's attempt started and nobody knows whether the server took the message (the connection was
lost after the end of DATA, or the agent died mid-send): it is never resent by itself. A person looks (in the
mailbox's Sent folder, which `--look` searches read-only) and says sent or not sent.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from toolkit.app import reads_only
from toolkit.cli.sender.context import EXIT_HELP, SenderContext, pass_sender
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sender.feedback.sent_folder import Look
    from sender.ledger.store import Unconfirmed
    from sendhost.model import Mailbox

TIME_EXAMPLE = "2026-03-02T09:00:00+01:00"
LOOK_EXIT = "With --look, exit 1 once everything is printed if a mailbox could not be searched."


imap_timeout_option = click.option(
    "--imap-timeout", "timeout_s", default=30.0, show_default=True, type=click.FloatRange(0.1, 600),
    metavar="SECONDS", help="The most one mailbox's Sent-folder lookup may take, its login included.")


@reads_only
@click.command("unconfirmed", epilog=f"{LOOK_EXIT} {EXIT_HELP}")
@click.option("--look", is_flag=True,
              help="Search each row's mailbox's Sent folder (IMAP, read-only) for its Message-ID.")
@imap_timeout_option
@format_option()
@pass_sender
def unconfirmed_command(sc: SenderContext, look: bool, timeout_s: float, fmt: str | None) -> None:
    """The rows waiting for a person: their attempt started and nobody knows whether the server took the message.
    They are never resent by themselves; answer each with `sendhost sender resolve`."""
    mailboxes = sc.app.require_inventory().mailboxes if look else []  # their IMAP settings are there
    with sc.ledger() as ledger:
        rows = ledger.unconfirmed()
    looks = _look(sc, rows, mailboxes, timeout_s) if look else {}
    if sc.app.output_format(fmt) == "json":
        emit_json({"unconfirmed": [{**_row_json(row), "sent_folder": looks[row.id].as_dict() if look else None}
                                   for row in rows]})
    else:
        columns = ["row", "campaign", "lead", "step", "address", "attempted", "mailbox", "source ip",
                   "message-id", "last words"]
        table = [[row.id, row.campaign, row.lead, row.step, row.address, _at(row.attempt_started_at), row.mailbox,
                  row.source_ip, row.message_id, row.last_words or None] for row in rows]
        if look:
            columns.append("sent folder")
            for line, row in zip(table, rows, strict=True):
                line.append(_look_text(looks[row.id]))
        summary = (f"{len(rows)} row(s) waiting for a person: `sendhost sender resolve ROW --sent|--not-sent "
                   "--note TEXT` for each" + ("" if look else "; --look searches their Sent folders")) if rows \
            else "no row is unconfirmed"
        emit_table("unconfirmed rows", columns, table, summary)
    _exit_if_failed(looks)


@reads_only
@click.command("conflicts", epilog=EXIT_HELP)
@format_option()
@pass_sender
def conflicts_command(sc: SenderContext, fmt: str | None) -> None:
    """Rows a relay or the inbox contradicts: the agent saw the server refuse them, a report said sent or delivered.

    The ledger kept the agent's answer (the submission server's definite reply outranks a third party's report) and
    recorded the report; check the mailbox's Sent folder or the relay's log. Nothing is resent by itself."""
    from sender.ledger.conflicts import conflicts

    with sc.ledger() as ledger:
        found = conflicts(ledger)
    if sc.app.output_format(fmt) == "json":
        emit_json({"conflicts": [conflict.as_json() for conflict in found]})
        return
    columns = ["row", "campaign", "lead", "step", "address", "mailbox", "agent settled", "server said", "report",
               "from", "reported at"]
    table = [[c.row, c.campaign, c.lead, c.step, c.address, c.mailbox, c.status, c.last_error or None, c.reported,
              c.source, _at(c.reported_at)] for c in found]
    summary = (f"{len(found)} report(s) contradict what the agent saw: check each row's Sent folder or the relay's "
               "log; the ledger keeps the agent's answer") if found else "no report contradicts the agent"
    emit_table("rows a report contradicts", columns, table, summary)


@click.command("resolve", epilog=f"With --from-sent, exit 1 once everything is printed if a mailbox could not be "
                                 f"searched. {EXIT_HELP}")
@click.argument("row", type=click.IntRange(min=1), required=False)
@click.option("--sent", is_flag=True,
              help="It was sent: the send-log entry is written and the lead's sequence goes on.")
@click.option("--not-sent", is_flag=True,
              help="It was not sent: the row ends failed, and so does the lead's sequence. Nothing is resent.")
@click.option("--from-sent", is_flag=True,
              help="Resolve as sent exactly the rows found in their mailbox's Sent folder; leave the others.")
@click.option("--note", metavar="TEXT", help="What you checked; kept in the row's history (required with ROW).")
@imap_timeout_option
@format_option()
@pass_sender
def resolve_command(sc: SenderContext, row: int | None, sent: bool, not_sent: bool, from_sent: bool,
                    note: str | None, timeout_s: float, fmt: str | None) -> None:
    """A person's verdict on the unconfirmed row ROW: `--sent` or `--not-sent`, with a --note saying why. Or
    `--from-sent`: look in the Sent folders and resolve as sent the rows found there."""
    if from_sent:
        if row is not None or sent or not_sent:
            sc.app.fail("--from-sent finds its rows itself: give it no ROW, --sent or --not-sent", 2)
        _resolve_from_sent(sc, note, timeout_s, fmt)
        return
    if row is None:
        sc.app.fail("name the ROW to resolve (`sendhost sender unconfirmed` lists them), or use --from-sent", 2)
    if sent == not_sent:
        sc.app.fail(f"say what became of row {row}: --sent or --not-sent" + (", not both" if sent else ""), 2)
    if not (note or "").strip():
        sc.app.fail(f"--note TEXT: say why row {row} was {'sent' if sent else 'not sent'} (what you checked); it "
                    "stays in the row's history", 2)
    assert note is not None
    with sc.ledger() as ledger:
        answer = ledger.resolve(row, sent=sent, note=note.strip())
        status = ledger.status_of(row) if answer == "not_unconfirmed" else None
    if answer == "no_row":
        sc.app.fail(f"no row {row}; `sendhost sender unconfirmed` lists the rows waiting for a verdict", 2)
    if answer == "not_unconfirmed":
        sc.app.fail(f"row {row} is {status}, not unconfirmed: only an unconfirmed row takes a verdict; nothing "
                    "changed", 2)
    if sc.app.output_format(fmt) == "json":
        emit_json({"row": row, "resolved": "sent" if sent else "not_sent"})
    elif sent:
        click.echo(f"row {row}: resolved as sent; the send-log entry is written and the lead's sequence goes on")
    else:
        click.echo(f"row {row}: resolved as not sent: failed, and the lead's sequence ended; nothing is resent")


def _resolve_from_sent(sc: SenderContext, note: str | None, timeout_s: float, fmt: str | None) -> None:
    from sender.feedback.sent_folder import Seen

    mailboxes = sc.app.require_inventory().mailboxes
    with sc.ledger() as ledger:
        rows = ledger.unconfirmed()
    looks = _look(sc, rows, mailboxes, timeout_s)  # no connection to the ledger stays open across the IMAP sessions
    resolved: dict[int, str] = {}
    extra = (note or "").strip()
    with sc.ledger() as ledger:
        for row in rows:
            look = looks[row.id]
            if look.seen is Seen.FOUND:
                evidence = f"found in {look.mailbox} folder {look.folder!r} by its Message-ID"
                answer = ledger.resolve(row.id, sent=True,
                                        note=f"{evidence}: {extra}" if extra else evidence)
                resolved[row.id] = "resolved as sent" if answer == "resolved" else "already resolved by someone else"
    if sc.app.output_format(fmt) == "json":
        emit_json({"rows": [{**_row_json(row), "sent_folder": looks[row.id].as_dict(),
                             "resolved": resolved.get(row.id) == "resolved as sent"} for row in rows]})
    else:
        table = [[row.id, row.campaign, row.lead, row.step, row.mailbox, row.message_id, _look_text(looks[row.id]),
                  resolved.get(row.id, "left unconfirmed")] for row in rows]
        done = sum(1 for what in resolved.values() if what == "resolved as sent")
        summary = f"{done} resolved as sent, {len(rows) - len(resolved)} left unconfirmed" if rows \
            else "no row is unconfirmed"
        emit_table("unconfirmed rows, by their Sent folder",
                   ["row", "campaign", "lead", "step", "mailbox", "message-id", "sent folder", "now"], table, summary)
    _exit_if_failed(looks)


@click.command("retry", epilog=EXIT_HELP)
@click.argument("row", type=click.IntRange(min=1), required=False)
@click.option("--all-due-before", "before", metavar="TIME",
              help=f"Every row in retry due before TIME: ISO 8601, like {TIME_EXAMPLE}; a time without a zone is "
                   "UTC.")
@format_option()
@pass_sender
def retry_command(sc: SenderContext, row: int | None, before: str | None, fmt: str | None) -> None:
    """Make the retry row ROW due now (or every row in retry due before TIME), instead of at its retry time."""
    if (row is None) == (before is None):
        sc.app.fail("name one ROW in retry, or --all-due-before TIME, e.g. "
                    f"`sendhost sender retry --all-due-before {TIME_EXAMPLE}`", 2)
    due_before = _time(sc, before) if before is not None else None
    with sc.ledger() as ledger:
        moved = ledger.retry_now(row, due_before)
        status = ledger.status_of(row) if row is not None and moved == 0 else None
    if row is not None and moved == 0:
        if status is None:
            sc.app.fail(f"no row {row}; check its id: `sendhost sender show LEAD STEP` shows a row's id, "
                        "`sendhost lead show ID_OR_ADDRESS --format json` every step's", 2)
        sc.app.fail(f"row {row} is {status}, not retry: only a row waiting to retry can be made due now", 2)
    if sc.app.output_format(fmt) == "json":
        emit_json({"made_due": moved})
    else:
        click.echo(f"{moved} row{'' if moved == 1 else 's'} made due now")


def _time(sc: SenderContext, value: str) -> datetime:
    """An ISO 8601 time; without a zone, UTC."""
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        sc.app.fail(f"--all-due-before: {value!r} is not an ISO 8601 time; write it like {TIME_EXAMPLE} "
                    "(without a zone it is UTC)", 2)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _look(sc: SenderContext, rows: list[Unconfirmed], mailboxes: Sequence[Mailbox],
          timeout_s: float) -> dict[int, Look]:
    from sender.feedback.sent_folder import look_all

    return look_all(rows, mailboxes, env=sc.app.env, timeout_s=timeout_s)


def _exit_if_failed(looks: dict[int, Look]) -> None:
    from sender.feedback.sent_folder import Seen

    if any(look.seen is Seen.FAILED for look in looks.values()):
        raise SystemExit(1)


def _row_json(row: Unconfirmed) -> dict[str, Any]:
    return {"id": row.id, "campaign": row.campaign, "lead": row.lead, "step": row.step, "address": row.address,
            "attempt_started_at": _at(row.attempt_started_at), "mailbox": row.mailbox, "source_ip": row.source_ip,
            "message_id": row.message_id, "last_words": row.last_words}


def _look_text(look: Look) -> str:
    from sender.feedback.sent_folder import Seen

    if look.seen is Seen.FOUND:
        return f"found in {look.folder}"
    if look.seen is Seen.NOT_FOUND:
        return f"not in {look.folder}"
    return f"couldn't look: {look.why}"


def _at(when: datetime | None) -> str | None:
    return None if when is None else when.astimezone(UTC).isoformat(timespec="seconds")
