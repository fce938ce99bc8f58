"""The campaign the simulation runs: three steps to every lead, applied through the ledger's campaign functions
(`sender.ledger.campaigns.Campaigns`: apply, start, add leads), one campaign per mailbox group of the inventory.

    feed = LeadFeed.start(ledger, groups, rng, backlog_limit=15)
    feed.arrive()                  # a lead came in
    feed.import_arrived(now)       # those come in join, while fewer than 15 leads have a step due and unsent

Step 1 has a subject; steps 2 and 3 have none, so they go as replies in its thread, 3 and 4 days after the step
before them was sent, from the mailbox that sent it. The ledger creates each follow-up when its step is sent and
ends the lead's sequence on a reply, a bounce or an unsubscribe; the simulation only adds leads.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path

from sender.campaigns.leads import Lead
from sender.campaigns.spec import CampaignSpec, load_campaign
from sender.campaigns.window import Schedule, zone
from sender.ledger.campaigns import Campaigns, CampaignStatus, Move
from sender.ledger.store import Ledger
from simulation.model import DEFAULT_PLAN, CampaignPlan

LEAD_DOMAIN = "leads.example"  # RFC 2606: never a real recipient
FIRST_NAMES = ("Ada", "Ben", "Chloe", "Dev", "Eve", "Femi", "Grace", "Hiro", "")  # "": the fallback shows
# The campaign file, as a person would write it (docs/campaigns.md; campaign.example.yml is the commented example).
CAMPAIGN_FILE = """\
# The campaign `sendhost simulate` runs on this mailbox group (simulation/campaign.py).
name: {name}
group: {group}
fields: [first_name]
tracking: {{clicks: true, domain: t.simulation.example}}    # links rewritten to redirects on our own domain
steps:
  - subject: "A question, {{first_name|there}}"
    body: |
      Hello {{first_name|there}},

      a short note from the simulation. Would a call next week help? The two-minute version:
      https://www.simulation.example/overview

      Not interested? {{unsubscribe_url}}
  - delay: 3d    # after step 1 was sent; no subject: a reply in its thread
    body: |
      Following up on my note below, {{first_name|there}}: is this on your radar? A customer's story:
      https://www.simulation.example/story
  - delay: 4d
    body: |
      Last one from me, {{first_name|there}}. If the timing is wrong, no reply needed.
"""


def campaign_name(group: str) -> str:
    """The campaign of one mailbox group: `sim-<group>`, in the characters a campaign name may hold."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", group.lower()).strip("-_") or "group"
    return f"sim-{slug}"[:63]


def campaign_file(group: str, pacing: str = "") -> str:
    """The campaign file of one mailbox group (a JSON string is a YAML string: any group name stays one), with
    `pacing`'s keys (YAML lines: timezone, window, daily_cap...) after the steps."""
    return CAMPAIGN_FILE.format(name=campaign_name(group), group=json.dumps(group)) + pacing


def campaign_spec(group: str, groups: Sequence[str], pacing: str = "") -> tuple[CampaignSpec, str]:
    """The checked campaign of `group` and its file's text (read by the campaign file's own loader)."""
    text = campaign_file(group, pacing)
    return load_campaign(Path(f"<simulation campaign {campaign_name(group)}>"), set(groups), text=text), text


@dataclass
class LeadFeed:
    """Leads joining the campaigns as the simulated days go: they come in one by one and are imported in batches,
    as many as keep fewer than `backlog_limit` leads of their time zone with a step due and unsent (the others are
    turned away), as a person stops importing when the senders fall behind. Counted by time zone because each zone's
    leads wait for their own window: New York's leads waiting for their morning do not stop Berlin's, whose window is
    open. Counting the follow-ups due, not only the first steps,
    keeps the campaign's demand within what the mailboxes may send (each lead asks for three sends), so the
    follow-ups, queued by the ledger in the same line as first steps, are not buried under new leads. A follow-up
    waiting for a mailbox that has reached its day's cap is not counted: it waits whatever is imported, and the
    other mailboxes can take new leads meanwhile.

    The feed keeps its own account of when each lead's next step comes due (from the sends and the reactions it is
    told of), for this decision only: what is sent, and when, is the ledger's."""

    campaigns: Campaigns
    specs: dict[str, CampaignSpec]  # mailbox group -> its campaign
    rng: random.Random
    backlog_limit: int
    plan: CampaignPlan = DEFAULT_PLAN
    arrived: int = 0  # leads come in since the last import
    turned_away: int = 0
    turned_away_closed: int = 0  # of them, leads whose sending window was closed when they came to be imported
    addresses: list[str] = field(default_factory=list)  # every lead added, in order
    _next_due: dict[str, float] = field(default_factory=dict)  # lead -> when its next step comes due
    _sent: Counter[str] = field(default_factory=Counter)  # lead -> its steps sent
    _group_of: dict[str, str] = field(default_factory=dict)  # lead -> the group of its campaign
    _mailbox_of: dict[str, str] = field(default_factory=dict)  # lead -> the mailbox that sent its steps
    _full: set[str] = field(default_factory=set)  # mailboxes whose last send reached their day's cap
    timezone_of: dict[str, str] = field(default_factory=dict)  # lead -> its `timezone` column, as imported
    # group -> the time zones of its mailboxes, in the inventory's order: its leads' zones when the plan names none
    zones: Mapping[str, Sequence[str]] = field(default_factory=dict)
    _arrivals: Counter[str] = field(default_factory=Counter)  # group -> leads come in for it (their zones' turn)

    @classmethod
    def start(cls, ledger: Ledger, groups: Sequence[str], rng: random.Random, backlog_limit: int,
              plan: CampaignPlan = DEFAULT_PLAN, now: float = 0.0,
              zones: Mapping[str, Sequence[str]] | None = None) -> LeadFeed:
        """Apply and start one campaign per mailbox group (each the same steps, with the plan's pacing keys), and
        import the lists the plan uploads at the start (`now`). `zones`: each group's mailboxes' time zones."""
        campaigns = Campaigns(ledger)
        specs = {}
        for group in groups:
            spec, text = campaign_spec(group, groups, plan.of(group).pacing)
            campaigns.apply(spec, text)
            campaigns.move(spec.name, Move.START)
            specs[group] = spec
        feed = cls(campaigns, specs, rng, backlog_limit, plan, zones=dict(zones or {}))
        for group in sorted(specs):
            listed = [feed._new_lead(group, now) for _lead in range(plan.of(group).list_size)]
            if listed:
                campaigns.add_leads(specs[group].name, listed)
        return feed

    def backlog(self, now: float) -> Counter[str]:
        """Leads whose next step is due and not sent yet, by the lead's time zone, but for follow-ups waiting for a
        mailbox that is full."""
        return Counter(self.timezone_of[lead] for lead, due in self._next_due.items()
                       if due <= now and self._mailbox_of.get(lead) not in self._full)

    def arrive(self) -> None:
        """A lead came in; it waits for the next import."""
        self.arrived += 1

    def import_arrived(self, now: float) -> int:
        """Import the leads that came in since the last import, each while fewer than the backlog's limit of its
        time zone wait (the others are turned away), in one `add-leads` per campaign; how many were added."""
        waiting = self.backlog(now)
        by_group: dict[str, list[Lead]] = {}
        for _lead in range(self.arrived):
            group = self.rng.choice(sorted(self.specs))
            self._arrivals[group] += 1
            timezone = self.plan.of(group).lead_timezone or self._zone_in_turn(group, self._arrivals[group])
            if waiting[timezone] >= self.backlog_limit:
                self.turned_away += 1
                self.turned_away_closed += not self._window_open(group, timezone, now)
                continue
            waiting[timezone] += 1
            by_group.setdefault(group, []).append(self._new_lead(group, now, timezone))
        self.arrived = 0
        for group, leads in sorted(by_group.items()):
            self.campaigns.add_leads(self.specs[group].name, leads)
        return sum(len(leads) for leads in by_group.values())

    def _window_open(self, group: str, timezone: str, now: float) -> bool:
        """Whether `group`'s campaign's window is open `now` for a lead in `timezone`."""
        spec = self.specs[group]
        schedule = Schedule.of(spec.pacing)
        tz = zone(timezone, spec.pacing.timezone)
        return schedule is None or schedule.is_open(datetime.fromtimestamp(now, tz), tz)

    def _new_lead(self, group: str, now: float, timezone: str | None = None) -> Lead:
        """The next lead of `group`'s campaign, its first step due `now` (added to the ledger by the caller), in
        `timezone` (None: the plan's, else its group's mailboxes' in turn)."""
        first_name = self.rng.choice(FIRST_NAMES)
        number = len(self.addresses) + 1
        ref = f"lead-{number}"
        address = f"{ref}@{LEAD_DOMAIN}"
        fields = {"first_name": first_name} if first_name else {}
        timezone = timezone or self.plan.of(group).lead_timezone or self._zone_in_turn(group, number)
        self.addresses.append(address)
        self._next_due[address] = now
        self._group_of[address] = group
        self.timezone_of[address] = timezone
        return Lead(number, address, ref, timezone, fields)

    def _zone_in_turn(self, group: str, number: int) -> str:
        """Lead `number`'s time zone when the plan names none: its group's mailboxes' zones in turn (UTC: none)."""
        zones = list(dict.fromkeys(self.zones.get(group, ()))) or ["UTC"]
        return zones[(number - 1) % len(zones)]

    def sent(self, address: str, mailbox: str, full: bool, now: float) -> None:
        """A step went to `address` from `mailbox` (`full`: that send reached the mailbox's cap for its day): the
        lead's next step comes due after its delay, or its sequence is complete."""
        self._mailbox_of[address] = mailbox
        if full:
            self._full.add(mailbox)
        else:
            self._full.discard(mailbox)  # a new day of its own
        self._sent[address] += 1
        done = self._sent[address]
        steps = self.specs[self._group_of[address]].steps
        if done < len(steps):
            self._next_due[address] = now + steps[done].delay_s
        else:
            self._next_due.pop(address, None)

    def held(self, address: str, day: date) -> None:
        """An out-of-office holds the lead: its next step comes due no earlier than the start of `day` on its clock
        (the lead's time zone, else its campaign's), as the ledger holds it (sender_hold)."""
        if address in self._next_due:
            spec = self.specs[self._group_of[address]]
            start = datetime.combine(day, time(), tzinfo=zone(self.timezone_of.get(address), spec.pacing.timezone))
            self._next_due[address] = max(self._next_due[address], start.timestamp())

    def ended(self, address: str) -> None:
        """The lead's sequence ended (a reply, a bounce, an unsubscribe): nothing more comes due."""
        self._next_due.pop(address, None)

    def status(self) -> list[CampaignStatus]:
        """`campaign status` of every campaign, read from the ledger."""
        found = [self.campaigns.status(spec.name) for spec in sorted(self.specs.values(), key=lambda s: s.name)]
        return [status for status in found if status is not None]


@dataclass(frozen=True)
class SequenceRow:
    """One step of one lead as the ledger holds it at the end of the run (`sendhost lead show`'s rows)."""

    campaign: str
    address: str  # the lead's
    step: int
    status: str
    mailbox: str | None  # the mailbox that sent it (None: not sent)
    message_id: str | None
    accepted_at: float | None  # when the submission server accepted it (epoch seconds; None: never)
    ended: str | None  # the lead's sequence's end reason (None: still going)
    ended_at: float | None


def sequence_rows(ledger: Ledger, addresses: Sequence[str]) -> list[SequenceRow]:
    """Every row of every lead in `addresses`, through the ledger's `lead show` query."""
    rows = []
    for address in addresses:
        for row in ledger.lead_rows(address):
            if row["step"] is None:
                continue  # a lead without rows (none in the simulation: each gets its first step at once)
            rows.append(SequenceRow(
                str(row["name"]), str(row["address"]), int(row["step"]), str(row["status"]), row["mailbox"],
                row["message_id"], _epoch(row["accepted_at"]), row["ended"], _epoch(row["ended_at"])))
    return rows


def _epoch(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()
