"""Campaigns in the ledger: apply a campaign file, add its leads, start, pause, resume, stop, report, reassign.

    from sender import Ledger
    from sender.ledger.campaigns import Campaigns
    campaigns = Campaigns(ledger)
    campaigns.apply(spec, text)          # -> Applied(outcome="created", changes=None)
    campaigns.add_leads(spec.name, leads)
    add_leads_file(open_ledger, name, path)   # `sendhost campaign add-leads`: the file read whole, then added

The rules are the database's (sql/schema.sql: sender_campaign_apply, sender_add_leads, sender_campaign_move,
sender_reassign); this module turns a checked file into their calls, and their answers into reports.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from sender.campaigns.changes import SpecChanges, changes
from sender.campaigns.leads import Lead, LeadsReport, read_leads
from sender.campaigns.spec import CampaignError, CampaignSpec, load_applied, load_campaign
from sender.errors import SenderConfigError
from sender.ledger import connection as db
from sender.ledger import window_intervals
from sender.ledger.connection import STATEMENT_TIMEOUT_MS
from sender.ledger.queries import query
from sender.ledger.store import Ledger

IMPORT_COLUMNS = ("line", "address", "lead", "timezone", "fields")
# An import's statements take time in proportion to its leads: 35-45 us a lead on an idle 2-core machine, up to
# 170 us on a loaded one (bench/import.py), where 100,000 leads overran the ledger's statement timeout. Each lead
# adds this much to the import's bound, room for a slower disk while a stuck import still ends.
IMPORT_TIMEOUT_MS_PER_LEAD = 1


def import_timeout_ms(leads: int) -> int:
    """The statement timeout of an import of `leads` leads: the ledger's, and more for each lead."""
    return STATEMENT_TIMEOUT_MS + leads * IMPORT_TIMEOUT_MS_PER_LEAD


def staged_row(lead: Lead) -> tuple[int, str, str | None, str, str]:
    """`lead` as a row of the staging table (IMPORT_COLUMNS, the fields as JSON)."""
    return lead.line, lead.address, lead.lead_id, lead.timezone, json.dumps(lead.fields)


def _other_campaign(conn: psycopg.Connection[Any], name: str, leads: Sequence[Lead], line: int | None) -> str | None:
    """The active campaign other than `name` holding the lead on `line` (the first refused as in another one)."""
    address = next((lead.address for lead in leads if lead.line == line), None) if line is not None else None
    if address is None:
        return None
    found = conn.execute(query("lead_other_campaign"), {"address": address, "name": name}).fetchone()
    return str(found[0]) if found else None


class Move(StrEnum):
    START = "start"
    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"


class State(StrEnum):
    DRAFT = "draft"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


class LeadOutcome(StrEnum):
    ADDED = "added"
    ALREADY = "already"  # in this campaign already
    SUPPRESSED = "suppressed"
    OTHER_CAMPAIGN = "other_campaign"  # in another active campaign, and this one does not allow it


@dataclass(frozen=True)
class Applied:
    outcome: str  # created | updated | unchanged
    changes: SpecChanges | None = None


@dataclass(frozen=True)
class AddedLeads:
    counts: dict[LeadOutcome, int]
    first_lines: dict[LeadOutcome, int] = field(default_factory=dict)  # the file's first line of each outcome
    # the active campaign holding the first lead refused as in another one (None: no lead was)
    other_campaign: str | None = None


@dataclass(frozen=True)
class LeadsFileAdded:
    """What `sendhost campaign add-leads` did: the campaign's applied file, what reading the leads file found, and
    what became of its leads."""

    spec: CampaignSpec
    report: LeadsReport
    added: AddedLeads


def add_leads_file(open_ledger: Callable[[], Ledger], name: str, path: Path) -> LeadsFileAdded:
    """The leads of `path` added to campaign `name`: every row checked against the campaign's applied file first
    (LeadsError naming file:line, nothing added), then all in one transaction. CampaignError: no campaign `name`."""
    with open_ledger() as ledger:
        campaigns = Campaigns(ledger)
        spec = campaigns.spec(name)
        if spec is None:
            raise CampaignError(f"no campaign {name!r}; create it first with `sendhost campaign apply FILE.yml`")
        leads = read_leads(path, spec)
        return LeadsFileAdded(spec, leads.report, campaigns.add_leads(name, leads.leads))


# The columns of `campaign status`, in order: what became of each step's rows.
STEP_COLUMNS = ("waiting", "queued", "sent", "replied", "bounced", "unsubscribed", "failed", "unconfirmed",
                "suppressed", "cancelled")


# What worked (docs/tracking.md#what-worked), per step and mailbox: rows sent, then of those, each column.
WORKED_COLUMNS = ("delivered", "replied", "bounced", "unsubscribed", "clicked", "opened")


@dataclass(frozen=True)
class Worked:
    """One line of what worked: a campaign's step from one mailbox, rows sent and what became of them."""

    campaign: str
    step: int
    mailbox: str
    sent: int
    counts: dict[str, int]  # WORKED_COLUMNS -> rows
    scanned: int = 0  # rows a scanner clicked: never counted as clicked (docs/tracking.md)

    def rate(self, column: str) -> float:
        """The share of the rows sent (0.0 with none sent)."""
        return self.counts[column] / self.sent if self.sent else 0.0

    def as_json(self, opens: bool) -> dict[str, Any]:
        shown = [c for c in WORKED_COLUMNS if opens or c != "opened"]
        return {"step": self.step, "mailbox": self.mailbox, "sent": self.sent,
                **{c: self.counts[c] for c in shown}, "rates": {c: round(self.rate(c), 4) for c in shown},
                **({"opened_is_estimate": True} if opens else {})}


@dataclass(frozen=True)
class CampaignStatus:
    name: str
    state: State
    group: str
    leads: int
    ended: dict[str, int]  # sequences ended, by reason
    steps: dict[int, dict[str, int]]  # step -> column -> rows
    mailboxes: dict[str, dict[str, int]]  # mailbox -> {"sent": ..., "waiting": ...}
    worked: tuple[Worked, ...] = ()  # per step and mailbox, step order
    opens: bool = False  # the campaign counts opens: the `opened` column is shown, as an estimate

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state.value, "group": self.group, "leads": self.leads,
                "ended": self.ended, "steps": {str(k): v for k, v in self.steps.items()},
                "mailboxes": self.mailboxes, "worked": [w.as_json(self.opens) for w in self.worked]}


class Campaigns:
    """The campaign commands over one ledger connection."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def apply(self, spec: CampaignSpec, text: str) -> Applied:
        """Create or update the campaign `spec` (its file's `text`); a change that leaves an imported lead unable
        to fill a step is refused (CampaignError), nothing applied."""
        row = self.ledger.fetch_one("campaign_source", {"name": spec.name}, f"campaign {spec.name}")
        diff = None
        if row is not None:
            old = load_campaign(Path(spec.path or spec.name), text=row[0]) if row[0] else None
            diff = changes(old, spec) if old is not None else None
            for name in sorted(diff.newly_required_fields if diff else ()):
                lacking = self.ledger.fetch_one("lead_lacking_field", {"name": spec.name, "field": name},
                                                f"campaign {spec.name}")
                if lacking is not None:
                    raise CampaignError(f"{spec.path}: fields: a step now needs {{{name}}} without a fallback, and "
                                        f"lead {lacking[0]} has none; write {{{name}|...}} or give every lead one")
        steps = [{"delay_s": s.delay_s, "subject": s.subject.text if s.subject else None, "body": s.body.text}
                 for s in spec.steps]
        now = self.ledger.now()
        # The file and the sending window the claim reads from it (sender.ledger.window_intervals), in one
        # transaction: no claim sees the one without the other.
        with self.ledger.calling(f"apply campaign {spec.name}") as conn, db.transaction(conn):
            db.set_local_timeout(conn)
            outcome = conn.execute(query("campaign_apply"), {
                "name": spec.name, "group": spec.group, "allow": spec.pacing.allow_other_campaigns,
                "source": text, "steps": Jsonb(steps),
                # as written (0.8, not 0.8000000000000000444): the claim's turns count exactly
                "followups_share": Decimal(str(spec.pacing.followups_share)),
                "stop_on_domain_reply": spec.stop_on_domain_reply, "now": now}).fetchone()
            window_intervals.write(conn, spec.name, now or datetime.now(UTC))
        assert outcome is not None
        return Applied(str(outcome[0]), diff)

    def add_leads(self, name: str, leads: Iterable[Lead]) -> AddedLeads:
        """Add `leads` to campaign `name` in one transaction: one COPY into a staging table, then set-based SQL."""
        counts = dict.fromkeys(LeadOutcome, 0)
        first_lines: dict[LeadOutcome, int] = {}
        leads = tuple(leads)
        with self.ledger.calling(f"add leads to {name}") as conn, db.transaction(conn):
            conn.execute(query("leads_import_timeout"), {"ms": str(import_timeout_ms(len(leads)))})
            conn.execute(query("leads_import_table"))
            with conn.cursor().copy(query("leads_import_copy")) as copy:
                for lead in leads:
                    copy.write_row(staged_row(lead))
            for outcome, count, first_line in conn.execute(query("add_leads"), {"name": name,
                                                                                 "now": self.ledger.now()}):
                counts[LeadOutcome(outcome)] = int(count)
                first_lines[LeadOutcome(outcome)] = int(first_line)
            other = _other_campaign(conn, name, leads, first_lines.get(LeadOutcome.OTHER_CAMPAIGN))
            # a lead time zone new to the campaign: its window's intervals, committed with its leads
            window_intervals.write(conn, name, self.ledger.now() or datetime.now(UTC))
        return AddedLeads(counts, first_lines, other)

    def move(self, name: str, move: Move) -> State:
        """Start, pause, resume or stop campaign `name`; SenderConfigError for a move its state does not allow."""
        return State(self.ledger.fetch_value("campaign_move", {"name": name, "move": move.value}, f"{move} {name}"))

    def names(self) -> list[str]:
        return [str(name) for (name,) in self.ledger.fetch_all("campaign_names", {}, "campaigns")]

    def spec(self, name: str) -> CampaignSpec | None:
        """Campaign `name` as last applied (its stored file, checked again); None when no campaign file has it."""
        row = self.ledger.fetch_one("campaign_source", {"name": name}, f"campaign {name}")
        if row is None:
            return None
        return load_applied(name, row[0])

    def status(self, name: str) -> CampaignStatus | None:
        head = self.ledger.fetch_one("campaign_head", {"name": name}, f"status of {name}")
        if head is None:
            return None
        state, group, leads = head
        ended = {str(reason): int(n) for reason, n in self.ledger.fetch_all("campaign_ended", {"name": name},
                                                                            f"status of {name}")}
        steps: dict[int, dict[str, int]] = {}
        for step, column, n in self.ledger.fetch_all("campaign_steps", {"name": name}, f"status of {name}"):
            steps.setdefault(int(step), dict.fromkeys(STEP_COLUMNS, 0))[str(column)] += int(n)
        mailboxes: dict[str, dict[str, int]] = {}
        for mailbox, sent, waiting in self.ledger.fetch_all("campaign_mailboxes", {"name": name},
                                                            f"status of {name}"):
            mailboxes[str(mailbox)] = {"sent": int(sent), "waiting": int(waiting)}
        try:
            spec = self.spec(name)
        except CampaignError:  # a file as applied that no longer parses: its status is still worth reading
            spec = None
        return CampaignStatus(name, State(state), str(group), int(leads), ended, steps, mailboxes,
                              tuple(self.worked(name)), spec is not None and spec.tracking.opens)

    def worked(self, name: str | None = None) -> list[Worked]:
        """What worked per step and mailbox, of campaign `name` (None: every campaign file)."""
        return [Worked(str(campaign), int(step), str(mailbox), int(sent),
                       dict(zip(WORKED_COLUMNS, (int(n) for n in counts), strict=True)), int(scanned))
                for campaign, step, mailbox, sent, *counts, scanned in self.ledger.fetch_all(
                    "campaign_worked", {"campaign": name}, "what worked")]

    def reassign(self, name: str, from_mailbox: str, to_mailbox: str) -> int:
        """Move the leads of `name` that wait for `from_mailbox` to `to_mailbox`; how many rows moved."""
        if self.ledger.fetch_one("campaign_head", {"name": name}, f"reassign {name}") is None:
            raise SenderConfigError(f"no campaign {name!r}; `sendhost campaign status` lists them")
        return int(self.ledger.fetch_value("reassign", {"name": name, "from": from_mailbox, "to": to_mailbox},
                                    f"reassign {name}"))
