"""What bound a run (simulation.bounds), named from the run's own sends and caps: made-up runs of the example
inventory, one per limit."""

from __future__ import annotations

from datetime import timedelta

from simulation.bounds import run_bound
from tests.simulation.runs import MONDAY, MadeRun

MAILBOXES = ("alice@example.com", "bob@example.com", "carol@example.org")


def _weekdays(run: MadeRun, share: float = 1.0) -> None:
    """Each mailbox sends `share` of its cap on each weekday of the run, inside the window (09:00-17:00 UTC)."""
    lead = 0
    for n in range(run.days):
        day = MONDAY + timedelta(days=n)
        if day.weekday() >= 5:
            continue
        for mailbox in MAILBOXES:
            for index in range(int(run.cap(mailbox, day) * share)):
                lead += 1
                run.send(mailbox, day, 10 + index * 0.1, f"lead-{lead}@leads.example")


def test_mailboxes_at_their_caps_bind_and_the_leads_beyond_them_are_counted() -> None:
    run = MadeRun(days=7, turned_away=1201)
    _weekdays(run)
    bound = run_bound(run.result(), imported=350, queued=0)
    assert bound.limit == "mailbox-caps"
    # Monday to Friday, none at the weekend; only whole local days count: Berlin's Monday began before the run's
    # first UTC midnight, so bob's weekdays are Tuesday to Friday.
    assert (bound.open_days, bound.day_word, bound.mailbox_days, bound.mailbox_days_at_cap) == (5, "weekday", 14, 14)
    assert bound.text() == (
        "50 sends a day (70 a weekday, none on the others): the 3 mailboxes' warm-up caps (70 a weekday together, "
        "10 to 40 a day on the ramp each; at its cap on 14 of 14 mailbox-weekdays); 1,201 of the 1,551 leads that "
        "came in arrived beyond it (turned away, 0 of them while their window was closed)")
    assert bound.to_json()["limit"] == "mailbox-caps" and bound.to_json()["text"] == bound.text()


def test_below_the_caps_with_leads_turned_away_while_their_window_was_closed_the_window_binds() -> None:
    run = MadeRun(days=7, turned_away=40, turned_away_closed=30)
    _weekdays(run, share=0.5)
    bound = run_bound(run.result(), imported=100, queued=12)
    assert bound.limit == "window" and bound.mailbox_days_at_cap == 0
    assert "the window's hours (mon, tue, wed, thu, fri 09:00-17:00): a lead arriving while its window is closed" \
        in bound.text()
    assert bound.text().endswith("40 of the 140 leads that came in arrived beyond it (turned away, 30 of them while "
                                 "their window was closed); 12 rows still queued at the end")


def test_below_the_caps_with_leads_turned_away_in_their_window_the_senders_pace_binds() -> None:
    run = MadeRun(days=7, turned_away=40, turned_away_closed=10)
    _weekdays(run, share=0.5)
    bound = run_bound(run.result(), imported=100, queued=0)
    assert bound.limit == "gap" and "the senders' pace (each mailbox's minimum gap" in bound.text()


def test_below_the_caps_with_nothing_left_the_leads_bound() -> None:
    run = MadeRun(days=7, pacing="")
    _weekdays(run, share=0.5)
    bound = run_bound(run.result(), imported=100, queued=0)
    assert bound.limit == "leads" and bound.day_word == "day" and bound.open_days == 7
    assert "the leads coming in: every step due went out" in bound.text() and "turned away" not in bound.text()


def test_a_campaign_at_its_daily_cap_binds_before_the_mailboxes() -> None:
    run = MadeRun(days=7, pacing='window: {days: [mon, tue, wed, thu, fri], hours: ["09:00-17:00"]}\ndaily_cap: 30\n')
    lead = 0
    for n in range(5):
        for index in range(30):
            lead += 1
            run.send(MAILBOXES[index % 3], MONDAY + timedelta(days=n), 10 + index * 0.1, f"lead-{lead}@leads.example")
    bound = run_bound(run.result(), imported=150, queued=40)
    assert bound.limit == "campaign-cap"
    assert (bound.campaign_cap, bound.campaign_days, bound.campaign_days_at_cap) == (30, 5, 5)
    assert "the campaigns' daily caps (30 a day together; reached on 5 of 5 campaign-weekdays)" in bound.text()
