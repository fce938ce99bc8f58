"""The sequence rules of the ledger (issue 24), driven through its functions on a clock of the test's own:
step N+1 is created when step N is sent, due its delay after the send, from the same mailbox; anything that ends
a step unsent, and any reply, bounce or unsubscribe, ends the lead's sequence; a person at psql meets the same
rules."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from sender import Ledger, Settle
from sender.campaigns.leads import read_leads
from sender.campaigns.spec import CampaignSpec, load_campaign
from sender.ledger.campaigns import Campaigns, LeadOutcome, Move, State
from sender.ledger.events import Event, Feedback
from tests.support.clock import FakeClock

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC).timestamp()
BOX = "box1@sender.example"

CAMPAIGN = """\
name: {name}
group: sales
fields: [first_name]
steps:
  - subject: "Hello {{first_name|there}}"
    body: "Hi {{first_name|there}}"
  - delay: 3d
    body: "Following up"
  - delay: 4d
    body: "Last one"
"""


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


def _campaign(tmp_path: Path, ledger: Ledger, name: str = "q1", addresses: tuple[str, ...] = ("eve@rcpt.example",),
              start: bool = True, extra: str = "") -> CampaignSpec:
    path = tmp_path / f"{name}.yml"
    path.write_text(CAMPAIGN.format(name=name) + extra)
    spec = load_campaign(path, {"sales"})
    campaigns = Campaigns(ledger)
    campaigns.apply(spec, path.read_text())
    leads = tmp_path / f"{name}.csv"
    leads.write_text("address,first_name\n" + "".join(f"{a},Eve\n" for a in addresses))
    campaigns.add_leads(name, read_leads(leads, spec).leads)
    if start:
        campaigns.move(name, Move.START)
    return spec


def _send(ledger: Ledger, mailbox: str = BOX) -> int:
    """Claim the one due row and record it sent through `mailbox`; its id."""
    (row,) = ledger.claim("w", 1, ["sales"], [mailbox])
    outcome, _mid = ledger.begin_attempt(row.id, uuid.uuid4(), mailbox, None, f"<{uuid.uuid4()}@sender.example>",
                                         "subject")
    assert outcome == "ok"
    assert ledger.record_sent(row.id, "250 ok")
    return row.id


def _rows(database_url: str) -> list[tuple[int, str, datetime, str | None]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT step, status::text, not_before, pinned_mailbox FROM sender_emails "
                            "WHERE campaign_id <> 1 ORDER BY lead_id, step").fetchall()


def _ended(database_url: str, address: str = "eve@rcpt.example") -> str | None:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT ended FROM sender_leads WHERE address = %s AND campaign_id <> 1",
                           (address,)).fetchone()
    return row[0] if row else None


def test_step_two_is_created_when_step_one_is_sent_due_its_delay_after_the_send(
        tmp_path: Path, timed: Ledger, clock: FakeClock, database_url: str) -> None:
    _campaign(tmp_path, timed)
    clock.advance(3600)  # sent an hour after it was queued: the delay counts from the send
    _send(timed)
    sent_at = datetime.fromtimestamp(clock.now_s, UTC)
    assert _rows(database_url) == [(1, "sent", datetime.fromtimestamp(START, UTC), None),
                                   (2, "queued", sent_at + timedelta(days=3), BOX)]
    clock.advance(3 * 86400 - 1)
    assert timed.claim("w", 1, ["sales"], [BOX]) == []
    clock.advance(1)
    assert timed.claim("w", 1, ["sales"], ["box2@sender.example"]) == []  # pinned to the mailbox of step 1
    (second,) = timed.claim("w", 1, ["sales"], [BOX])
    assert (second.step, second.pinned_mailbox, second.own_subject) == (2, BOX, False)
    assert [mid for _subject, mid in second.earlier] and second.earlier[0][0] == "subject"
    assert second.fields == {"first_name": "Eve"}


def test_a_follow_up_waits_while_its_step_retries(tmp_path: Path, timed: Ledger, clock: FakeClock,
                                                  database_url: str) -> None:
    _campaign(tmp_path, timed)
    (row,) = timed.claim("w", 1, ["sales"], [BOX])
    timed.begin_attempt(row.id, uuid.uuid4(), BOX, None, "<a@sender.example>", "s")
    timed.settle(row.id, Settle.RETRY, "451 4.3.0 try later", 1800)
    assert [r[:2] for r in _rows(database_url)] == [(1, "retry")]  # no step 2 while step 1 waits
    clock.advance(1800)
    _send(timed)
    assert [r[:2] for r in _rows(database_url)] == [(1, "sent"), (2, "queued")]
    assert _rows(database_url)[1][2] == datetime.fromtimestamp(clock.now_s, UTC) + timedelta(days=3)


@pytest.mark.parametrize("ending", [Settle.FAILED, Settle.UNCONFIRMED, Settle.SUPPRESS])
def test_a_step_that_ends_unsent_ends_the_sequence(tmp_path: Path, timed: Ledger, database_url: str,
                                                   ending: Settle) -> None:
    _campaign(tmp_path, timed)
    (row,) = timed.claim("w", 1, ["sales"], [BOX])
    timed.begin_attempt(row.id, uuid.uuid4(), BOX, None, "<a@sender.example>", "s")
    status = timed.settle(row.id, ending, "550 5.7.1 no")
    assert [r[:2] for r in _rows(database_url)] == [(1, str(status))]
    assert _ended(database_url) == str(status)


@pytest.mark.parametrize("event", [Event.REPLIED, Event.BOUNCED, Event.UNSUBSCRIBED])
def test_a_reply_bounce_or_unsubscribe_ends_the_sequence_with_its_steps_not_yet_due(
        tmp_path: Path, timed: Ledger, clock: FakeClock, database_url: str, event: Event) -> None:
    _campaign(tmp_path, timed)
    first = _send(timed)
    Feedback(timed).apply(first, event, source="inbox", ref="r1")
    assert [r[:2] for r in _rows(database_url)] == [(1, event.value), (2, "cancelled")]  # ended before suppressed
    assert _ended(database_url) == event.value
    clock.advance(30 * 86400)
    assert timed.claim("w", 5, ["sales"], [BOX]) == []


def test_the_last_step_sent_completes_the_sequence_and_a_later_reply_says_why_it_ended(
        tmp_path: Path, timed: Ledger, clock: FakeClock, database_url: str) -> None:
    _campaign(tmp_path, timed)
    ids = []
    for delay in (0, 3, 4):
        clock.advance(delay * 86400)
        ids.append(_send(timed))
    assert _ended(database_url) == "completed"
    Feedback(timed).apply(ids[0], Event.REPLIED, source="inbox", ref="late")
    assert _ended(database_url) == "replied"


def test_a_person_at_psql_cannot_make_a_follow_up_due_before_its_step(tmp_path: Path, timed: Ledger,
                                                                      database_url: str) -> None:
    timed.enqueue(lead="L1", step=1, address="a@rcpt.example", group="sales", subject="Hi", text="x")
    assert timed.enqueue(lead="L1", step=2, address="a@rcpt.example", group="sales", subject="Again",
                         text="x").value == "waiting"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE sender_emails SET status = 'queued' WHERE step = 2")
        conn.execute("INSERT INTO sender_emails (campaign_id, lead_id, step, address, mailbox_group, subject, body) "
                     "SELECT campaign_id, id, 3, 'a@rcpt.example', 'sales', 's', 'b' FROM sender_leads "
                     "WHERE lead = 'L1'")
        statuses = conn.execute("SELECT step, status::text FROM sender_emails ORDER BY step").fetchall()
    assert statuses == [(1, "queued"), (2, "waiting"), (3, "waiting")]


def test_a_follow_up_a_person_marks_sending_is_not_handed_over_before_its_step(timed: Ledger,
                                                                               database_url: str) -> None:
    """The due guard sees rows made due (queued, retry); one forced straight to `sending` at psql is stopped by the
    attempt's start, which checks the previous step again, and waits for it."""
    timed.enqueue(lead="L1", step=1, address="a@rcpt.example", group="sales", subject="Hi", text="x")
    timed.enqueue(lead="L1", step=2, address="a@rcpt.example", group="sales", subject="Again", text="x")
    with psycopg.connect(database_url, autocommit=True) as conn:
        (row,) = conn.execute("UPDATE sender_emails SET status = 'sending' WHERE step = 2 "
                              "RETURNING id").fetchone() or (0,)
    assert timed.begin_attempt(row, uuid.uuid4(), BOX, None, "<a@sender.example>", "s") == ("lost", None)
    with psycopg.connect(database_url) as conn:
        statuses = conn.execute("SELECT step, status::text, attempts FROM sender_emails ORDER BY step").fetchall()
    assert statuses == [(1, "queued", 0), (2, "waiting", 0)]


def test_an_enqueued_step_after_a_reply_is_refused(timed: Ledger) -> None:
    timed.enqueue(lead="L1", step=1, address="a@rcpt.example", group="sales", subject="Hi", text="x")
    first = _send(timed)
    Feedback(timed).apply(first, Event.REPLIED, source="inbox", ref="r")
    assert timed.enqueue(lead="L1", step=2, address="a@rcpt.example", group="sales", subject="Again",
                         text="x").value == "ended"


def test_an_enqueued_follow_up_is_released_by_its_steps_send_and_pinned_to_its_mailbox(timed: Ledger,
                                                                                       clock: FakeClock) -> None:
    timed.enqueue(lead="L1", step=1, address="a@rcpt.example", group="sales", subject="Hi", text="x")
    timed.enqueue(lead="L1", step=2, address="a@rcpt.example", group="sales", subject="Again", text="y")
    clock.advance(60)
    _send(timed, "Box3@Sender.example")
    assert timed.claim("w", 1, ["sales"], [BOX]) == []
    (second,) = timed.claim("w", 1, ["sales"], ["box3@sender.example"])
    assert (second.step, second.pinned_mailbox) == (2, "box3@sender.example")


def test_the_same_person_in_two_campaigns_has_one_active_sequence(tmp_path: Path, timed: Ledger) -> None:
    _campaign(tmp_path, timed, "one", ("eve@bigco.example",))
    spec = _campaign(tmp_path, timed, "two", ("frank@bigco.example",), start=False)
    leads = tmp_path / "again.csv"
    leads.write_text("address,first_name\nEve@Bigco.example,Eve\nfrank@bigco.example,Frank\ngrace@bigco.example,G\n")
    added = Campaigns(timed).add_leads("two", read_leads(leads, spec).leads)
    assert added.counts == {LeadOutcome.ADDED: 1, LeadOutcome.ALREADY: 1, LeadOutcome.SUPPRESSED: 0,
                            LeadOutcome.OTHER_CAMPAIGN: 1}
    assert added.first_lines[LeadOutcome.OTHER_CAMPAIGN] == 2


def _enqueue(ledger: Ledger, lead: str, to: str, step: int = 1, **allow: bool) -> str:
    return ledger.enqueue(lead=lead, step=step, address=to, group="sales", subject="Hi", text="x", **allow).value


def test_the_same_person_under_two_enqueued_lead_ids_has_one_active_sequence(timed: Ledger,
                                                                             database_url: str) -> None:
    """One active sequence per address on `sender enqueue` too (issue 40): a CRM's two ids of one person."""
    assert _enqueue(timed, "crm-1", "ana@rcpt.example") == "queued"
    assert _enqueue(timed, "crm-2", "Ana@RCPT.example") == "same_person"
    assert _enqueue(timed, "crm-2", "ana@rcpt.example", step=2) == "same_person"  # nor any later step of it
    assert _enqueue(timed, "crm-1", "ana@rcpt.example", step=2) == "waiting"  # the first lead goes on
    assert _enqueue(timed, "crm-3", "ana@rcpt.example", allow_same_person=True) == "queued"
    assert _enqueue(timed, "crm-3", "ana@rcpt.example", step=2) == "waiting"  # a lead already there is no new id
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT lead FROM sender_leads ORDER BY id").fetchall() == [("crm-1",), ("crm-3",)]
        # a person at psql meets the same rule, and is told which lead holds the address
        assert conn.execute("SELECT * FROM sender_enqueue('crm-4', 1, 'ana@rcpt.example', 'sales', 's', 't', NULL)"
                            ).fetchone() == ("same_person", "crm-1")


def test_an_enqueued_lead_whose_sequence_ended_frees_its_address(timed: Ledger) -> None:
    assert _enqueue(timed, "crm-1", "ana@rcpt.example") == "queued"
    Feedback(timed).apply(_send(timed), Event.REPLIED, source="inbox", ref="r")
    assert _enqueue(timed, "crm-2", "ana@rcpt.example") == "queued"


def test_two_enqueues_at_once_add_one_lead_per_address(timed: Ledger, database_url: str) -> None:
    """New leads are added one enqueue at a time: the second waits for the first's commit and sees its lead."""
    with psycopg.connect(database_url) as first, psycopg.connect(database_url) as second:
        assert first.execute("SELECT outcome FROM sender_enqueue('crm-1', 1, 'ana@rcpt.example', 'sales', 's', 't', "
                             "NULL)").fetchone() == ("queued",)
        second.execute("SET lock_timeout = '200ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):  # it waits for the first transaction
            second.execute("SELECT outcome FROM sender_enqueue('crm-2', 1, 'ana@rcpt.example', 'sales', 's', 't', "
                           "NULL)")
        second.rollback()
        first.commit()
        assert second.execute("SELECT outcome FROM sender_enqueue('crm-2', 1, 'ana@rcpt.example', 'sales', 's', "
                              "'t', NULL)").fetchone() == ("same_person",)


def test_a_paused_campaign_sends_nothing_until_resumed(tmp_path: Path, timed: Ledger) -> None:
    _campaign(tmp_path, timed, addresses=("a@rcpt.example", "b@rcpt.example"))
    campaigns = Campaigns(timed)
    assert campaigns.move("q1", Move.PAUSE) is State.PAUSED
    assert timed.claim("w", 5, ["sales"], [BOX]) == []
    assert campaigns.move("q1", Move.RESUME) is State.RUNNING
    assert len(timed.claim("w", 5, ["sales"], [BOX])) == 2


def test_a_stopped_campaign_ends_every_sequence(tmp_path: Path, timed: Ledger, database_url: str) -> None:
    _campaign(tmp_path, timed)
    Campaigns(timed).move("q1", Move.STOP)
    assert _ended(database_url) == "stopped"
    assert [r[:2] for r in _rows(database_url)] == [(1, "cancelled")]


def test_resolving_an_unconfirmed_step_as_sent_lets_the_sequence_go_on(tmp_path: Path, timed: Ledger,
                                                                      database_url: str) -> None:
    _campaign(tmp_path, timed)
    (row,) = timed.claim("w", 1, ["sales"], [BOX])
    timed.begin_attempt(row.id, uuid.uuid4(), BOX, None, "<a@sender.example>", "s")
    timed.settle(row.id, Settle.UNCONFIRMED, "timeout after DATA")
    assert [u.id for u in timed.unconfirmed()] == [row.id]
    assert timed.resolve(row.id, sent=True, note="found in Sent") == "resolved"
    assert [r[:2] for r in _rows(database_url)] == [(1, "sent"), (2, "queued")]
    assert _ended(database_url) is None
    assert timed.resolve(row.id, sent=False, note="again") == "not_unconfirmed"


def test_resolving_an_unconfirmed_step_as_not_sent_ends_it_failed(tmp_path: Path, timed: Ledger,
                                                                 database_url: str) -> None:
    _campaign(tmp_path, timed)
    (row,) = timed.claim("w", 1, ["sales"], [BOX])
    timed.begin_attempt(row.id, uuid.uuid4(), BOX, None, "<a@sender.example>", "s")
    timed.settle(row.id, Settle.UNCONFIRMED, "timeout after DATA")
    timed.resolve(row.id, sent=False, note="not in Sent")
    assert [r[:2] for r in _rows(database_url)] == [(1, "failed")]
    assert _ended(database_url) == "failed"


def test_an_address_suppressed_while_its_step_was_in_flight_gets_no_follow_up(tmp_path: Path, timed: Ledger,
                                                                              database_url: str) -> None:
    _campaign(tmp_path, timed)
    (row,) = timed.claim("w", 1, ["sales"], [BOX])
    outcome, _mid = timed.begin_attempt(row.id, uuid.uuid4(), BOX, None, f"<{uuid.uuid4()}@sender.example>", "s")
    assert outcome == "ok"
    timed.suppress("eve@rcpt.example", "unsubscribed by email")  # while step 1 is in flight
    assert timed.record_sent(row.id, "250 ok")
    assert [r[:2] for r in _rows(database_url)] == [(1, "sent")]  # no step 2 queued to be refused days later
    assert _ended(database_url) == "suppressed"


def test_a_domain_suppression_withdraws_every_address_of_the_domain(tmp_path: Path, timed: Ledger,
                                                                    database_url: str) -> None:
    _campaign(tmp_path, timed, addresses=("a@bigco.example", "b@bigco.example", "c@other.example"))
    assert timed.suppress("@bigco.example", "asked by bigco") == 2
    assert timed.is_suppressed("zed@bigco.example")
    assert not timed.is_suppressed("zed@other.example")
    assert sorted(r[1] for r in _rows(database_url)) == ["queued", "suppressed", "suppressed"]


def test_reassign_moves_waiting_follow_ups_to_another_mailbox(tmp_path: Path, timed: Ledger, clock: FakeClock) -> None:
    _campaign(tmp_path, timed)
    _send(timed)
    assert Campaigns(timed).reassign("q1", BOX, "box2@sender.example") == 1
    clock.advance(3 * 86400)
    (second,) = timed.claim("w", 1, ["sales"], ["box2@sender.example"])
    assert second.pinned_mailbox == "box2@sender.example"


def test_retry_now_makes_a_retry_row_due(tmp_path: Path, timed: Ledger) -> None:
    _campaign(tmp_path, timed)
    (row,) = timed.claim("w", 1, ["sales"], [BOX])
    timed.begin_attempt(row.id, uuid.uuid4(), BOX, None, "<a@sender.example>", "s")
    timed.settle(row.id, Settle.RETRY, "451", 1800)
    assert timed.claim("w", 1, ["sales"], [BOX]) == []
    assert timed.retry_now(row.id) == 1
    assert [r.id for r in timed.claim("w", 1, ["sales"], [BOX])] == [row.id]


def test_a_relays_delivered_before_the_agents_sent_still_creates_the_next_step(tmp_path: Path, timed: Ledger,
                                                                                database_url: str) -> None:
    _campaign(tmp_path, timed)
    (row,) = timed.claim("w", 1, ["sales"], [BOX])
    timed.begin_attempt(row.id, uuid.uuid4(), BOX, None, "<a@sender.example>", "s")
    Feedback(timed).apply(row.id, Event.DELIVERED, source="webhook", ref="d1")  # before the agent records it
    timed.record_sent(row.id, "250 ok")
    assert [r[:2] for r in _rows(database_url)] == [(1, "delivered"), (2, "queued")]


def test_pause_and_resume_are_in_the_rows_history(tmp_path: Path, timed: Ledger) -> None:
    _campaign(tmp_path, timed)
    campaigns = Campaigns(timed)
    campaigns.move("q1", Move.PAUSE)
    campaigns.move("q1", Move.RESUME)
    (row,) = timed.lead_rows("eve@rcpt.example")
    kinds = [(e["kind"], e["detail"]) for e in timed.events_of(row["id"])]
    assert kinds[-2:] == [("waiting", "campaign q1: paused"), ("queued", "campaign q1: resume")]
