"""Follow-ups first (issue 25, ledger v8), on a clock of the test's own: when a mailbox can send fewer than are due,
the claim gives the campaign's share (`followups_share`, default 0.8) of its claims to due follow-ups (steps >= 2)
and the rest to first steps, each kind oldest first by when the row became due, which a give-back does not reset;
a kind with nothing due leaves its share to the other."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from sender import Ledger, Settle
from sender.campaigns.leads import read_leads
from sender.campaigns.pacing import DEFAULT_FOLLOWUPS_SHARE
from sender.campaigns.spec import load_campaign
from sender.ledger.campaigns import Campaigns, Move
from tests.support.clock import FakeClock

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC).timestamp()
BOX = "box1@sender.example"
DAY = 86400
CAPACITY = 20  # what the mailbox can send now: 20 claims
LEADS = 30  # of each kind

CAMPAIGN = """\
name: {name}
group: sales
{share}steps:
  - subject: "Hello"
    body: "Hi"
  - delay: 1d
    body: "Following up"
"""


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


class Queue:
    """A running campaign of two steps on the test's clock, and what its rows are."""

    def __init__(self, tmp_path: Path, ledger: Ledger, clock: FakeClock, database_url: str, share: float | None,
                 name: str = "q1") -> None:
        self.tmp_path, self.ledger, self.clock, self.url, self.name = tmp_path, ledger, clock, database_url, name
        path = tmp_path / f"{name}.yml"
        path.write_text(CAMPAIGN.format(name=name, share="" if share is None else f"followups_share: {share}\n"))
        self.spec = load_campaign(path, {"sales"})
        self.campaigns = Campaigns(ledger)
        self.campaigns.apply(self.spec, path.read_text())
        self.campaigns.move(name, Move.START)

    def add(self, prefix: str, count: int) -> None:
        leads = self.tmp_path / f"{prefix}.csv"
        leads.write_text("email\n" + "".join(f"{prefix}{n:02d}@rcpt.example\n" for n in range(count)))
        self.campaigns.add_leads(self.name, read_leads(leads, self.spec).leads)

    def send_all(self, gap_s: float) -> None:
        """Send every due row, one each `gap_s`: the follow-ups they create are due in that order, that far apart."""
        while claimed := self.ledger.claim("w", 1, ["sales"], [BOX]):
            (row,) = claimed
            outcome, _mid = self.ledger.begin_attempt(row.id, uuid.uuid4(), BOX, None,
                                                      f"<{uuid.uuid4()}@sender.example>", "Hello")
            assert outcome == "ok"
            assert self.ledger.record_sent(row.id, "250 ok")
            self.clock.advance(gap_s)

    def due(self, step: int) -> list[int]:
        """The ids of this campaign's rows of `step` (first steps: 1, follow-ups: 2) to claim, oldest due first."""
        with psycopg.connect(self.url) as conn:
            return [i for (i,) in conn.execute(
                "SELECT e.id FROM sender_emails e JOIN sender_campaigns c ON c.id = e.campaign_id "
                "WHERE c.name = %s AND e.step = %s AND e.status IN ('queued', 'retry') ORDER BY e.due_at, e.id",
                (self.name, step))]

    def claim(self, count: int) -> list[tuple[int, int]]:
        """`count` claims of one row, as the agent makes them: (step, id) of each."""
        return [(row.step, row.id) for _ in range(count) for row in self.ledger.claim("w", 1, ["sales"], [BOX])]


def _backlog(tmp_path: Path, ledger: Ledger, clock: FakeClock, database_url: str, share: float | None = None) -> Queue:
    """30 follow-ups due a minute apart, after 30 first steps due before any of them: ordered by due time alone,
    every first step would go first."""
    queue = Queue(tmp_path, ledger, clock, database_url, share)
    queue.add("a", LEADS)
    queue.send_all(gap_s=60)  # their follow-ups: due a day after each, from START + 1d
    clock.now_s = START + DAY - 3600
    queue.add("b", LEADS)  # 30 first steps, due an hour before the first follow-up
    clock.now_s = START + 2 * DAY
    return queue


@pytest.mark.parametrize("share", [None, 0.5])
def test_with_too_little_capacity_follow_ups_get_their_share_oldest_first_and_first_steps_the_rest(
        tmp_path: Path, timed: Ledger, clock: FakeClock, database_url: str, share: float | None) -> None:
    queue = _backlog(tmp_path, timed, clock, database_url, share)
    followups, first_steps = queue.due(2), queue.due(1)
    assert (len(followups), len(first_steps)) == (LEADS, LEADS)
    # Three hours earlier, claims that took the 5 oldest follow-ups (and first steps) gave them back, not before
    # an hour later (their mailbox at its cap, say): they keep their place ahead of the follow-ups due after them.
    clock.advance(-3 * 3600)
    given_back: list[tuple[int, int]] = []
    while sum(step == 2 for step, _ in given_back) < 5:
        given_back += queue.claim(1)
    for _step, row_id in given_back:
        assert timed.unclaim(row_id, 3600, "mailbox at its cap")
    assert [row_id for step, row_id in given_back if step == 2] == followups[:5]
    clock.now_s = START + 2 * DAY

    claimed = queue.claim(CAPACITY)

    expected_share = DEFAULT_FOLLOWUPS_SHARE if share is None else share
    taken_followups = [row_id for step, row_id in claimed if step == 2]
    taken_first = [row_id for step, row_id in claimed if step == 1]
    assert len(claimed) == CAPACITY
    # of k claims in a row while both kinds are due, floor(k * share) or ceil(k * share) go to follow-ups
    assert len(taken_followups) >= math.floor(CAPACITY * expected_share)
    assert len(taken_first) >= math.floor(CAPACITY * (1 - expected_share))
    assert taken_followups == followups[:len(taken_followups)]  # the oldest, the given-back ones among them
    assert set(followups[:5]) <= set(taken_followups)
    assert taken_first == first_steps[:len(taken_first)]


@pytest.mark.parametrize("kind", [1, 2])
def test_with_only_one_kind_due_it_takes_the_whole_capacity(tmp_path: Path, timed: Ledger, clock: FakeClock,
                                                            database_url: str, kind: int) -> None:
    queue = Queue(tmp_path, timed, clock, database_url, None)
    queue.add("a", LEADS)
    if kind == 2:
        queue.send_all(gap_s=60)
        clock.now_s = START + 2 * DAY
    oldest = queue.due(kind)[:CAPACITY]

    claimed = queue.claim(CAPACITY)

    assert claimed == [(kind, row_id) for row_id in oldest]


def _due_at(database_url: str, row_id: int) -> datetime:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT due_at FROM sender_emails WHERE id = %s", (row_id,)).fetchone()
    assert row is not None
    return row[0]


def test_a_row_given_back_keeps_its_place_ahead_of_rows_due_after_it(tmp_path: Path, timed: Ledger, clock: FakeClock,
                                                                    database_url: str) -> None:
    queue = Queue(tmp_path, timed, clock, database_url, None)
    queue.add("a", 1)
    clock.advance(60)
    queue.add("b", 1)
    older, younger = queue.due(1)
    due = _due_at(database_url, older)
    (claimed,) = queue.claim(1)
    assert claimed == (1, older)
    assert timed.unclaim(older, 600, "no mailbox free")  # not before 10 minutes from now, after `younger`
    clock.advance(600)

    assert queue.claim(2) == [(1, older), (1, younger)]
    assert _due_at(database_url, older) == due


def test_a_retry_keeps_its_place_once_its_backoff_is_over(tmp_path: Path, timed: Ledger, clock: FakeClock,
                                                          database_url: str) -> None:
    queue = Queue(tmp_path, timed, clock, database_url, None)
    queue.add("a", 1)
    clock.advance(60)
    queue.add("b", 1)
    older, younger = queue.due(1)
    assert queue.claim(1) == [(1, older)]
    outcome, _mid = timed.begin_attempt(older, uuid.uuid4(), BOX, None, f"<{uuid.uuid4()}@sender.example>", "Hello")
    assert outcome == "ok"
    timed.settle(older, Settle.RETRY, "451 try later", delay_s=1800)
    clock.advance(1800)

    assert queue.claim(2) == [(1, older), (1, younger)]


def test_campaigns_whose_shares_differ_each_get_the_kind_their_share_gives_the_turn(
        tmp_path: Path, timed: Ledger, clock: FakeClock, database_url: str) -> None:
    # `all` gives every turn to its follow-ups, `none` to its first steps: the follow-ups of `all` and the first
    # steps of `none` go first (in that order, each oldest first), then what is left of each
    every, never = (Queue(tmp_path, timed, clock, database_url, share, name) for share, name in ((1, "all"),
                                                                                               (0, "none")))
    for queue in (every, never):
        queue.add(f"{queue.name}-a", 3)
    every.send_all(gap_s=60)  # both campaigns' first steps go: one kind due, whatever the share
    clock.now_s = START + DAY - 3600
    for queue in (every, never):
        queue.add(f"{queue.name}-b", 3)
    clock.now_s = START + 2 * DAY
    expected = every.due(2) + never.due(1)
    leftover = set(every.due(1) + never.due(2))

    claimed = [row_id for _step, row_id in every.claim(12)]

    assert claimed[:6] == expected
    assert set(claimed[6:]) == leftover
