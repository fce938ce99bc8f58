"""`sendhost campaign apply|add-leads`: a campaign file and its leads into the ledger, each checked whole first."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from toolkit.cli.sender.context import SenderContext, pass_sender
from toolkit.output import emit_json, format_option, printable

if TYPE_CHECKING:
    from sender.campaigns.spec import CampaignSpec
    from sender.ledger.campaigns import Applied, LeadsFileAdded

# How the report names each outcome of a lead, in the order it lists them.
OUTCOME_WORDS = (("added", "added"), ("already", "already in this campaign"), ("suppressed", "suppressed"),
                 ("other_campaign", "in another active campaign"))


@click.command("apply")
@click.argument("path", metavar="FILE.yml", type=click.Path(path_type=Path))
@format_option()
@pass_sender
def apply_command(sc: SenderContext, path: Path, fmt: str | None) -> None:
    """Create or update the campaign of FILE.yml.

    The file is checked whole first (a problem is `file:line: key: problem`, exit 2, nothing applied). On a
    campaign that exists, each change is listed; it applies to the steps not queued yet."""
    from sender.campaigns.spec import load_campaign
    from sender.ledger.campaigns import Campaigns

    text = _text_of(path)
    spec = load_campaign(path, sc.mailbox_groups(), text=text)
    with sc.ledger() as ledger:
        applied = Campaigns(ledger).apply(spec, text)
    render_applied(spec, applied, sc.app.output_format(fmt))


def _text_of(path: Path) -> str:
    """The file's text, what the ledger keeps and the next apply compares with."""
    from sender.campaigns.spec import load_campaign

    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        load_campaign(path)  # says why in the words it uses for every file it cannot read
        raise


def render_applied(spec: CampaignSpec, applied: Applied, fmt: str) -> None:
    lines = list(applied.changes.lines) if applied.changes else []
    if fmt == "json":
        emit_json({"campaign": spec.name, "outcome": applied.outcome, "changes": lines})
    elif applied.outcome == "created":
        click.echo(f"campaign {spec.name}: created ({len(spec.steps)} steps, group {spec.group}, draft); next: "
                   f"`sendhost campaign add-leads {spec.name} LEADS.csv`, then `sendhost campaign start {spec.name}`")
    elif applied.outcome == "updated":
        if not lines:
            click.echo(f"campaign {spec.name}: updated (the file's text changed, none of its keys did)")
            return
        click.echo(f"campaign {spec.name}: updated; the changes apply to steps not queued yet (a step already "
                   "queued keeps the text it was queued with):")
        for line in lines:
            click.echo(f"  {line}")
    else:
        click.echo(f"campaign {spec.name}: unchanged")


@click.command("add-leads")
@click.argument("name")
@click.argument("path", metavar="LEADS.csv", type=click.Path(path_type=Path))
@format_option()
@pass_sender
def add_leads_command(sc: SenderContext, name: str, path: Path, fmt: str | None) -> None:
    """Add the leads of LEADS.csv to campaign NAME.

    Every row is checked against the campaign first (a problem is `file:line: column: problem`, exit 2, nothing
    imported), then all go in one transaction. An address already in the campaign, suppressed, or in another active
    campaign is counted, not added: running it again adds nothing."""
    from sender.ledger.campaigns import add_leads_file

    render_added(name, path, add_leads_file(sc.ledger, name, path), sc.app.output_format(fmt))


def render_added(name: str, path: Path, done: LeadsFileAdded, fmt: str) -> None:
    spec, report, added = done.spec, done.report, done.added
    counts = {outcome.value: n for outcome, n in added.counts.items()}
    first_lines = {outcome.value: line for outcome, line in added.first_lines.items()}
    if fmt == "json":
        data: dict[str, Any] = {
            "campaign": name, "file": str(path), "rows": report.rows, **counts, "first_lines": first_lines,
            "other_campaign_first": added.other_campaign,
            "duplicates": report.duplicates, "duplicate_lines": [list(pair) for pair in report.duplicate_lines],
            "timezone_defaulted": report.timezone_defaulted, "timezone_absent": report.timezone_absent,
            "timezone_invalid": report.timezone_invalid, "timezone": spec.pacing.timezone,
            "timezone_absent_lines": list(report.timezone_absent_lines),
            "timezone_invalid_lines": [list(pair) for pair in report.timezone_invalid_lines]}
        emit_json(data)
        return
    parts = []
    for key, words in OUTCOME_WORDS:
        where = f" (first at line {first_lines[key]})" if counts.get(key) and key in first_lines else ""
        if key == "other_campaign" and added.other_campaign is not None and where:
            where = f" (first at line {first_lines[key]}, in campaign {added.other_campaign})"
        parts.append(f"{counts.get(key, 0)} {words}{where}")
    click.echo(f"campaign {name}: " + ", ".join(parts))
    facts = [f"{report.rows} rows"]
    if report.duplicates:
        listed = ", ".join(f"line {line} repeats line {of}" for line, of in report.duplicate_lines)
        more = ", ..." if report.duplicates > len(report.duplicate_lines) else ""
        facts.append(f"{report.duplicates} duplicate(s) of an earlier row, not added ({listed}{more})")
    if report.timezone_defaulted:
        absent = _at_lines(report.timezone_absent, [str(line) for line in report.timezone_absent_lines])
        invalid = _at_lines(report.timezone_invalid, [f"{line} {_written(zone)}"
                                                      for line, zone in report.timezone_invalid_lines])
        facts.append(f"{report.timezone_defaulted} time zone(s) defaulted to the campaign's {spec.pacing.timezone} "
                     f"({report.timezone_absent} empty{absent}, {report.timezone_invalid} not an IANA name{invalid})")
    click.echo(f"{path}: " + "; ".join(facts))


def _at_lines(count: int, listed: list[str]) -> str:
    """` at line 4`, ` at lines 4, 9, ...` (the first few of `count`), or nothing when there are none."""
    if not listed:
        return ""
    more = ", ..." if count > len(listed) else ""
    return f" at line{'s' if count > 1 else ''} {', '.join(listed)}{more}"


def _written(value: str, longest: int = 40) -> str:
    """A lead's value as the file has it, quoted, its length bounded (a value may be 4,096 characters)."""
    return '"' + printable(value if len(value) <= longest else value[:longest] + "...") + '"'
