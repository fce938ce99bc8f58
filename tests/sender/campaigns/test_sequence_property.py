"""The sequence rules of the ledger under any interleaving (issue 24, "Must hold"): a hypothesis state machine drives
the ledger's functions as agents and people would (claim, begin_attempt, record_sent or settle with each outcome,
unclaim, the sweep; replies, bounces and unsubscribes; a person suppressing an address, resolving an unconfirmed
row, pausing, resuming or stopping the campaign; the clock moving) over three leads of a three-step campaign file
and one lead whose three steps were enqueued ahead, and checks after every step:

- from the ledger's own record (sender_events, sender_send_log): no step was handed over (its attempt started)
  while its lead's sequence had ended, every step handed over after its predecessor was sent, each later step
  from the mailbox that sent the lead's first;
- as each call answers: no step is claimed before it is due (its predecessor sent, its campaign running, its lead
  going on), a claim naming mailboxes gets no step pinned to another, a handover from another mailbox is refused;
- the sequence's end reason is the one the rules give (sender_leads.ended).

Each example runs in one transaction rolled back at its end, on a database set up once per test: every example
starts from the same committed state whatever the last one did, without a list of tables to clear that a new
table would escape, and without the schema built again per example (which costs more than the example).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import psycopg.errors
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from sender import Ledger, Settle
from sender.ledger.campaigns import Campaigns, Move
from sender.ledger.events import Event, Feedback
from tests.sender.sequences import DAY_S, set_up_campaign
from tests.support.clock import FakeClock

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC).timestamp()
BOXES = ("box-a@sender.example", "box-b@sender.example")
CAMPAIGN = "p"
FILE_LEADS = ("ann@rcpt.example", "bob@rcpt.example", "cat@rcpt.example")
ENQUEUED, ENQUEUED_TO = "E1", "eve@rcpt.example"  # a lead of `sender enqueue`, its three steps queued ahead
STEPS = 3
FEEDBACK = {Event.REPLIED: "replied", Event.BOUNCED: "bounced", Event.UNSUBSCRIBED: "unsubscribed"}
ENDS_THAT_SAY_LESS = {"completed", "unconfirmed"}  # what a reply, bounce or unsubscribe still replaces
EXAMPLES, STEPS_PER_EXAMPLE = 80, 50
# Whether an act that ends sequences happens when its rule is drawn: about one time in eight, so that examples also
# reach the later steps instead of ending every sequence in their first moves. (Not n == 0: hypothesis draws the
# ends of a range more often than the rest.)
RARELY = st.integers(0, 7).map(lambda n: n == 5)
# How the machine names a lead in SQL, `l` its sender_leads row: as Lead.key does.
KEY = "coalesce(l.lead, l.address)"


@dataclass
class Ended:
    """A time the lead's sequence was over, in event ids: after `after`, and (an unconfirmed end a person resolved
    as sent) until `reopened_after`."""

    after: int
    reopened_after: int | None = None

    def covers(self, event_id: int) -> bool:
        return event_id > self.after and (self.reopened_after is None or event_id <= self.reopened_after)


@dataclass
class Lead:
    """What the rules say of one lead so far."""

    key: str  # its caller's id (the enqueued lead), else its address (the file's leads have no id): KEY
    address: str
    from_file: bool  # a campaign file's lead (its sequence completes), else an enqueued one
    ended: str | None = None
    sent: set[int] = field(default_factory=set)
    ends: list[Ended] = field(default_factory=list)


@dataclass
class Held:
    """A row claimed by the machine's agent: its lead, step, pin, and whether its attempt started."""

    lead: str
    step: int
    pinned: str | None
    started: bool = False


def _guarded(ranks: dict[str, int], old: str, new: str) -> str:
    """sender_guarded_status: once handed over, a row's status only moves up."""
    return old if ranks[old] >= ranks["sent"] and ranks[new] < ranks[old] else new


def sequence_machine(conn: psycopg.Connection[Any], url: str) -> Callable[[], RuleBasedStateMachine]:
    """A factory of machines over `conn`, each example inside a transaction it rolls back."""
    ranks = {str(status): rank for status, rank in conn.execute("SELECT * FROM sender_status_ranks()").fetchall()}
    refs = itertools.count()

    class Sequences(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self._transaction = conn.transaction(force_rollback=True)
            self._transaction.__enter__()
            # The claim's turns (follow-ups first) come from a sequence, which a rollback does not undo: start every
            # example at the first turn, or the same steps replayed claim other kinds and hypothesis sees the
            # examples' draws change under it.
            conn.execute("SELECT setval('sender_claim_turns', 1, false)")
            self.clock = FakeClock(START)
            self.ledger = Ledger(conn, url, clock=self.clock)
            self.feedback = Feedback(self.ledger)
            self.leads = {a: Lead(a, a, True) for a in FILE_LEADS}
            self.leads[ENQUEUED] = Lead(ENQUEUED, ENQUEUED_TO, False)
            self.held: dict[int, Held] = {}
            self.state = "running"

        def teardown(self) -> None:
            self._transaction.__exit__(None, None, None)

        # --- what the rules say --------------------------------------------------------------------------------

        def _last_event(self) -> int:
            (last,) = conn.execute("SELECT coalesce(max(id), 0) FROM sender_events").fetchone() or (0,)
            return int(last)

        def _end(self, lead: Lead, reason: str) -> None:
            if lead.ended is None:
                lead.ended = reason
                lead.ends.append(Ended(self._last_event()))
            elif lead.ended in ENDS_THAT_SAY_LESS and reason in FEEDBACK.values():
                lead.ended = reason

        def _sent(self, lead: Lead, step: int) -> None:
            lead.sent.add(step)
            if lead.ended is not None:
                return
            # A step sent to an address suppressed while it was in flight queues nothing more: its sequence ends
            # as suppressed, its last step's too (version 14, sender_advance).
            (suppressed,) = conn.execute("SELECT sender_is_suppressed(%s)", (lead.address,)).fetchone() \
                or (False,)
            if suppressed:
                self._end(lead, "suppressed")
            elif lead.from_file and step == STEPS:
                self._end(lead, "completed")

        def _status(self, row: int) -> str:
            (status,) = conn.execute("SELECT status::text FROM sender_emails WHERE id = %s", (row,)).fetchone() \
                or ("",)
            return str(status)

        def _rows(self, where: str) -> list[tuple[int, str, int]]:
            return [(int(i), str(lead), int(step)) for i, lead, step in conn.execute(
                f"SELECT e.id, {KEY}, e.step FROM sender_emails e JOIN sender_leads l ON l.id = e.lead_id "
                f"WHERE e.campaign_id IN (SELECT id FROM sender_campaigns WHERE name IN ('{CAMPAIGN}', 'enqueue')) "
                f"AND e.{where} ORDER BY e.id").fetchall()]

        # --- an agent ------------------------------------------------------------------------------------------

        @rule(mailbox=st.sampled_from([*BOXES, None]))
        def claim(self, mailbox: str | None) -> None:
            self._claim(mailbox)

        def _claim(self, mailbox: str | None) -> int | None:
            """Claim one due row as an agent having `mailbox` (None: any) would; its id."""
            for row in self.ledger.claim("w", 1, ["sales"], [mailbox] if mailbox else None):
                key = row.lead or row.address  # as KEY
                lead = self.leads[key]
                assert lead.ended is None, f"{key} step {row.step} claimed after its sequence ended"
                assert row.step == 1 or row.step - 1 in lead.sent, f"{key} step {row.step} due before its step"
                assert not lead.from_file or self.state == "running", f"{key}: claimed, campaign {self.state}"
                assert mailbox is None or row.pinned_mailbox in (None, mailbox), "claimed for another mailbox"
                assert row.attempt_id is None
                self.held[row.id] = Held(key, row.step, row.pinned_mailbox)
                return row.id
            return None

        @rule(mailbox=st.sampled_from(BOXES), rows=st.integers(1, 3), names_its_mailbox=st.booleans())
        def agent_sends(self, mailbox: str, rows: int, names_its_mailbox: bool) -> None:
            """The whole send path of a few rows, as an agent with `mailbox` takes it when nothing goes wrong; one
            that claims without naming its mailbox is refused a follow-up pinned to another, and gives it back."""
            for _ in range(rows):
                row = self._claim(mailbox if names_its_mailbox else None)
                if row is None:
                    continue
                if self._begin(row, mailbox):
                    self._record(row)
                elif row in self.held:
                    self.held.pop(row)
                    self.ledger.unclaim(row, 0.0, f"not {mailbox}'s to send")

        @precondition(lambda self: any(not h.started for h in self.held.values()))
        @rule(data=st.data(), mailbox=st.sampled_from(BOXES))
        def begin(self, data: st.DataObject, mailbox: str) -> None:
            self._begin(data.draw(st.sampled_from(sorted(i for i, h in self.held.items() if not h.started))), mailbox)

        def _begin(self, row: int, mailbox: str) -> bool:
            """Start the attempt of held row `row` from `mailbox`; whether it started."""
            held = self.held[row]
            lead = self.leads[held.lead]
            message_id = f"<{row}-{next(refs)}@sender.example>"
            if held.pinned is not None and held.pinned != mailbox:
                with pytest.raises(psycopg.errors.RaiseException, match="goes from mailbox"), conn.transaction():
                    self.ledger.begin_attempt(row, uuid.uuid4(), mailbox, None, message_id, "s")
                return False
            outcome, _ = self.ledger.begin_attempt(row, uuid.uuid4(), mailbox, None, message_id, "s")
            if outcome == "ok":
                assert lead.ended is None, f"{held.lead} step {held.step} handed over after its sequence ended"
                assert held.step == 1 or held.step - 1 in lead.sent
                held.started = True
                return True
            del self.held[row]
            if outcome == "ended":
                assert lead.ended is not None, f"{held.lead}: the ledger says ended, the rules do not"
            elif outcome == "suppressed":
                self._end(lead, "suppressed")
            return False

        @precondition(lambda self: any(h.started for h in self.held.values()))
        @rule(data=st.data())
        def record_sent(self, data: st.DataObject) -> None:
            self._record(data.draw(st.sampled_from(sorted(i for i, h in self.held.items() if h.started))))

        def _record(self, row: int) -> None:
            held = self.held.pop(row)
            self.ledger.record_sent(row, "250 2.0.0 OK")
            self._sent(self.leads[held.lead], held.step)

        @precondition(lambda self: any(h.started for h in self.held.values()))
        @rule(data=st.data(), outcome=st.sampled_from(Settle), delay_s=st.sampled_from([0.0, 1800.0]))
        def settle(self, data: st.DataObject, outcome: Settle, delay_s: float) -> None:
            row = data.draw(st.sampled_from(sorted(i for i, h in self.held.items() if h.started)))
            held = self.held.pop(row)
            status = str(self.ledger.settle(row, outcome, f"{outcome} by the test", delay_s))
            if status in ("failed", "suppressed", "unconfirmed"):
                self._end(self.leads[held.lead], status)

        @precondition(lambda self: any(not h.started for h in self.held.values()))
        @rule(data=st.data(), delay_s=st.sampled_from([0.0, 300.0]))
        def unclaim(self, data: st.DataObject, delay_s: float) -> None:
            row = data.draw(st.sampled_from(sorted(i for i, h in self.held.items() if not h.started)))
            held = self.held.pop(row)
            if self.ledger.unclaim(row, delay_s, "no mailbox free") and self._status(row) == "suppressed":
                self._end(self.leads[held.lead], "suppressed")

        @rule()
        def sweep(self) -> None:
            self.ledger.sweep(0)
            for row, held in list(self.held.items()):
                status = self._status(row)
                if status == "sending":
                    continue
                del self.held[row]
                if status in ("unconfirmed", "suppressed"):
                    self._end(self.leads[held.lead], status)

        # --- the world and people ------------------------------------------------------------------------------

        @rule(seconds=st.sampled_from([1800.0, 3 * DAY_S, 4 * DAY_S]))
        def time_passes(self, seconds: float) -> None:
            self.clock.advance(seconds)

        @precondition(lambda self: bool(self._rows("message_id IS NOT NULL")))
        @rule(data=st.data(), event=st.sampled_from(list(FEEDBACK)), now=RARELY)
        def feedback_arrives(self, data: st.DataObject, event: Event, now: bool) -> None:
            if not now:
                return
            row, key, _step = data.draw(st.sampled_from(self._rows("message_id IS NOT NULL")))
            lead = self.leads[key]
            before = self._status(row)
            self.feedback.apply(row, event, source="inbox", ref=f"ref-{next(refs)}")
            if _guarded(ranks, before, FEEDBACK[event]) != before:  # the row's status moved: the sequence ends
                self._end(lead, FEEDBACK[event])
            # (a bounce or an unsubscribe also suppresses the address, withdrawing the lead's rows not handed over
            # yet: its end withdrew them already, or it had ended before)

        @rule(address=st.sampled_from([*FILE_LEADS, ENQUEUED_TO]), now=RARELY)
        def person_suppresses(self, address: str, now: bool) -> None:
            if not now:
                return
            if self.ledger.suppress(address, "asked by the person"):  # rows withdrawn: the sequence ends
                self._end(next(lead for lead in self.leads.values() if lead.address == address), "suppressed")

        @precondition(lambda self: bool(self._rows("status = 'unconfirmed'")))
        @rule(data=st.data(), sent=st.booleans())
        def person_resolves(self, data: st.DataObject, sent: bool) -> None:
            row, key, step = data.draw(st.sampled_from(self._rows("status = 'unconfirmed'")))
            lead = self.leads[key]
            assert self.ledger.resolve(row, sent=sent, note="looked in Sent") == "resolved"
            if not sent:
                if lead.ended == "unconfirmed":
                    lead.ended = "failed"
                return
            if lead.ended == "unconfirmed":  # known sent now: the sequence goes on
                lead.ended = None
                lead.ends[-1].reopened_after = self._last_event()
            self._sent(lead, step)

        @precondition(lambda self: self.state in ("running", "paused"))
        @rule()
        def person_pauses_or_resumes(self) -> None:
            move = Move.PAUSE if self.state == "running" else Move.RESUME
            self.state = str(Campaigns(self.ledger).move(CAMPAIGN, move))

        # once the sequences had time to go some way: a campaign stopped at once only ever sent step 1
        @precondition(lambda self: self.state in ("running", "paused") and self.clock() >= START + 7 * DAY_S)
        @rule(now=RARELY)
        def person_stops_the_campaign(self, now: bool) -> None:
            if not now:
                return
            self.state = str(Campaigns(self.ledger).move(CAMPAIGN, Move.STOP))
            for lead in self.leads.values():
                if lead.from_file:
                    self._end(lead, "stopped")

        # --- what the ledger recorded --------------------------------------------------------------------------

        @invariant()
        def handovers_follow_the_rules(self) -> None:
            sent: dict[str, set[int]] = {key: set() for key in self.leads}
            for event_id, key, step, kind, detail in conn.execute(
                    f"SELECT e.id, {KEY}, r.step, e.kind, e.detail FROM sender_events e "
                    "JOIN sender_emails r ON r.id = e.email_id JOIN sender_leads l ON l.id = r.lead_id "
                    "WHERE e.kind IN ('attempt', 'sent', 'resolved') "
                    "ORDER BY e.id").fetchall():
                if kind == "sent" or (kind == "resolved" and detail.startswith("sent by a person")):
                    sent[key].add(step)
                    continue
                if kind != "attempt":
                    continue
                assert step == 1 or step - 1 in sent[key], f"{key} step {step} handed over before its step was sent"
                assert not any(ended.covers(event_id) for ended in self.leads[key].ends), \
                    f"{key} step {step} handed over after its sequence ended"
            logged = {(str(k), int(s)) for k, s in conn.execute(
                f"SELECT {KEY}, r.step FROM sender_send_log g JOIN sender_emails r ON r.id = g.email_id "
                "JOIN sender_leads l ON l.id = r.lead_id").fetchall()}
            assert logged == {(key, step) for key, lead in self.leads.items() for step in lead.sent}
            first: dict[str, str] = {}
            for key, step, mailbox in conn.execute(
                    f"SELECT {KEY}, e.step, lower(e.mailbox) FROM sender_emails e JOIN sender_leads l "
                    f"ON l.id = e.lead_id WHERE e.mailbox IS NOT NULL ORDER BY 1, 2").fetchall():
                first.setdefault(key, mailbox)
                assert step == 1 or mailbox == first[key], f"{key} step {step} from {mailbox}, step 1 {first[key]}"

        @invariant()
        def sequences_end_for_the_rules_reasons(self) -> None:
            ended = dict(conn.execute(f"SELECT {KEY}, ended FROM sender_leads l WHERE campaign_id IN "
                                      f"(SELECT id FROM sender_campaigns WHERE name IN ('{CAMPAIGN}', 'enqueue'))"
                                      ).fetchall())
            assert ended == {key: lead.ended for key, lead in self.leads.items()}

    return Sequences


@pytest.fixture
def prepared(tmp_path: Path, database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """The committed start of every example: the campaign file's leads with step 1 due, the enqueued lead's three
    steps queued ahead (2 and 3 waiting)."""
    with Ledger.from_url(database_url, clock=FakeClock(START)) as ledger:
        ledger.migrate()
        set_up_campaign(tmp_path, ledger, CAMPAIGN, [(a, "", "") for a in FILE_LEADS])
        for step in range(1, STEPS + 1):
            ledger.enqueue(lead=ENQUEUED, step=step, address=ENQUEUED_TO, group="sales", subject=f"Step {step}",
                           text="x")
    with psycopg.connect(database_url, autocommit=True) as conn:
        yield conn


def test_any_interleaving_hands_over_no_step_after_its_end_and_each_after_its_predecessor(
        prepared: psycopg.Connection[Any], database_url: str) -> None:
    run_state_machine_as_test(sequence_machine(prepared, database_url),
                              settings=settings(max_examples=EXAMPLES, stateful_step_count=STEPS_PER_EXAMPLE,
                                                deadline=None, suppress_health_check=[HealthCheck.too_slow]))
