"""The simulation's campaign file and its recipients' answers, without a run: the campaign is what the campaign
file's own loader accepts, and each answer is what the inbox reader's parser classifies as meant."""

from __future__ import annotations

import random
from pathlib import Path

from sender.campaigns.spec import load_campaign
from sender.feedback.bounces import MessageKind, parse
from simulation.campaign import campaign_file, campaign_name, campaign_spec
from simulation.mail import Delivery
from simulation.model import Reactions
from simulation.recipients import Kind, Recipients, bounce_report, reply_message

STEP_1 = Delivery("127.1.0.1", "alice@example.com", "alice@example.com", "lead-1@leads.example",
                  "<one@example.com>", "A question, Ada", None, (), "https://unsubscribe.invalid/u/t0k3n")
STEP_2 = Delivery("127.1.0.1", "alice@example.com", "alice@example.com", "lead-1@leads.example",
                  "<two@example.com>", "Re: A question, Ada", "<one@example.com>", ("<one@example.com>",), None)


def test_the_campaign_has_three_steps_the_later_two_replies_in_the_thread(tmp_path: Path) -> None:
    spec, text = campaign_spec("Sales Team", ["Sales Team", "other"])
    assert (spec.name, spec.group) == ("sim-sales-team", "Sales Team")
    assert [(step.delay_s, step.subject is None) for step in spec.steps] == [
        (0, False), (3 * 86_400, True), (4 * 86_400, True)]
    assert spec.required_fields == frozenset()  # every field has a fallback: a lead without a name still gets it
    # The text applied is a campaign file a person could apply as it is.
    path = tmp_path / "campaign.yml"
    path.write_text(campaign_file("default"))
    assert load_campaign(path, {"default"}).steps == campaign_spec("default", ["default"])[0].steps
    assert "{unsubscribe_url}" in text


def test_campaign_names_are_names_the_ledger_takes() -> None:
    assert campaign_name("default") == "sim-default"
    assert campaign_name("EU/Outbound 2") == "sim-eu-outbound-2"
    assert campaign_name("###") == "sim-group"


def test_a_bounce_report_is_a_hard_bounce_about_the_message_and_its_recipient() -> None:
    parsed = parse(bounce_report(STEP_1, 1.8e9))
    assert parsed.kind is MessageKind.HARD_BOUNCE
    assert parsed.about[0] == "<one@example.com>"
    assert parsed.recipients == frozenset({"lead-1@leads.example"})


def test_a_reply_is_a_reply_about_the_message_it_answers() -> None:
    for delivery in (STEP_1, STEP_2):
        parsed = parse(reply_message(delivery, 1.8e9, 7))
        assert parsed.kind is MessageKind.REPLY
        assert parsed.about[0] == delivery.message_id
        assert parsed.sender == "lead-1@leads.example"


def test_the_recipients_answer_at_their_rates_and_the_same_seed_answers_the_same() -> None:
    rates = Reactions(bounce=0.1, reply=(0.2, 0.1, 0.1), unsubscribe=(0.05, 0.05, 0.05))

    def answers(seed: int) -> list[tuple[str, Kind | None]]:
        people = Recipients(random.Random(seed), rates)
        found = []
        for n in range(4000):
            delivery = Delivery("p", "a@x", "a@x", f"lead-{n}@leads.example", f"<{n}@x>")
            reaction = people.receive(delivery, 0.0)
            found.append((delivery.rcpt, None if reaction is None else reaction.kind))
        return found

    first = answers(3)
    assert first == answers(3) and first != answers(4)
    kinds = [kind for _rcpt, kind in first]
    assert 0.08 < kinds.count(Kind.BOUNCE) / len(kinds) < 0.12
    # Of those whose address exists, about a fifth reply to a first message and one in twenty unsubscribes.
    assert 0.16 < kinds.count(Kind.REPLY) / len(kinds) < 0.2
    assert 0.03 < kinds.count(Kind.UNSUBSCRIBE) / len(kinds) < 0.06


def test_only_a_first_message_bounces() -> None:
    people = Recipients(random.Random(1), Reactions(bounce=1.0, reply=(0.0,), unsubscribe=(0.0,)))
    first = people.receive(STEP_1, 0.0)
    assert first is not None and first.kind is Kind.BOUNCE
    assert people.receive(STEP_2, 0.0) is None


def test_an_out_of_office_is_read_as_automatic_naming_its_return_day_and_a_remove_me_as_a_stop() -> None:
    from datetime import date

    from sender.feedback.inbox import read_reply
    from sender.feedback.reply_kinds import ReplyKind

    now = 1.8e9  # 2027-01-15
    away = read_reply(raw := reply_message(STEP_1, now, 8, Kind.AWAY, 5), parse(raw), date(2027, 1, 15))
    assert away is not None and away.kind is ReplyKind.AUTOMATIC
    assert (away.back_on, away.hold_until) == (date(2027, 1, 20), date(2027, 1, 21))
    stop = read_reply(raw := reply_message(STEP_2, now, 9, Kind.STOP), parse(raw), date(2027, 1, 15))
    assert stop is not None and stop.kind is ReplyKind.STOP


def test_some_recipients_are_away_and_some_ask_to_be_removed() -> None:
    rates = Reactions(bounce=0.0, reply=(0.0,), unsubscribe=(0.0,), away=(0.2,), stop=(0.1,), away_days=(3, 9))
    people = Recipients(random.Random(5), rates)
    found = [people.receive(Delivery("p", "a@x", "a@x", f"lead-{n}@leads.example", f"<{n}@x>"), 0.0)
             for n in range(2000)]
    kinds = [r.kind for r in found if r is not None]
    assert 0.17 < kinds.count(Kind.AWAY) / len(found) < 0.23 and 0.08 < kinds.count(Kind.STOP) / len(found) < 0.12
    assert {r.away_days for r in found if r is not None and r.kind is Kind.AWAY} == set(range(3, 10))
    assert all(r.at <= 600 for r in found if r is not None and r.kind is Kind.AWAY)  # within minutes
