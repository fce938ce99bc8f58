"""The rank guard on a real PostgreSQL: every arrival order of a row's events ends in the same status; replays
and late events change nothing; the guard holds for the agent's own writes and for a person at psql."""

from __future__ import annotations

import itertools
import re
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from sender import Ledger, Settle, Status
from sender.ledger import connection as db
from sender.ledger.events import Applied, Event, Feedback, Verdict
from tests.conftest import REPO_ROOT

AT = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def _handed_over(feedback: Feedback, lead: str, to: str, step: int = 1) -> tuple[int, str]:
    """A row whose attempt started (what the agent writes right before MAIL FROM): (id, Message-ID)."""
    queued = feedback.ledger.enqueue(lead=lead, step=step, address=to, group="sales", subject="Hi", text="Hello")
    assert queued == "queued"
    (row,) = feedback.ledger.claim("w1", 1)
    outcome, message_id = feedback.ledger.begin_attempt(row.id, uuid.uuid4(), "box@sender.example", None,
                                                 f"<{uuid.uuid4()}@sender.example>")
    assert outcome == "ok" and message_id is not None
    return row.id, message_id


def _status(feedback: Feedback, lead: str, step: int = 1) -> str:
    shown = feedback.ledger.show(lead, step)
    assert shown is not None
    return str(shown.row["status"])


# Each step is one arrival: the agent's own record of the send, or feedback from a source.
Step = Callable[[Feedback, int], object]
STEPS: dict[str, tuple[str, Step]] = {
    "agent sent": ("sent", lambda f, row: f.ledger.record_sent(row, "250 ok")),
    "webhook sent": ("sent", lambda f, row: f.apply(row, Event.SENT, source="webhook", ref="t1", at=AT)),
    "delivered": ("delivered", lambda f, row: f.apply(row, Event.DELIVERED, source="webhook", ref="t2", at=AT)),
    "replied": ("replied", lambda f, row: f.apply(row, Event.REPLIED, source="inbox", ref="m1")),
    "bounced": ("bounced", lambda f, row: f.apply(row, Event.BOUNCED, source="inbox", ref="m2")),
    "unsubscribed": ("unsubscribed", lambda f, row: f.apply(row, Event.UNSUBSCRIBED, source="one-click",
                                                            ref="one-click")),
    "complained": ("complained", lambda f, row: f.apply(row, Event.COMPLAINED, source="webhook", ref="t3")),
    "deferred": ("sending", lambda f, row: f.apply(row, Event.DEFERRED, source="inbox", ref="m3")),
    "auto-reply": ("sending", lambda f, row: f.apply(row, Event.AUTO_REPLIED, source="inbox", ref="m4")),
    "late unconfirmed": ("sending", lambda f, row: f.ledger.settle(row, Settle.UNCONFIRMED, "timeout after DATA")),
    # the agent's definite answers that the message did not leave
    "failed": ("sending", lambda f, row: f.ledger.settle(row, Settle.FAILED, "554 5.7.1 content rejected")),
    "refused at RCPT": ("sending", lambda f, row: f.ledger.settle(row, Settle.BOUNCE, "550 5.1.1 user unknown")),
    # feedback the provider found forged (DMARC fail): recorded, changes nothing
    "forged reply": ("sending", lambda f, row: f.apply(row, Event.REPLIED, source="inbox", ref="m5",
                                                       verdict=Verdict.FAIL)),
    "forged unsubscribe": ("sending", lambda f, row: f.apply(row, Event.UNSUBSCRIBED, source="inbox", ref="m6",
                                                             verdict=Verdict.FAIL)),
}


@pytest.fixture
def feedback(database_url: str) -> Feedback:
    # Thousands of rows per test: commits need not wait for the disk (no crash is simulated here).
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {conn.info.dbname} SET synchronous_commit = off")
    opened = Feedback.from_url(database_url)
    opened.ledger.migrate()
    return opened


@pytest.mark.parametrize(("names", "expected"), [
    (("agent sent", "delivered", "replied", "bounced", "complained", "deferred"), "complained"),
    (("agent sent", "webhook sent", "delivered", "unsubscribed", "auto-reply", "late unconfirmed"), "unsubscribed"),
    (("late unconfirmed", "delivered", "replied", "deferred", "auto-reply"), "replied"),
    # a late sent never overwrites failed, and a sent that came first does not outlast it
    (("failed", "webhook sent", "deferred", "auto-reply", "forged reply"), "failed"),
    # the agent's own 554 outranks a relay's delivered, in either order (issue 39)
    (("failed", "webhook sent", "delivered"), "failed"),
    (("refused at RCPT", "webhook sent", "forged unsubscribe", "auto-reply"), "suppressed"),
    (("agent sent", "forged reply", "forged unsubscribe", "deferred"), "sent"),
    (("late unconfirmed", "webhook sent", "forged reply"), "sent"),
], ids=["hard", "soft", "unconfirmed", "failed", "failed-delivered", "refused", "forged", "unconfirmed-sent"])
def test_every_arrival_order_ends_in_the_same_status(feedback: Feedback, names: tuple[str, ...],
                                                     expected: str) -> None:
    finals = {}
    for n, order in enumerate(itertools.permutations(names)):
        row, _ = _handed_over(feedback, f"P{n}", f"p{n}@rcpt.example")
        for name in order:
            STEPS[name][1](feedback, row)
        finals[order] = _status(feedback, f"P{n}")
    assert set(finals.values()) == {expected}, {k: v for k, v in finals.items() if v != expected}


def test_without_the_agents_own_answers_the_highest_rank_wins(feedback: Feedback) -> None:
    # The rank order alone decides among feedback: what the scenarios above without failed or refused expect.
    ranks = feedback.ledger.status_ranks()
    names = ("agent sent", "delivered", "replied", "bounced", "complained", "deferred")
    assert max((STEPS[n][0] for n in names), key=lambda status: ranks[Status(status)]) == "complained"


def test_a_late_sent_never_overwrites_failed(feedback: Feedback) -> None:
    row, _ = _handed_over(feedback, "L1", "a@rcpt.example")
    assert feedback.ledger.settle(row, Settle.FAILED, "554 5.7.1 rejected") == Status.FAILED
    assert feedback.apply(row, Event.SENT, source="webhook", ref="late", at=AT) is Applied.RECORDED
    assert _status(feedback, "L1") == "failed"
    # the other order: a relay's sent first, then the agent's own 5xx
    other, _ = _handed_over(feedback, "L2", "b@rcpt.example")
    assert feedback.apply(other, Event.SENT, source="webhook", ref="early", at=AT) is Applied.APPLIED
    assert feedback.ledger.settle(other, Settle.FAILED, "554 5.7.1 rejected") == Status.FAILED
    assert _status(feedback, "L2") == "failed"
    # but once the submission server accepted it (a send-log entry), the agent's record stands
    accepted, _ = _handed_over(feedback, "L3", "c@rcpt.example")
    feedback.ledger.record_sent(accepted, "250 ok")
    assert feedback.ledger.settle(accepted, Settle.FAILED, "late") == Status.SENT


def test_a_forged_event_is_recorded_and_changes_nothing(feedback: Feedback, database_url: str) -> None:
    row, _ = _handed_over(feedback, "L1", "a@rcpt.example")
    feedback.ledger.record_sent(row, "250 ok")
    assert feedback.apply(row, Event.UNSUBSCRIBED, source="inbox", ref="f", verdict=Verdict.FAIL) is Applied.FORGED
    assert feedback.apply(row, Event.UNSUBSCRIBED, source="inbox", ref="f", verdict=Verdict.FAIL) is Applied.REPLAY
    assert (_status(feedback, "L1"), feedback.ledger.is_suppressed("a@rcpt.example")) == ("sent", False)
    shown = feedback.ledger.show("L1", 1)
    assert shown is not None and [(f["event"], f["verdict"]) for f in shown.feedback] == [("unsubscribed", "fail")]
    assert "forged" in [e["kind"] for e in shown.events]
    assert feedback.apply(row, Event.UNSUBSCRIBED, source="inbox", ref="g", verdict=Verdict.PASS) is Applied.APPLIED
    with psycopg.connect(database_url) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("SELECT sender_apply_event(%s, 'replied', NULL, 'inbox', 'h', '', 'maybe')", (row,))


def test_replays_change_nothing(feedback: Feedback, database_url: str) -> None:
    row, message_id = _handed_over(feedback, "L1", "a@rcpt.example")
    feedback.ledger.record_sent(row, "250 ok")
    assert feedback.apply(row, Event.DELIVERED, source="webhook", ref="t", at=AT) is Applied.APPLIED
    shown = feedback.ledger.show("L1", 1)
    assert shown is not None
    history = len(shown.events)
    for _ in range(3):
        assert feedback.apply(row, Event.DELIVERED, source="webhook", ref="t", at=AT) is Applied.REPLAY
        assert feedback.apply_by_message_id(message_id, Event.DELIVERED, source="webhook", ref="t",
                                            at=AT) is Applied.REPLAY
    again = feedback.ledger.show("L1", 1)
    assert again is not None
    assert (again.row["status"], len(again.events)) == ("delivered", history)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM sender_feedback").fetchone() == (1,)


def _until_blocked_by(watcher: psycopg.Connection, waiting_pid: int, holder_pid: int) -> None:
    """Return once the database reports `waiting_pid` waiting on a lock `holder_pid` holds."""
    deadline = time.monotonic() + 10
    while True:
        row = watcher.execute("SELECT %s = ANY (pg_blocking_pids(%s))", (holder_pid, waiting_pid)).fetchone()
        if row is not None and row[0]:
            return
        assert time.monotonic() < deadline, "the second arrival never met the first one in flight"
        time.sleep(0.01)


def test_two_first_arrivals_at_once_answer_both_and_leave_one_feedback_row(feedback: Feedback,
                                                                         database_url: str) -> None:
    """A webhook retried while its first call is still in flight: the second arrival of the same (row, event,
    reference) meets the first one uncommitted (it passed the replay read before the first committed). It waits,
    then is answered as a replay, not with an error; one feedback row is written."""
    row, _ = _handed_over(feedback, "L1", "a@rcpt.example")
    feedback.ledger.record_sent(row, "250 ok")
    answers: list[object] = []
    second_conn = db.connect(database_url)
    second_pid = second_conn.info.backend_pid
    with psycopg.connect(database_url) as first, Feedback(Ledger(second_conn, database_url)) as second, \
            psycopg.connect(database_url, autocommit=True) as watcher:
        applied = first.execute("SELECT sender_apply_event(%s, 'delivered', %s, 'webhook', 't', '')",
                                (row, AT)).fetchone()  # in a transaction left open

        def arrive() -> None:
            try:
                answers.append(second.apply(row, Event.DELIVERED, source="webhook", ref="t", at=AT))
            except Exception as exc:  # what the test is about: the second arrival must not see one
                answers.append(exc)

        arriving = threading.Thread(target=arrive)
        arriving.start()
        try:
            _until_blocked_by(watcher, second_pid, first.info.backend_pid)
            first.commit()
        finally:
            first.rollback()  # a no-op after the commit; unblocks the second arrival when the wait failed
            arriving.join(timeout=30)
        assert not arriving.is_alive()
        written = watcher.execute("SELECT count(*) FROM sender_feedback WHERE email_id = %s", (row,)).fetchone()
    assert applied == ("applied",)
    assert answers == [Applied.REPLAY]
    assert written == (1,)
    assert _status(feedback, "L1") == "delivered"


def test_a_relays_late_delivered_never_overturns_a_refusal_the_agent_saw(feedback: Feedback,
                                                                        database_url: str) -> None:
    row, _ = _handed_over(feedback, "L1", "a@rcpt.example")
    assert feedback.ledger.settle(row, Settle.FAILED, "554 5.7.1 rejected at DATA") == Status.FAILED
    assert feedback.apply(row, Event.DELIVERED, source="webhook", ref="late", at=AT) is Applied.RECORDED
    assert _status(feedback, "L1") == "failed"
    with psycopg.connect(database_url) as conn:  # the relay's word is kept for a person
        assert conn.execute("SELECT count(*) FROM sender_feedback WHERE email_id = %s AND event = 'delivered'",
                            (row,)).fetchone() == (1,)


def test_a_late_sent_never_overwrites_delivered(feedback: Feedback) -> None:
    # A relay's webhook can beat the agent's own record of the send.
    row, message_id = _handed_over(feedback, "L1", "a@rcpt.example")
    assert feedback.apply_by_message_id(message_id, Event.DELIVERED, source="webhook", ref="t",
                                        at=AT) is Applied.APPLIED
    assert feedback.ledger.record_sent(row, "250 ok") is True  # the send log still gets its entry
    assert feedback.apply(row, Event.SENT, source="webhook", ref="late", at=AT) is Applied.RECORDED
    shown = feedback.ledger.show("L1", 1)
    assert shown is not None and shown.send_log is not None
    assert shown.row["status"] == Status.DELIVERED


def test_nothing_overwrites_a_bounce(feedback: Feedback) -> None:
    row, _ = _handed_over(feedback, "L1", "a@rcpt.example")
    assert feedback.apply(row, Event.BOUNCED, source="inbox", ref="m", detail="550 5.1.1") is Applied.APPLIED
    for event in (Event.SENT, Event.DELIVERED, Event.REPLIED):
        assert feedback.apply(row, event, source="webhook", ref="x", at=AT) is Applied.RECORDED
    assert feedback.ledger.settle(row, Settle.RETRY, "late retry", 1.0) == Status.BOUNCED
    feedback.ledger.record_sent(row, "250 late")
    assert _status(feedback, "L1") == "bounced"
    assert feedback.ledger.is_suppressed("a@rcpt.example")


def test_the_guard_holds_for_a_person_at_psql(feedback: Feedback, database_url: str) -> None:
    row, _ = _handed_over(feedback, "L1", "a@rcpt.example")
    feedback.apply(row, Event.COMPLAINED, source="webhook", ref="t", at=AT)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE sender_emails SET status = 'queued' WHERE id = %s", (row,))
        conn.execute("UPDATE sender_emails SET status = 'sent' WHERE id = %s", (row,))
    assert _status(feedback, "L1") == "complained"
    assert feedback.ledger.claim("w2", 10) == []


def test_the_guard_holds_a_row_that_is_only_sent(feedback: Feedback, database_url: str) -> None:
    # The guard starts at sent itself, not one rank above: a handed-over row is never queued again by hand.
    row, _ = _handed_over(feedback, "L1", "a@rcpt.example")
    assert feedback.ledger.record_sent(row, "250 ok")
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE sender_emails SET status = 'queued' WHERE id = %s", (row,))
    assert _status(feedback, "L1") == "sent"
    assert feedback.ledger.claim("w2", 10) == []


def test_before_the_handoff_the_agent_moves_freely(feedback: Feedback) -> None:
    # The guard starts at sent: a claim given back (sending -> queued) is not a downgrade it refuses.
    feedback.ledger.enqueue(lead="L1", step=1, address="a@rcpt.example", group="sales", subject="Hi", text="Hello")
    (row,) = feedback.ledger.claim("w1", 1)
    assert feedback.ledger.unclaim(row.id, 0.0, "no mailbox free")
    assert _status(feedback, "L1") == "queued"


def test_a_reply_cancels_the_leads_later_steps(feedback: Feedback) -> None:
    row, message_id = _handed_over(feedback, "L1", "a@rcpt.example")
    feedback.ledger.record_sent(row, "250 ok")
    for step in (2, 3):
        feedback.ledger.enqueue(lead="L1", step=step, address="a@rcpt.example", group="sales", subject="Again",
                                text="x", not_before=datetime.now(UTC) + timedelta(days=step))
    feedback.ledger.enqueue(lead="L2", step=2, address="b@rcpt.example", group="sales", subject="Other", text="x")
    assert feedback.apply_by_message_id(message_id, Event.REPLIED, source="inbox", ref="r") is Applied.APPLIED
    assert [_status(feedback, "L1", s) for s in (1, 2, 3)] == ["replied", "cancelled", "cancelled"]
    assert _status(feedback, "L2", 2) == "waiting"  # another lead's step 2, behind its own step 1
    assert not feedback.ledger.is_suppressed("a@rcpt.example")  # a reply is no opt-out


def test_an_auto_reply_is_recorded_and_the_sequence_goes_on(feedback: Feedback) -> None:
    row, _ = _handed_over(feedback, "L1", "a@rcpt.example")
    feedback.ledger.record_sent(row, "250 ok")
    feedback.ledger.enqueue(lead="L1", step=2, address="a@rcpt.example", group="sales", subject="Again", text="x")
    assert feedback.apply(row, Event.AUTO_REPLIED, source="inbox", ref="ooo") is Applied.RECORDED
    assert [_status(feedback, "L1", s) for s in (1, 2)] == ["sent", "queued"]
    shown = feedback.ledger.show("L1", 1)
    assert shown is not None and "auto_replied" in [e["kind"] for e in shown.events]


def test_unknown_rows_and_message_ids_change_nothing(feedback: Feedback, database_url: str) -> None:
    assert feedback.apply(424242, Event.BOUNCED, source="inbox", ref="m") is Applied.NO_ROW
    assert feedback.apply_by_message_id("<nobody@nowhere>", Event.BOUNCED, source="webhook", ref="m",
                                        at=AT) is Applied.NO_ROW
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM sender_feedback").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM sender_suppressions").fetchone() == (0,)


def test_the_documented_rank_is_the_databases(feedback: Feedback, database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        ranks = dict(conn.execute("SELECT s::text, sender_rank(s) FROM unnest(enum_range(NULL::sender_status)) s")
                     .fetchall())
    table = (REPO_ROOT / "docs" / "feedback.md").read_text()
    documented = {status: int(rank)
                  for rank, statuses in re.findall(r"^\| (\d+) \| ((?:`[a-z]+`(?:, )?)+) \|", table, re.MULTILINE)
                  for status in re.findall(r"`([a-z]+)`", statuses)}
    assert ranks == documented
    assert set(documented) == {s.value for s in Status}


def test_inbox_marks_move_forward_only_within_one_uidvalidity(feedback: Feedback) -> None:
    assert feedback.inbox_mark("box@sender.example") is None
    feedback.set_inbox_mark("box@sender.example", 7, 10)
    feedback.set_inbox_mark("box@sender.example", 7, 4)
    assert feedback.inbox_mark("box@sender.example") == (7, 10)
    feedback.set_inbox_mark("box@sender.example", 8, 2)
    assert feedback.inbox_mark("box@sender.example") == (8, 2)


def test_the_ledger_class_reads_new_statuses(database_url: str, feedback: Feedback) -> None:
    row, _ = _handed_over(feedback, "L1", "a@rcpt.example")
    feedback.apply(row, Event.DELIVERED, source="webhook", ref="t", at=AT)
    with Ledger.from_url(database_url) as ledger:
        assert ledger.counts()["delivered"] == 1
