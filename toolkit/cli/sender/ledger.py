"""`sendhost sender migrate|enqueue|suppress|status|show|sweep`: the send ledger."""

from __future__ import annotations

import contextlib
import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from toolkit.app import reads_only
from toolkit.cli.sender.context import SenderContext, pass_sender
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from sender.ledger.stalled import Stalled


@click.command("migrate")
@format_option()
@pass_sender
def migrate_command(sc: SenderContext, fmt: str | None) -> None:
    """Create or upgrade the ledger's schema (idempotent; safe from several processes at once)."""
    with sc.ledger(migrated=False) as ledger:
        result = ledger.migrate()
    data = {"before": result.before, "after": result.after, "applied": list(result.applied)}
    if sc.app.output_format(fmt) == "json":
        emit_json(data)
    else:
        applied = ", ".join(result.applied) or "nothing (already current)"
        click.echo(f"ledger schema at version {result.after} (was {result.before}); applied: {applied}; "
                   "job roles granted (roles.sql)")


@click.command("roles")
@click.option("--dry-run", is_flag=True, help="Print the SQL (sql/roles.sql) instead of applying it.")
@click.option("--apply", "apply_", is_flag=True, help="Create the job roles and grant them (as the ledger's owner).")
@pass_sender
def roles_command(sc: SenderContext, dry_run: bool, apply_: bool) -> None:
    """The ledger's job roles (sendhost_agent, _web, _reader, _operator; docs/security.md): print or apply."""
    from sender.ledger.queries import sql_text

    if dry_run == apply_:
        raise click.UsageError("give one of --dry-run (print the SQL) or --apply (run it as the ledger's owner)")
    if dry_run:
        click.echo(sql_text("roles.sql"), nl=False)
        return
    with sc.ledger() as ledger:
        ledger.apply_roles()
    click.echo("job roles created and granted: sendhost_agent, sendhost_web, sendhost_reader, sendhost_operator")


@click.command("enqueue")
@click.argument("csv_file", metavar="FILE.csv", type=click.Path(path_type=Path))
@click.option("--allow-same-person", is_flag=True,
              help="Queue a new lead id even when another lead holds an active sequence at its address.")
@format_option()
@pass_sender
def enqueue_command(sc: SenderContext, csv_file: Path, allow_same_person: bool, fmt: str | None) -> None:
    """Queue each row of FILE.csv (lead,step,address,group,subject,text[,not_before]); all rows or none. One active
    sequence per address: a new lead id for an address another lead holds is refused as same-person."""
    from sender.ledger.csvfile import read_rows

    rows = read_rows(csv_file, sc.mailbox_groups())
    with sc.ledger() as ledger:
        results = ledger.enqueue_many([row.params() for row in rows], allow_same_person=allow_same_person)
    counts = {"queued": 0, "duplicate": 0, "suppressed": 0}
    same_person = None  # the first row refused as same-person, and the lead whose address it is
    for row, result in zip(rows, results, strict=True):
        # a later step of a lead waits behind its earlier one; a lead whose sequence ended refuses
        counts[result.outcome.value] = counts.get(result.outcome.value, 0) + 1
        if result.first_lead is not None and same_person is None:
            same_person = (row, result.first_lead)
    if sc.app.output_format(fmt) == "json":
        if same_person is not None:
            row, first = same_person
            emit_json({**counts, "same_person_first": {"line": row.line, "lead": row.lead, "same_as": first}})
        else:
            emit_json(counts)
        return
    extra = "".join(f", {counts[key]} {text}" for key, text in (
        ("waiting", "queued behind the lead's earlier step"),
        ("ended", "refused as the lead's sequence ended")) if counts.get(key))
    if same_person is not None:
        row, first = same_person
        extra += (f", {counts['same_person']} refused as same-person (first at line {row.line}: lead {row.lead} "
                  f"is {row.address}, as lead {first} is; --allow-same-person queues it)")
    click.echo(f"{counts['queued']} queued, {counts['duplicate']} refused as duplicates, "
               f"{counts['suppressed']} refused as suppressed{extra}")


@click.command("suppress")
@click.argument("addresses", nargs=-1, required=True, metavar="ADDRESS|@DOMAIN...")
@click.option("--reason", default="suppressed by hand", show_default=True, help="Why, for the row's history.")
@format_option()
@pass_sender
def suppress_command(sc: SenderContext, addresses: tuple[str, ...], reason: str, fmt: str | None) -> None:
    """Never send to ADDRESS, or to any address of @DOMAIN (like @bigco.example), again; rows to it not sent yet
    are withdrawn and their sequences end. Each is reduced to its canonical form first; all are checked before any
    is suppressed."""
    from sender.ledger.store import suppression_entry

    entries = list(dict.fromkeys(suppression_entry(address) for address in addresses))  # AddressError: exit 2
    with sc.ledger() as ledger:
        withdrawn = {entry: ledger.suppress(entry, reason) for entry in entries}
    if sc.app.output_format(fmt) == "json":
        emit_json({"suppressed": withdrawn})
    else:
        for entry, count in withdrawn.items():
            click.echo(f"{entry}: suppressed; {count} row(s) not sent yet withdrawn")


@reads_only
@click.command("status")
@format_option()
@pass_sender
def status_command(sc: SenderContext, fmt: str | None) -> None:
    """Rows per status, each campaign's rows not sent yet by the one reason each waits for (until when), the
    follow-ups stalled behind a paused or disconnected mailbox (since when, and what to do;
    read from the warm-up guard), and each mailbox's last 7 days: sends, hard bounces, complaints, their rates and
    what the warm-up gates make of them (ok, holding-ramp, paused)."""
    from sender.ledger.stalled import pinned_due
    from toolkit.cli.campaign.report import every_waits, read_stalled, render_every_waits
    from toolkit.cli.mailbox_health import read_view, render_health

    url = sc.place.url
    stalled: tuple[Stalled, ...] | None = ()
    unreachable = None
    with sc.ledger() as ledger:
        counts = ledger.counts()
        waiting = sum(counts.get(status, 0) for status in ("waiting", "queued", "retry", "sending"))
        guard = None
        if waiting:  # only then is a mailbox's state worth reading from Redis
            guard, unreachable = sc.status_guard()
        try:
            if pinned_due(ledger):
                stalled = read_stalled(ledger, guard) if guard is not None else None
            waits = every_waits(sc, ledger, guard, unreachable) if waiting else {}
        finally:
            if guard is not None:
                guard.close()
    view = read_view(url)
    inventory = sc.app.inventory
    mailboxes = view.mailboxes([m.address for m in inventory.mailboxes] if inventory is not None else [])
    if sc.app.output_format(fmt) == "json":
        emit_json({"counts": counts, "waits": {name: each.as_json() for name, each in waits.items()},
                   "stalled_followups": None if stalled is None else [s.as_json() for s in stalled],
                   "health": [view.json_of(mailbox) for mailbox in mailboxes]})
    else:
        emit_table("send ledger", ["status", "rows"], list(counts.items()))
        render_every_waits(waits)
        _render_stalled(stalled, unreachable)
        render_health(view, mailboxes)


def _render_stalled(stalled: tuple[Stalled, ...] | None, unreachable: str | None) -> None:
    if stalled is None:
        click.echo(f"follow-ups stalled behind a paused mailbox: unknown, couldn't look "
                   f"({unreachable or 'the warm-up guard did not answer'})")
        return
    if not stalled:
        return
    emit_table("follow-ups stalled behind a paused or disconnected mailbox",
               ["campaign", "mailbox", "rows", "due since", "state", "reason"],
               [(s.campaign, s.mailbox, s.rows, s.due_since.isoformat(timespec="seconds"), s.state, s.reason)
                for s in stalled])
    for each in stalled:
        click.echo(f"{each.campaign}, {each.mailbox}: {each.advice()}")


@reads_only
@click.command("show")
@click.argument("lead")
@click.argument("step", type=click.IntRange(min=1))
@click.option("--campaign", "campaign", metavar="NAME", default="enqueue", show_default=True,
              help="The campaign of the lead: `enqueue` for the rows of `sender enqueue` (LEAD is their lead "
                   "column), a campaign file's name for its leads (LEAD is the address, or the leads file's lead "
                   "id).")
@format_option()
@pass_sender
def show_command(sc: SenderContext, lead: str, step: int, campaign: str, fmt: str | None) -> None:
    """The row of LEAD's STEP and its history: what happened to it (every campaign of a person: `sendhost lead
    show`)."""
    from sender.addresses import AddressError, canonical

    if campaign != "enqueue":
        with contextlib.suppress(AddressError):  # an address in any spelling; else the leads file's lead id
            lead = canonical(lead)
    with sc.ledger() as ledger:
        shown = ledger.show(lead, step, campaign)
        if shown is None:
            sc.app.fail(_no_row(lead, step, campaign, ledger.lead_rows(lead)), 1)
    data: dict[str, Any] = {"row": shown.row, "send_log": shown.send_log, "events": shown.events,
                            "feedback": shown.feedback}
    if sc.app.output_format(fmt) == "json":
        click.echo(json.dumps(data, indent=2, default=str))
        return
    emit_table(f"{lead} step {step}", ["field", "value"], [(k, v) for k, v in shown.row.items()])
    emit_table("history", ["at", "event", "detail"], [(e["at"], e["kind"], e["detail"]) for e in shown.events])
    if shown.feedback:  # verdict: how sure the source was (DMARC of a mail's From: pass, fail = forged, none)
        emit_table("feedback", ["at", "event", "source", "verdict", "detail"],
                   [(f["at"], f["event"], f["source"], f["verdict"], f["detail"]) for f in shown.feedback])


def _no_row(lead: str, step: int, campaign: str, rows: list[dict[str, Any]]) -> str:
    """Why `sender show` found nothing, and the command that lists what there is: the lead's own steps when it has
    some (in this campaign or others), else where rows come from."""
    where = "" if campaign == "enqueue" else f" in campaign {campaign!r}"
    steps = sorted({row["step"] for row in rows if row["name"] == campaign and row["id"] is not None})
    others = sorted({row["name"] for row in rows if row["name"] != campaign})
    if steps:
        hint = (f"it has step{'s' if len(steps) > 1 else ''} {', '.join(map(str, steps))}; "
                f"`sendhost lead show {shlex.quote(lead)}` lists them")
    elif others:
        hint = (f"it is in campaign{'s' if len(others) > 1 else ''} {', '.join(others)} (pass --campaign NAME); "
                f"`sendhost lead show {shlex.quote(lead)}` lists its steps")
    else:
        hint = ("no such lead in any campaign: check it with `sendhost lead show ID_OR_ADDRESS` (an enqueued lead's "
                "id, or an address for a campaign's); rows come from `sendhost sender enqueue FILE` and "
                "`sendhost campaign add-leads`")
    return f"no row for lead {lead!r} step {step}{where}; {hint}"


def _duration(value: str) -> float:
    """'30m', '2h', '45s' or a number of seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = value.strip().lower()
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a duration like 30m, 2h or 90s") from None


@click.command("sweep")
@click.option("--older-than", default="30m", show_default=True, help="Settle rows left sending this long.")
@format_option()
@pass_sender
def sweep_command(sc: SenderContext, older_than: str, fmt: str | None) -> None:
    """Settle rows whose agent died: back to the queue if the attempt never started, else unconfirmed."""
    with sc.ledger() as ledger:
        requeued, unconfirmed = ledger.sweep(_duration(older_than))
    if sc.app.output_format(fmt) == "json":
        emit_json({"requeued": requeued, "unconfirmed": unconfirmed})
    else:
        click.echo(f"{requeued} requeued (attempt never started), {unconfirmed} unconfirmed (check Sent Items)")
