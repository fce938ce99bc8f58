"""The simulation's campaign keeps the sequence rules, checked after the run from the ledger's rows of every lead
(`Ledger.lead_rows`, read before the embedded PostgreSQL stopped) and from what the submission server recorded,
never from the summary's claims: step k+1 accepted after step k and its delay, from the same mailbox, in its
thread; nothing sent after a reply, a bounce or an unsubscribe ended the sequence."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import date, datetime, time
from zoneinfo import ZoneInfo

import pytest

from simulation import SimResult
from simulation.campaign import SequenceRow
from simulation.summary import summarize

pytestmark = pytest.mark.slow  # whole simulations (shared with test_invariants through the session fixture)

SEEDS = (1, 2, 3)
DELAYS_S = {2: 3 * 86_400, 3: 4 * 86_400}  # the simulation's campaign: 0s, 3d, 4d
ENDED_BY_FEEDBACK = ("replied", "bounced", "unsubscribed")


def _leads(result: SimResult) -> dict[str, dict[int, SequenceRow]]:
    leads: dict[str, dict[int, SequenceRow]] = defaultdict(dict)
    for row in result.sequences:
        assert row.step not in leads[row.address], f"{row.address} has two rows of step {row.step}"
        leads[row.address][row.step] = row
    return leads


@pytest.mark.parametrize("seed", SEEDS)
def test_every_step_after_its_predecessor_and_its_delay_from_the_same_mailbox(
        simulate: Callable[..., SimResult], seed: int) -> None:
    leads = _leads(simulate(seed))
    followed = 0
    for lead, steps in leads.items():
        assert 1 in steps, f"{lead} has no first step"
        for step in sorted(steps)[1:]:
            earlier, row = steps[step - 1], steps[step]
            assert earlier.accepted_at is not None, f"{lead}: step {step} exists, step {step - 1} was never sent"
            if row.accepted_at is None:
                continue
            assert row.accepted_at >= earlier.accepted_at + DELAYS_S[step], (lead, step)
            assert row.mailbox == steps[1].mailbox, f"{lead}: step {step} from {row.mailbox}, not {steps[1].mailbox}"
            followed += 1
    assert followed >= 100, "too few follow-ups sent to say anything"


@pytest.mark.parametrize("seed", SEEDS)
def test_nothing_is_sent_after_a_reply_bounce_or_unsubscribe(simulate: Callable[..., SimResult], seed: int) -> None:
    result = simulate(seed)
    leads = _leads(result)
    ended: Counter[str] = Counter()
    for lead, steps in leads.items():
        reason, ended_at = steps[1].ended, steps[1].ended_at
        if reason not in ENDED_BY_FEEDBACK:
            continue
        assert ended_at is not None
        ended[reason] += 1
        sent_after = [s for s, row in steps.items() if row.accepted_at is not None and row.accepted_at > ended_at]
        assert not sent_after, f"{lead} ended {reason} and was sent step {sent_after} after"
        # Its later steps were never created, or cancelled: none waits to go.
        assert all(row.status not in ("queued", "waiting", "retry") for row in steps.values()), (lead, steps)
    assert set(ended) == set(ENDED_BY_FEEDBACK), f"the run should end sequences of each kind: {ended}"
    # Each feedback the recipients gave reached its row through the reader's parser or the one-click token.
    assert result.log.reactions and all(r.applied in ("applied", "recorded") for r in result.log.reactions)
    # And the server saw no message to a lead after the lead's first answer that ends a sequence (an out-of-office
    # ends none).
    answered: dict[str, float] = {}
    for reaction in result.log.reactions:
        if reaction.event in ENDED_BY_FEEDBACK:
            answered.setdefault(reaction.address, reaction.at)
    for send in result.log.sends:
        assert send.address is not None
        assert send.at < answered.get(send.address, float("inf")), f"{send.address} mailed after answering"


@pytest.mark.parametrize("seed", SEEDS)
def test_an_out_of_office_ends_nothing_and_no_step_goes_before_the_day_after_its_return(
        simulate: Callable[..., SimResult], seed: int) -> None:
    result = simulate(seed)
    leads = _leads(result)
    held = [r for r in result.log.reactions if r.held_until is not None]
    assert held, "the run should hold some leads"
    for reaction in held:
        assert (reaction.kind, reaction.event, reaction.applied) == ("away", "auto_replied", "recorded")
        tz = ZoneInfo(result.lead_timezones.get(reaction.address) or "UTC")
        until = datetime.combine(date.fromisoformat(reaction.held_until or ""), time(), tzinfo=tz).timestamp()
        for row in leads[reaction.address].values():
            if row.accepted_at is not None and row.accepted_at > reaction.at:
                assert row.accepted_at >= until, (reaction.address, row.step, reaction.held_until)
    # the auto-reply ended none of them: each is still going, or ended for a reason of its own later on
    assert all(leads[r.address][1].ended in (None, "completed") or leads[r.address][1].ended_at > r.at
               for r in held)
    # "please remove me" replies were read as what they ask: unsubscribes
    stops = [r for r in result.log.reactions if r.kind == "stop"]
    assert stops and all(r.event == "unsubscribed" for r in stops)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_server_saw_each_lead_in_order_in_one_thread_from_one_login(simulate: Callable[..., SimResult],
                                                                       seed: int) -> None:
    result = simulate(seed)
    step_of = {row.message_id: (row.address, row.step) for row in result.sequences if row.message_id}
    by_lead: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for delivery in result.delivered:  # in the order the server accepted them
        lead, step = step_of[delivery.message_id]  # every message the server saw is a row of a lead
        assert lead == delivery.rcpt
        by_lead[lead].append((step, delivery.message_id))
    deliveries = {d.message_id: d for d in result.delivered}
    for lead, seen in by_lead.items():
        assert [step for step, _mid in seen] == list(range(1, len(seen) + 1)), f"{lead} got steps {seen}"
        first = deliveries[seen[0][1]]
        assert len({deliveries[mid].login for _step, mid in seen}) == 1, f"{lead} mailed by two mailboxes"
        for index, (_step, mid) in enumerate(seen[1:], start=1):
            message = deliveries[mid]
            earlier = [m for _s, m in seen[:index]]
            assert message.subject == f"Re: {first.subject}"
            assert message.in_reply_to == earlier[-1] and list(message.references) == earlier, (lead, index)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_summary_counts_each_step_as_the_ledger_holds_it(simulate: Callable[..., SimResult], seed: int) -> None:
    result = simulate(seed)
    [campaign] = summarize(result).campaigns
    statuses = Counter((row.step, row.status) for row in result.sequences)
    for line in campaign.steps:
        count = {status: n for (step, status), n in statuses.items() if step == line.step}
        handed = sum(count.get(s, 0) for s in ("sent", "delivered", "replied", "bounced", "unsubscribed",
                                                "complained"))
        assert line.sent == handed == sum(1 for s in result.log.sends
                                          if _step(result, s.message_id) == line.step)
        assert (line.replied, line.bounced, line.cancelled) == (
            count.get("replied", 0), count.get("bounced", 0), count.get("cancelled", 0))
        assert line.queued == sum(count.get(s, 0) for s in ("queued", "retry", "sending"))
    ends = Counter(row.ended for row in result.sequences if row.step == 1 and row.ended)
    assert campaign.ended == dict(ends) and campaign.going == campaign.leads - sum(ends.values())
    assert campaign.ended.get("completed", 0) > 0, "some sequences should run all three steps"


def _step(result: SimResult, message_id: str | None) -> int | None:
    return next((row.step for row in result.sequences if row.message_id == message_id), None)


@pytest.mark.parametrize("seed", SEEDS[:1])
def test_recipients_click_people_and_scanners_and_the_summary_counts_each_step_apart(
        simulate: Callable[..., SimResult], seed: int) -> None:
    result = simulate(seed)
    [campaign] = summarize(result).campaigns
    verdicts = Counter(click.verdict for click in result.log.clicks)
    assert verdicts["human"] > 0 and verdicts["scanner"] > 0 and verdicts["unmatched"] == 0, verdicts
    rows: dict[str, set[tuple[int | None, int | None]]] = defaultdict(set)
    for click in result.log.clicks:
        rows[click.verdict].add((_step(result, click.message_id), click.row))
    for line in campaign.steps:
        # a row a scanner walked (even one a person clicked too) counts apart; only a person's click is a click
        assert line.clicked == sum(1 for step, _row in rows["human"] if step == line.step), line
        assert line.scanned == sum(1 for step, _row in rows["scanner"] if step == line.step), line
    assert campaign.steps[0].clicked > 0 and campaign.steps[0].scanned > 0
    assert campaign.steps[2].clicked == campaign.steps[2].scanned == 0  # step 3 carries no link
