"""What a new version of a campaign file changes: steps added, removed, changed; pacing; newly needed fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from sender.campaigns.changes import changes
from sender.campaigns.spec import CampaignSpec, load_campaign
from tests.sender.campaigns.test_spec import MINIMAL


def spec(tmp_path: Path, text: str, name: str = "v.yml") -> CampaignSpec:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return load_campaign(path)


def test_the_same_file_elsewhere_changes_nothing(tmp_path: Path) -> None:
    # Lines and paths differ (a comment on top moves every line); the campaign is the same.
    diff = changes(spec(tmp_path, MINIMAL, "a.yml"), spec(tmp_path, "# moved\n" + MINIMAL, "b.yml"))
    assert diff.empty and diff.lines == ()


def test_a_changed_delay_subject_and_body_name_their_step(tmp_path: Path) -> None:
    new = (MINIMAL.replace("delay: 3d", "delay: 5d").replace("Last one from me", "Final note")
           .replace('{delay: 4d, body', '{delay: 4d, subject: "A new thread", body'))
    diff = changes(spec(tmp_path, MINIMAL, "a.yml"), spec(tmp_path, new, "b.yml"))
    assert diff.steps_changed == (2, 3) and diff.steps_added == () and diff.steps_removed == ()
    assert diff.lines == ("steps[2].delay: 3d -> 5d",
                          "steps[3].subject: '(reply in the thread)' -> 'A new thread'",
                          "steps[3].body: changed")


def test_steps_added_and_removed_are_counted_from_the_end(tmp_path: Path) -> None:
    three = spec(tmp_path, MINIMAL, "a.yml")
    four = spec(tmp_path, MINIMAL + '  - {delay: 7d, body: "Really the last"}\n', "b.yml")
    assert changes(three, four).steps_added == (4,) and changes(three, four).lines == ("steps[4]: added",)
    assert changes(four, three).steps_removed == (4,)


def test_pacing_group_and_fields_changes_are_named(tmp_path: Path) -> None:
    new = (MINIMAL.replace("group: sales", "group: support")
           .replace("fields: [first_name, company]", "fields: [first_name, company, city]")
           + "daily_cap: 50\ntimezone: Europe/Berlin\n")
    diff = changes(spec(tmp_path, MINIMAL, "a.yml"), spec(tmp_path, new, "b.yml"))
    assert diff.group_changed and diff.pacing_changed == ("timezone", "daily_cap")
    assert diff.lines == ("group: sales -> support", "fields: first_name, company -> first_name, company, city",
                          "timezone: 'UTC' -> 'Europe/Berlin'", "daily_cap: - -> 50")


def test_pacing_values_are_said_as_the_file_writes_them(tmp_path: Path) -> None:
    new = MINIMAL + ('skip_dates: [2026-12-24, 2026-12-31]\nallow_other_campaigns: true\n'
                     'window: {days: [mon, tue], hours: ["13:00-17:00", "09:00-12:00"]}\n')
    diff = changes(spec(tmp_path, MINIMAL, "a.yml"), spec(tmp_path, new, "b.yml"))
    assert diff.lines == ("window: - -> mon, tue 09:00-12:00, 13:00-17:00",
                          "skip_dates: - -> 2026-12-24, 2026-12-31", "allow_other_campaigns: false -> true")


def test_a_field_newly_needed_without_fallback_is_reported_for_the_leads_already_in(tmp_path: Path) -> None:
    new = MINIMAL.replace("Hi {first_name|there}", "Hi {first_name}")
    diff = changes(spec(tmp_path, MINIMAL, "a.yml"), spec(tmp_path, new, "b.yml"))
    assert diff.newly_required_fields == {"first_name"} and diff.steps_changed == (1,)


def test_two_different_campaigns_are_not_compared(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="two campaigns"):
        changes(spec(tmp_path, MINIMAL, "a.yml"), spec(tmp_path, MINIMAL.replace("q1-founders", "q2"), "b.yml"))
