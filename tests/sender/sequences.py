"""A three-step campaign for the end-to-end sequence tests, set up as a person does (apply, add-leads, start), and
what the submission server received of it: each lead's messages in arrival order, each named by its row."""

from __future__ import annotations

import email.utils
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from sender import Ledger
from sender.campaigns.leads import read_leads
from sender.campaigns.spec import CampaignSpec, load_campaign
from sender.ledger.campaigns import AddedLeads, Campaigns, Move
from sender.sending.agent import Agent
from tests.support.submission import Received

DAY_S = 86400.0
PASS_LIMIT_S = 60.0  # one pass of an agent over what is due; a pass still running then is a failure, not a hang
DELAYS_S = (0.0, 3 * DAY_S, 4 * DAY_S)  # each step's delay after the previous one was sent

CAMPAIGN = """\
name: {name}
group: sales
fields: [first_name, company]
steps:
  - subject: "Hello {{first_name|there}}"
    body: "Hi {{first_name|there}}, a note for {{company|your team}}."
  - delay: 3d
    body: "Following up, {{first_name|there}}."
  - delay: 4d
    body: "Last one from me, {{first_name|there}}."
"""


def subject_of(first_name: str) -> str:
    """Step 1's Subject as rendered for a lead with this first name ('' when the lead has none)."""
    return f"Hello {first_name or 'there'}"


def body_of(step: int, first_name: str, company: str) -> str:
    name = first_name or "there"
    return {1: f"Hi {name}, a note for {company or 'your team'}.", 2: f"Following up, {name}.",
            3: f"Last one from me, {name}."}[step]


def set_up_campaign(tmp_path: Path, ledger: Ledger, name: str, leads: Sequence[tuple[str, str, str]], *,
                    start: bool = True) -> tuple[CampaignSpec, AddedLeads]:
    """Apply the campaign `name`, add `leads` (address, first_name, company) from a CSV, start it."""
    path = tmp_path / f"{name}.yml"
    path.write_text(CAMPAIGN.format(name=name))
    spec = load_campaign(path, {"sales"})
    campaigns = Campaigns(ledger)
    campaigns.apply(spec, path.read_text())
    added = add_leads(tmp_path, ledger, spec, leads)
    if start:
        campaigns.move(name, Move.START)
    return spec, added


def start_campaign(tmp_path: Path, ledger: Ledger, name: str, text: str, leads: str) -> Path:
    """Apply the campaign file `text` as `name`, add `leads` (lines of `address,timezone`), start it: its path."""
    path = tmp_path / f"{name}.yml"
    path.write_text(text)
    spec = load_campaign(path, {"sales"})
    campaigns = Campaigns(ledger)
    campaigns.apply(spec, text)
    csv = tmp_path / f"{name}.csv"
    csv.write_text("address,timezone\n" + leads)
    campaigns.add_leads(name, read_leads(csv, spec).leads)
    campaigns.move(name, Move.START)
    return path


def add_leads(tmp_path: Path, ledger: Ledger, spec: CampaignSpec,
              leads: Sequence[tuple[str, str, str]]) -> AddedLeads:
    """`sendhost campaign add-leads` of a CSV of `leads` (address, first_name, company)."""
    csv = tmp_path / f"{spec.name}-{len(list(tmp_path.glob('*.csv')))}.csv"
    csv.write_text("address,first_name,company\n" + "".join(f"{a},{f},{c}\n" for a, f, c in leads))
    return Campaigns(ledger).add_leads(spec.name, read_leads(csv, spec).leads)


def one_pass(agent: Agent, factory: Callable[[], Ledger], workers: int = 3) -> None:
    """Run `agent` until nothing is due within its horizon (`sender run --once`), or fail after PASS_LIMIT_S."""
    stop = threading.Event()
    timer = threading.Timer(PASS_LIMIT_S, stop.set)
    timer.start()
    try:
        agent.run(factory, workers, once=True, stop=stop)
    finally:
        timer.cancel()
    assert not stop.is_set(), f"the agent's pass did not end within {PASS_LIMIT_S}s"


@dataclass(frozen=True)
class Arrival:
    """One message at the server, with the row it was sent for."""

    lead: str
    step: int
    received: Received

    @property
    def message(self) -> Any:
        return self.received.message

    @property
    def from_address(self) -> str:
        return email.utils.parseaddr(str(self.message["From"]))[1]


def rows_by_message_id(database_url: str) -> dict[str, tuple[str, int]]:
    """Every campaign row's fixed Message-ID -> (its lead's address, step)."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT message_id, address, step FROM sender_emails e JOIN sender_campaigns c "
                            "ON c.id = e.campaign_id WHERE c.kind = 'file' AND message_id IS NOT NULL").fetchall()
    return {mid: (lead, step) for mid, lead, step in rows}


def arrivals(received: Sequence[Received], database_url: str) -> dict[str, list[Arrival]]:
    """What arrived at the server, per lead in arrival order. A message no campaign row names fails the test."""
    rows = rows_by_message_id(database_url)
    per_lead: dict[str, list[Arrival]] = {}
    for item in received:
        assert item.message_id in rows, f"{item.message_id} to {item.rcpt} is no campaign row's"
        lead, step = rows[item.message_id]
        per_lead.setdefault(lead, []).append(Arrival(lead, step, item))
    return per_lead


def check_thread(lead: str, got: Sequence[Arrival], first_subject: str) -> None:
    """Steps 1..n in order, once each, all from one authenticated mailbox (AUTH user, envelope and From), step 1
    with its own subject and every later one a reply in its thread."""
    assert [a.step for a in got] == list(range(1, len(got) + 1)), (lead, [a.step for a in got])
    mailbox = got[0].received.login
    assert mailbox, f"{lead}: step 1 came from a session that did not authenticate"
    for arrival in got:
        assert (arrival.received.login, arrival.received.mail_from, arrival.from_address) == (mailbox,) * 3, lead
        assert arrival.received.rcpt == lead and arrival.message["To"] == lead
    first = got[0].message
    assert (first["Subject"], first["In-Reply-To"], first["References"]) == (first_subject, None, None), lead
    message_ids = [a.received.message_id for a in got]
    for k, arrival in enumerate(got[1:], start=1):
        # References may be folded over lines (RFC 5322 2.2.3): compared as its list of Message-IDs
        headers = (arrival.message["Subject"], arrival.message["In-Reply-To"],
                   str(arrival.message["References"]).split())
        assert headers == (f"Re: {first_subject}", message_ids[k - 1], message_ids[:k]), (lead, k + 1, headers)


def body_text(arrival: Arrival) -> str:
    payload = arrival.message.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload.decode()


def ended(database_url: str, campaign: str) -> dict[str, str | None]:
    """Each lead of `campaign`, by address -> why its sequence ended (None: it goes on)."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT l.address, l.ended FROM sender_leads l JOIN sender_campaigns c "
                            "ON c.id = l.campaign_id WHERE c.name = %s", (campaign,)).fetchall()
    return {lead: reason for lead, reason in rows}


def statuses(database_url: str, campaign: str) -> dict[str, list[str]]:
    """Each lead of `campaign`, by address -> its rows' statuses, step order."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT e.address, e.status::text FROM sender_emails e JOIN sender_campaigns c "
                            "ON c.id = e.campaign_id WHERE c.name = %s ORDER BY e.address, e.step",
                            (campaign,)).fetchall()
    per: dict[str, list[str]] = {}
    for lead, status in rows:
        per.setdefault(lead, []).append(status)
    return per
