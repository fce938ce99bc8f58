"""`sendhost lead show`: a person across every campaign (the built-in `enqueue` one too): each step's status,
mailbox, send time and Message-ID, and why the sequence ended.

A group of its own rather than under `campaign`: a lead is a person, found by address or by the caller's id in
whatever campaigns they are in, and the question ("what did we send to eve@bigco.example?") names no campaign.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import click

from toolkit.app import reads_only
from toolkit.cli.sender.context import SenderContext, ledger_group, pass_sender
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from sender import Ledger

group = ledger_group("lead", "Leads: one person's steps in every campaign.")

# The lead's own columns of the lead_rows query; the rest are one step's.
LEAD_KEYS = ("name", "lead", "address", "ended", "ended_at", "ended_note", "held_until", "held_why",
             "timezone")


@reads_only
@group.command("show")
@click.argument("who", metavar="ID_OR_ADDRESS")
@format_option()
@pass_sender
def show_command(sc: SenderContext, who: str, fmt: str | None) -> None:
    """A person's steps in every campaign.

    ID_OR_ADDRESS is an address (in any spelling), a leads file's `lead` id, or an enqueued lead's id. For each
    campaign: each step's status, mailbox, send time and Message-ID, and why the sequence ended (with what the
    reply that ended it named), or until when an automatic reply holds it; where the campaign tracks clicks, each
    sent step's links as written and as sent, with their clicks by verdict; JSON adds each row's history. Exit 1
    when no campaign has such a lead."""
    out = sc.app.output_format(fmt)
    with sc.ledger() as ledger:
        rows = _rows(ledger, who)
        leads = _leads(rows)
        now = ledger.now() or datetime.now(UTC)
        for lead in leads:  # a hold that is over, or of a sequence that ended, holds nothing
            if lead["ended"] or lead["held_until"] is None or lead["held_until"] <= now:
                lead["held_until"] = lead["held_why"] = None
        _waits_for(sc, ledger, leads, now)
        _add_links(ledger, leads)
        if out == "json":
            for lead in leads:
                for step in lead["steps"]:
                    step["history"] = ledger.events_of(step["id"])
    if not leads:
        sc.app.fail(f"no lead {who.strip()!r} in any campaign (looked for it as an address, a leads file's lead id "
                    "and an enqueued lead)", 1)
    if out == "json":
        emit_json({"who": who, "leads": leads})
        return
    for number, lead in enumerate(leads):
        if number:
            click.echo()
        render_lead(lead)


def _add_links(ledger: Ledger, leads: list[dict[str, Any]]) -> None:
    """Each sent step of a campaign that tracks clicks gets its links: original, tracked, clicks by verdict."""
    from sender.campaigns.spec import CampaignError
    from sender.ledger.campaigns import Campaigns
    from sender.ledger.engagement import tracked_links

    domains: dict[str, str | None] = {}
    for lead in leads:
        name = lead["campaign"]
        if name not in domains:
            try:
                spec = Campaigns(ledger).spec(name)
            except CampaignError:
                spec = None
            domains[name] = spec.tracking.domain if spec is not None and spec.tracking.clicks else None
        for step in lead["steps"]:
            domain = domains[name]
            if domain is not None and step["sent_at"] is not None:
                step["links"] = [link.as_json() for link in tracked_links(ledger, step["id"], domain)]


def _rows(ledger: Ledger, who: str) -> list[dict[str, Any]]:
    """The rows `who` names: as a canonical address when it is one, else (or when that finds nothing) as given."""
    from sender.addresses import AddressError, canonical

    given = who.strip()
    try:
        address = canonical(given)
    except AddressError:
        address = None
    rows = ledger.lead_rows(address) if address else []
    return rows or ledger.lead_rows(given)


def _leads(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The query's rows, one per step, grouped by lead (a campaign each)."""
    leads: dict[int, dict[str, Any]] = {}
    for row in rows:
        key = row["lead_id"]
        if key not in leads:
            leads[key] = {"campaign": row["name"], **{k: row[k] for k in LEAD_KEYS[1:]}, "steps": []}
        if row["id"] is not None:
            leads[key]["steps"].append({"id": row["id"], "step": row["step"], "status": row["status"],
                                        "mailbox": row["mailbox"] or row["pinned_mailbox"],
                                        "due": max(row["not_before"], row["due_at"]), "sent_at": row["accepted_at"],
                                        "message_id": row["message_id"], "subject": row["sent_subject"],
                                        "waits_for": None, "_row": row})
    return list(leads.values())


def render_lead(lead: dict[str, Any]) -> None:
    who = f"{lead['lead']} <{lead['address']}>" if lead["lead"] else lead["address"]  # the caller's id, if any
    end = f"ended: {lead['ended']} at {_when(lead['ended_at'])}" if lead["ended"] else "going on"
    if lead["ended"] and lead["ended_note"]:
        end += f" ({lead['ended_note']}" + ("; never mailed by themselves)" if lead["ended"] == "left" and
                                            "names" in lead["ended_note"] else ")")
    if lead["held_until"] is not None:
        end += f"; held until {_local(lead['held_until'], lead['timezone'])}: {lead['held_why']}"
    click.echo(f"campaign {lead['campaign']}: {who}; sequence {end}")
    local = _zone(lead)
    emit_table(None, ["step", "status", "mailbox", "due (UTC)", f"due there ({local.key})" if local else "due there",
                      "waits for", "sent at", "Message-ID"],
               [(s["step"], s["status"], s["mailbox"], _utc(s["due"]) if s["status"] in WAITS else None,
                 _there(s["due"], local) if s["status"] in WAITS else None,
                 s["waits_for"]["text"] if s["waits_for"] else None, _when(s["sent_at"]), s["message_id"])
                for s in lead["steps"]])
    links = [(s["step"], link) for s in lead["steps"] for link in s.get("links", ())]
    if links:
        emit_table(None, ["step", "link", "as written", "as sent", "clicks"],
                   [(step, link["link"], link["original"], link["tracked"],
                     ", ".join(f"{n} {verdict}" for verdict, n in sorted(link["clicks"].items())) or "none")
                    for step, link in links])


WAITS = ("waiting", "queued", "retry", "sending")  # a step not sent yet: its due time and what it waits for


def _waits_for(sc: SenderContext, ledger: Ledger, leads: list[dict[str, Any]], now: datetime) -> None:
    """Each step not sent yet: the one reason it waits for and until when (sender.ledger.waits), as `campaign
    status` counts it; the guard read once (unread: the mailboxes' part left out, as there)."""
    from sender.assembly import campaign_pace, enqueue_conditions
    from sender.ledger.campaigns import Campaigns
    from sender.ledger.waits import Conditions, RowFacts, classify, short

    waiting = [(lead, step) for lead in leads for step in lead["steps"] if step["status"] in WAITS]
    for lead in leads:
        for step in lead["steps"]:
            row = step.pop("_row")
            step["facts"] = RowFacts(row["status"], row["timezone"], row["mailbox_group"], row["pinned_mailbox"],
                                     row["due_at"] > now, row["not_before"] > now, step["due"])
    if not waiting:
        for lead in leads:
            for step in lead["steps"]:
                step.pop("facts")
        return
    guard, unreachable = sc.status_guard()
    conditions: dict[str, Conditions] = {}
    try:
        campaigns = Campaigns(ledger)
        for lead, step in waiting:
            name = lead["campaign"]
            if name not in conditions:
                pinned = [s["facts"].pinned for s in lead["steps"] if s["facts"].pinned]
                spec = campaigns.spec(name) if name != "enqueue" else None
                if spec is None:
                    groups: dict[str, list[str]] = {}
                    inventory = sc.app.inventory
                    for mailbox in inventory.mailboxes if inventory is not None else ():
                        groups.setdefault(mailbox.group, []).append(mailbox.address.lower())
                    conditions[name] = enqueue_conditions(now, guard, groups, pinned, unreachable)[0]
                else:
                    head = ledger.fetch_one("campaign_head", {"name": name}, f"status of {name}")
                    pace = campaign_pace(ledger, spec, guard, sc.group_mailboxes(spec.group), pinned, unreachable,
                                         str(head[0]) if head else "running", count_rows=False)
                    assert pace.conditions is not None
                    conditions[name] = pace.conditions
            wait = classify(step["facts"], conditions[name])
            tz = _zone(lead) or ZoneInfo(conditions[name].timezone)
            lead["zone"] = tz.key  # the lead's own, else its campaign's
            step["waits_for"] = {"reason": wait.reason.value, "where": wait.where,
                                 "until": wait.until.isoformat(timespec="seconds") if wait.until else None,
                                 "text": short(wait, tz, now)}
    finally:
        if guard is not None:
            guard.close()
        for lead in leads:
            for step in lead["steps"]:
                step.pop("facts", None)


def _zone(lead: dict[str, Any]) -> ZoneInfo | None:
    """The lead's time zone: its own, else (once a step of it waits) its campaign's; None: neither known."""
    from sender.campaigns.pacing import valid_timezone

    timezone = lead.get("zone") or lead["timezone"]
    return ZoneInfo(timezone) if timezone and valid_timezone(timezone) else None


def _utc(value: datetime | None) -> str | None:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M") if value is not None else None


def _there(value: datetime | None, tz: ZoneInfo | None) -> str | None:
    """A due time on the lead's wall clock, with its offset."""
    if value is None or tz is None:
        return None
    local = value.astimezone(tz)
    return f"{local:%Y-%m-%d %H:%M} {local.isoformat()[-6:]}"


def _local(value: datetime, timezone: str | None) -> str:
    """A time on the lead's wall clock, naming the zone, when the lead has one; else as every other time here."""
    from sender.campaigns.pacing import valid_timezone

    if timezone and valid_timezone(timezone):
        return f"{_when(value.astimezone(ZoneInfo(timezone)))} ({timezone})"
    return str(_when(value))


def _when(value: datetime | None) -> str | None:
    """A time for people: to the second (JSON keeps the database's full precision)."""
    return value.isoformat(sep=" ", timespec="seconds") if value is not None else None
