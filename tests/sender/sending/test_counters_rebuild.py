"""The warm-up counters rebuilt from the ledger after Redis lost them (sender.sending.counters, queries.sql
`sends_since` and `campaign_sends_since`) count every send that was handed over or may have been, once, whatever a
relay or the inbox said of its row later; a send the ledger knows was never handed over is not counted."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from sender import Ledger, Settle
from sender.ledger.events import Event, Feedback
from sender.sending.counters import rebuild
from sendhost.model import Mailbox
from tests.sender.sequences import set_up_campaign
from tests.sender.world import World, clear_of_midnight, make_world
from tests.support.submission import SubmissionServer
from warmup import Guard

BOX = "box0@sender.example"
CAMPAIGN = "rebuilt"


def _agent_url(database_url: str) -> str:
    """The ledger as the agent's job role reads it (sql/roles.sql): the rebuild runs on the sending host."""
    return f"{database_url}{'&' if '?' in database_url else '?'}options=-crole%3Dsendhost_agent"


@pytest.fixture
def week_one(tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer) -> World:
    """One mailbox in its first week (10 a day) and a running campaign of twelve leads, all due."""
    clear_of_midnight()
    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1, start=datetime.now(UTC).date())
    with world.ledger() as ledger:
        set_up_campaign(tmp_path, ledger, CAMPAIGN, [(f"{name}@rcpt.example", name, "") for name in "abcdefghijkl"])
    return world


def _attempt(ledger: Ledger, row_id: int, mailbox: str = BOX) -> None:
    """The attempt's durable start through `mailbox`, as the agent makes it."""
    started, message_id = ledger.begin_attempt(row_id, uuid.uuid4(), mailbox, "192.0.2.7",
                                               f"<{uuid.uuid4()}@sender.example>", "Hello")
    assert started == "ok" and message_id is not None


def test_a_rebuild_counts_each_handed_over_send_once_whatever_was_said_of_it_later(week_one: World,
                                                                                  database_url: str) -> None:
    """Issue 39: two unconfirmed rows a relay then reported `delivered` and `sent` fell out of the rebuild (2 -> 0),
    so the mailbox (week one's 10 included) and its campaign could send past their caps that day."""
    with week_one.ledger() as ledger, Feedback.from_url(database_url) as feedback:
        rows = {r.address.split("@")[0]: r.id for r in ledger.claim("w", 100, ["sales"], [BOX])}
        assert sorted(rows) == list("abcdefghijkl")

        def relay(name: str, event: Event) -> None:
            feedback.apply(rows[name], event, source="relay", ref=f"{name}-{event.value}")

        # handed over, or may have been: each counts once
        for name in "abkij":
            _attempt(ledger, rows[name])
        for name in "abk":
            ledger.settle(rows[name], Settle.UNCONFIRMED, "timeout after DATA; check Sent Items")
        relay("a", Event.DELIVERED)  # unconfirmed, then a relay's delivery report
        relay("b", Event.SENT)  # unconfirmed, then a relay's `sent`
        relay("k", Event.BOUNCED)  # unconfirmed, then a bounce: it left to bounce
        ledger.settle(rows["i"], Settle.UNCONFIRMED, "timeout after DATA; check Sent Items")  # still unknown
        # j: its attempt started and nothing came back yet (`sending`)
        _attempt(ledger, rows["c"])
        ledger.record_sent(rows["c"], "250 2.0.0 OK")  # accepted, in the send log...
        relay("c", Event.DELIVERED)  # ...and delivered: still one send
        _attempt(ledger, rows["d"])
        ledger.settle(rows["d"], Settle.UNCONFIRMED, "timeout after DATA; check Sent Items")
        assert ledger.resolve(rows["d"], sent=True, note="found in Sent Items") == "resolved"  # the log, once
        # never handed over: none counts
        _attempt(ledger, rows["e"])
        ledger.settle(rows["e"], Settle.FAILED, "554 5.7.1 refused at DATA")
        relay("e", Event.DELIVERED)  # a relay's late word does not overturn the refusal (version 14)
        _attempt(ledger, rows["f"])
        ledger.settle(rows["f"], Settle.BOUNCE, "550 5.1.1 no such user at RCPT")
        _attempt(ledger, rows["g"])
        ledger.settle(rows["g"], Settle.RETRY, "451 4.3.0 try again later", 1800.0)  # not handed over: retried
        assert ledger.unclaim(rows["h"], 600.0, "no mailbox free")  # given back before any attempt
        _attempt(ledger, rows["l"])
        ledger.settle(rows["l"], Settle.RETRY, "451 4.3.0 try again later", 0.0)
        # claimed again after a transient failure (due again at once), its next attempt not started yet
        assert [r.id for r in ledger.claim("w", 100, ["sales"], [BOX])] == [rows["l"]]
        statuses = {name: ledger.show(f"{name}@rcpt.example", 1, CAMPAIGN) for name in rows}
    assert {n: s.row["status"] for n, s in statuses.items() if s} == {
        "a": "delivered", "b": "sent", "c": "delivered", "d": "sent", "e": "failed", "f": "suppressed",
        "g": "retry", "h": "queued", "i": "unconfirmed", "j": "sending", "k": "bounced", "l": "sending"}
    client = redis.Redis.from_url(week_one.redis_url)
    client.flushall()
    client.close()
    agent, _factory = week_one.agent()
    with Ledger.from_url(_agent_url(database_url)) as as_agent:
        agent.prepare(as_agent)  # what an agent does at its start, as its own role
    handed_over = 7  # a, b, c, d, i, j, k
    (box,) = agent.guard.status([BOX])
    assert (box.cap, box.reserved) == (10, handed_over)
    today = datetime.now(UTC).date().isoformat()  # the campaign's day: its file names no time zone (UTC)
    assert agent.guard.campaign_counts("sales", CAMPAIGN, today) == (handed_over, {BOX: handed_over})


def test_a_mailbox_written_with_capitals_in_the_inventory_gets_its_sends_back(ledger: Ledger, redis_url: str) -> None:
    """The agent hands the ledger the inventory's spelling of the mailbox (`Sales.Box@Sender.Example`); the guard
    and the rebuild's lookup know it lower-cased. Its accepted send and its unconfirmed attempt still count."""
    clear_of_midnight()
    spelled = "Sales.Box@Sender.Example"
    for lead in ("L0", "L1"):
        assert ledger.enqueue(lead=lead, step=1, address=f"{lead.lower()}@rcpt.example", group="sales", subject="Hi",
                              text="x") == "queued"
    first, second = ledger.claim("w", 2, ["sales"])
    _attempt(ledger, first.id, spelled)
    ledger.record_sent(first.id, "250 2.0.0 OK")
    _attempt(ledger, second.id, spelled)
    ledger.settle(second.id, Settle.UNCONFIRMED, "timeout after DATA; check Sent Items")
    mailbox = Mailbox(address=spelled, domain="sender.example", start=datetime.now(UTC).date(), group="sales")
    with Guard.from_url(redis_url) as guard:
        assert rebuild(guard, ledger, "sales", [mailbox]) == 1
        (status,) = guard.status([spelled])
    assert status.reserved == 2
