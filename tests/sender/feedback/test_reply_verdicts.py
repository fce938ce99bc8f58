"""What a reply's verdict does in the ledger (issue 39, schema version 16), against the real PostgreSQL: an automatic
reply holds the lead's next step until its author is back and never ends the sequence; a reply saying the lead left
ends it as `left`, keeping the addresses it names and mailing none of them; a colleague's reply ends the lead's
sequence only in a campaign that says `stop_on_domain_reply: true`, the lead this mailbox mailed last; a person's
correction (`sender_reclassify`) applies its effect under the rank guard, and only the operator may give one."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from sender import Ledger
from sender.campaigns.leads import read_leads
from sender.campaigns.spec import load_campaign
from sender.ledger.campaigns import Campaigns, Move
from sender.ledger.events import Applied, Event, Feedback, Reclassified
from tests.sender.ledger.test_roles import _login_as
from tests.support.clock import FakeClock

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC).timestamp()
BOX, OTHER_BOX = "box1@sender.example", "box2@sender.example"
EVE = "eve@bigco.example"

CAMPAIGN = """\
name: {name}
group: sales
steps:
  - subject: "Hello"
    body: "Hi"
  - delay: 3d
    body: "Following up"
  - delay: 4d
    body: "Last one"
"""


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


def _campaign(tmp_path: Path, ledger: Ledger, leads: dict[str, str], name: str = "q1", extra: str = "") -> None:
    """Campaign `name` running, with `leads` ({address: time zone, '' for none})."""
    path = tmp_path / f"{name}.yml"
    path.write_text(CAMPAIGN.format(name=name) + extra)
    spec = load_campaign(path, {"sales"})
    campaigns = Campaigns(ledger)
    campaigns.apply(spec, path.read_text())
    csv = tmp_path / f"{name}.csv"
    csv.write_text("address,timezone\n" + "".join(f"{a},{tz}\n" for a, tz in leads.items()))
    campaigns.add_leads(name, read_leads(csv, spec).leads)
    campaigns.move(name, Move.START)


def _send(ledger: Ledger, mailbox: str = BOX, lead: str | None = None) -> int:
    """Claim a due row (of `lead`, if given) and record it sent through `mailbox`; its id."""
    rows = ledger.claim("w", 10, ["sales"], [mailbox])
    (row,) = [r for r in rows if lead is None or r.address == lead]
    for other in rows:
        if other.id != row.id:
            ledger.unclaim(other.id, 0.0, "")
    outcome, _mid = ledger.begin_attempt(row.id, uuid.uuid4(), mailbox, None, f"<{uuid.uuid4()}@sender.example>",
                                         "subject")
    assert outcome == "ok"
    assert ledger.record_sent(row.id, "250 ok")
    return row.id


def _steps(database_url: str, address: str = EVE) -> list[tuple[int, str, datetime]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT step, status::text, not_before FROM sender_emails WHERE address = %s "
                            "AND campaign_id <> 1 ORDER BY step", (address,)).fetchall()


def _lead(database_url: str, address: str = EVE) -> tuple[str | None, str | None, datetime | None, str | None]:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT ended, ended_note, held_until, held_why FROM sender_leads WHERE address = %s "
                           "AND campaign_id <> 1", (address,)).fetchone()
    assert row is not None
    return row


def _berlin_midnight(day: date) -> datetime:
    """The start of `day` in Europe/Berlin (UTC+1 in March before the change), in UTC."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC) - timedelta(hours=1)


# --- an automatic reply holds the lead -------------------------------------------------------------------------

def test_an_automatic_reply_holds_the_next_step_until_the_return_day_on_the_leads_clock(
        tmp_path: Path, timed: Ledger, clock: FakeClock, database_url: str) -> None:
    _campaign(tmp_path, timed, {EVE: "Europe/Berlin"})
    first = _send(timed)
    feedback = Feedback(timed)
    assert feedback.apply(first, Event.AUTO_REPLIED, source="inbox", ref="ooo-1") is Applied.RECORDED
    back = date(2026, 3, 20)  # "back on 19 March": the hold is the day after
    assert feedback.hold(first, back, "an automatic reply: back on 2026-03-19") == 1
    held_until = _berlin_midnight(back)
    assert [s[:2] for s in _steps(database_url)] == [(1, "sent"), (2, "queued")]
    assert _steps(database_url)[1][2] == held_until
    assert _lead(database_url) == (None, None, held_until, "an automatic reply: back on 2026-03-19")

    clock.advance(3 * 86400)  # step 2's own day: it waits for the hold
    assert timed.claim("w", 5, ["sales"], [BOX]) == []
    clock.advance((held_until - datetime.fromtimestamp(clock.now_s, UTC)).total_seconds() - 1)
    assert timed.claim("w", 5, ["sales"], [BOX]) == []
    clock.advance(1)
    (second,) = timed.claim("w", 5, ["sales"], [BOX])
    assert second.step == 2
    assert _lead(database_url)[0] is None  # an automatic reply never ends the sequence


def test_a_hold_is_never_shortened_and_a_step_created_behind_it_waits_too(
        tmp_path: Path, timed: Ledger, clock: FakeClock, database_url: str) -> None:
    _campaign(tmp_path, timed, {EVE: ""})  # no time zone of its own: the campaign's (UTC)
    first = _send(timed)
    clock.advance(3 * 86400)
    (second,) = timed.claim("w", 1, ["sales"], [BOX])  # step 2 is claimed when the auto-reply to step 1 is read
    feedback = Feedback(timed)
    assert feedback.hold(first, date(2026, 3, 25), "back on 24 March") == 0  # nothing waiting: step 3 not made yet
    assert feedback.hold(first, date(2026, 3, 10), "back on 9 March") == 0  # an earlier hold changes nothing
    outcome, _mid = timed.begin_attempt(second.id, uuid.uuid4(), BOX, None, f"<{uuid.uuid4()}@sender.example>", "s")
    assert outcome == "ok" and timed.record_sent(second.id, "250 ok")
    held_until = datetime(2026, 3, 25, tzinfo=UTC)
    assert _steps(database_url)[2][1:] == ("queued", held_until)  # its own delay would be 9 March
    assert _lead(database_url)[2:] == (held_until, "back on 24 March")


def test_a_hold_on_a_lead_whose_sequence_ended_changes_nothing(tmp_path: Path, timed: Ledger,
                                                               database_url: str) -> None:
    _campaign(tmp_path, timed, {EVE: ""})
    first = _send(timed)
    feedback = Feedback(timed)
    feedback.apply(first, Event.REPLIED, source="inbox", ref="r1")
    assert feedback.hold(first, date(2026, 3, 25), "back on 24 March") == 0
    assert _lead(database_url) == ("replied", None, None, None)


# --- left, or the wrong person ---------------------------------------------------------------------------------

def test_a_left_reply_ends_the_sequence_as_left_naming_the_addresses_given_and_mails_none_of_them(
        tmp_path: Path, timed: Ledger, clock: FakeClock, database_url: str) -> None:
    _campaign(tmp_path, timed, {EVE: ""})
    first = _send(timed)
    detail = "no longer there or the wrong person (left/en); the reply names bob@bigco.example"
    assert Feedback(timed).apply(first, Event.LEFT, source="inbox", ref="left-1", detail=detail) is Applied.APPLIED
    assert [s[:2] for s in _steps(database_url)] == [(1, "replied"), (2, "cancelled")]
    assert _lead(database_url)[:2] == ("left", detail)
    clock.advance(30 * 86400)
    assert timed.claim("w", 5, None, None) == []
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM sender_emails WHERE address = 'bob@bigco.example'").fetchone() \
            == (0,)
        assert conn.execute("SELECT count(*) FROM sender_leads WHERE address = 'bob@bigco.example'").fetchone() \
            == (0,)
    assert not timed.is_suppressed(EVE)  # gone, not opted out: the address is not suppressed


def test_a_left_reply_after_the_last_step_says_more_than_completed(tmp_path: Path, timed: Ledger,
                                                                   clock: FakeClock, database_url: str) -> None:
    _campaign(tmp_path, timed, {EVE: ""})
    ids = []
    for delay in (0, 3, 4):
        clock.advance(delay * 86400)
        ids.append(_send(timed))
    assert _lead(database_url)[0] == "completed"
    Feedback(timed).apply(ids[2], Event.LEFT, source="inbox", ref="left-late", detail="left (left/de)")
    assert _lead(database_url)[:2] == ("left", "left (left/de)")


# --- a colleague's reply ---------------------------------------------------------------------------------------

def test_a_colleagues_reply_ends_the_sequence_of_the_lead_this_mailbox_mailed_last_at_that_domain(
        tmp_path: Path, timed: Ledger, clock: FakeClock, database_url: str) -> None:
    ann, carl, zoe = "ann@bigco.example", "carl@bigco.example", "zoe@bigco.example"
    _campaign(tmp_path, timed, {ann: "", carl: "", zoe: ""}, extra="stop_on_domain_reply: true\n")
    _send(timed, lead=ann)
    clock.advance(60)
    carl_row = _send(timed, lead=carl)
    clock.advance(60)
    _send(timed, OTHER_BOX, lead=zoe)  # mailed later, but from another mailbox: not the one that was answered
    feedback = Feedback(timed)
    row, applied = feedback.colleague_reply(BOX, "Dave@BigCo.example", ref="<dave-1@bigco.example>",
                                            detail="dave@bigco.example replied")
    assert (row, applied) == (carl_row, Applied.RECORDED)
    assert _lead(database_url, carl)[:2] == ("colleague_replied", "dave@bigco.example replied")
    assert [s[1] for s in _steps(database_url, carl)] == ["sent", "cancelled"]
    assert _lead(database_url, ann)[0] is None and _lead(database_url, zoe)[0] is None
    # Read again (a restored inbox mark): the lead it ended, never the next one at the domain.
    assert feedback.colleague_reply(BOX, "dave@bigco.example", ref="<dave-1@bigco.example>",
                                    detail="dave@bigco.example replied") == (carl_row, Applied.REPLAY)
    assert _lead(database_url, ann)[0] is None
    # The lead's own address is no colleague of itself; another domain is nobody's lead.
    assert feedback.colleague_reply(BOX, ann, ref="r2", detail="x") == (None, Applied.NO_ROW)
    assert feedback.colleague_reply(BOX, "dave@other.example", ref="r3", detail="x") == (None, Applied.NO_ROW)


def test_a_colleagues_reply_ends_nothing_in_a_campaign_that_does_not_say_so(tmp_path: Path, timed: Ledger,
                                                                            database_url: str) -> None:
    _campaign(tmp_path, timed, {EVE: ""})  # stop_on_domain_reply defaults to false
    _send(timed)
    assert Feedback(timed).colleague_reply(BOX, "dave@bigco.example", ref="r1", detail="x") == (None, Applied.NO_ROW)
    assert _lead(database_url)[0] is None


def test_stop_on_domain_reply_follows_the_file_as_last_applied(tmp_path: Path, timed: Ledger) -> None:
    _campaign(tmp_path, timed, {EVE: ""}, extra="stop_on_domain_reply: true\n")
    path = tmp_path / "q1.yml"
    path.write_text(CAMPAIGN.format(name="q1"))
    Campaigns(timed).apply(load_campaign(path, {"sales"}), path.read_text())
    with timed.calling("read") as conn:
        assert conn.execute("SELECT stop_on_domain_reply FROM sender_campaigns WHERE name = 'q1'").fetchone() == (
            False,)


# --- a person's correction -------------------------------------------------------------------------------------

def test_a_reply_reclassified_as_an_unsubscribe_suppresses_the_address(tmp_path: Path, timed: Ledger,
                                                                       database_url: str) -> None:
    _campaign(tmp_path, timed, {EVE: ""})
    first = _send(timed)
    feedback = Feedback(timed)
    feedback.apply(first, Event.REPLIED, source="inbox", ref="r1")
    assert feedback.reclassify(first, Event.UNSUBSCRIBED, "she asked by phone") is Reclassified.APPLIED
    assert timed.is_suppressed(EVE)
    assert _steps(database_url)[0][1] == "unsubscribed"
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT source, detail FROM sender_feedback WHERE event = 'unsubscribed'").fetchall() == [
            ("person", "she asked by phone")]


def test_a_reply_reclassified_as_left_ends_the_sequence_as_left(tmp_path: Path, timed: Ledger,
                                                                database_url: str) -> None:
    _campaign(tmp_path, timed, {EVE: ""})
    first = _send(timed)
    feedback = Feedback(timed)
    feedback.apply(first, Event.REPLIED, source="inbox", ref="r1")
    assert feedback.reclassify(first, Event.LEFT, "write to bob@bigco.example") is Reclassified.APPLIED
    assert _lead(database_url)[:2] == ("left", "write to bob@bigco.example")


def test_a_reply_reclassified_as_an_automatic_one_is_outranked_and_its_sequence_stays_ended(
        tmp_path: Path, timed: Ledger, database_url: str) -> None:
    _campaign(tmp_path, timed, {EVE: ""})
    first = _send(timed)
    feedback = Feedback(timed)
    feedback.apply(first, Event.REPLIED, source="inbox", ref="r1")
    assert feedback.reclassify(first, Event.AUTO_REPLIED, "an out-of-office") is Reclassified.OUTRANKED
    assert [s[1] for s in _steps(database_url)] == ["replied", "cancelled"]
    assert _lead(database_url)[0] == "replied"


def test_a_sent_row_reclassified_as_an_automatic_reply_holds_its_lead_seven_days(
        tmp_path: Path, timed: Ledger, clock: FakeClock, database_url: str) -> None:
    _campaign(tmp_path, timed, {EVE: ""})
    first = _send(timed)
    assert Feedback(timed).reclassify(first, Event.AUTO_REPLIED, "away") is Reclassified.APPLIED
    assert _steps(database_url)[1][2] == datetime.fromtimestamp(clock.now_s, UTC) + timedelta(days=7)
    assert _lead(database_url)[0] is None


def test_reclassify_answers_for_a_row_never_sent_and_no_row(tmp_path: Path, timed: Ledger) -> None:
    _campaign(tmp_path, timed, {EVE: ""})
    first = _send(timed)
    with timed.calling("read") as conn:
        (second,) = conn.execute("SELECT id FROM sender_emails WHERE step = 2").fetchone() or (0,)
    feedback = Feedback(timed)
    assert feedback.reclassify(second, Event.REPLIED, "x") is Reclassified.NOT_SENT
    assert feedback.reclassify(first + 1000, Event.REPLIED, "x") is Reclassified.NO_ROW


def test_only_the_operator_may_reclassify(tmp_path: Path, timed: Ledger, database_url: str) -> None:
    _campaign(tmp_path, timed, {EVE: ""})
    first = _send(timed)
    for role in ("sendhost_agent", "sendhost_web"):
        with psycopg.connect(_login_as(database_url, role)) as conn, \
                pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT sender_reclassify(%s, 'bounced', 'x')", (first,))
    with Feedback.from_url(_login_as(database_url, "sendhost_operator")) as operator:
        assert operator.reclassify(first, Event.BOUNCED, "the mailbox is gone") is Reclassified.APPLIED
    assert timed.is_suppressed(EVE)
