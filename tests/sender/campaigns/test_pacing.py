"""The pacing keys of a campaign file: parsed to typed values, each bad one refused at its line."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from sender.campaigns.pacing import HourRange, Pacing, Window
from sender.campaigns.spec import load_campaign
from sendhost.errors import ConfigError

HEAD = """\
name: paced
group: sales
steps:
  - {subject: Hello, body: Hi}
"""


def load(tmp_path: Path, pacing: str) -> Pacing:
    path = tmp_path / "campaign.yml"
    path.write_text(HEAD + pacing, encoding="utf-8")
    return load_campaign(path).pacing


def refused(tmp_path: Path, pacing: str) -> str:
    path = tmp_path / "campaign.yml"
    path.write_text(HEAD + pacing, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_campaign(path)
    return str(raised.value).removeprefix(f"{path}:")


def test_every_pacing_key_reads_as_a_typed_value(tmp_path: Path) -> None:
    pacing = load(tmp_path, """\
timezone: America/New_York
window: {days: [fri, mon], hours: ["13:00-17:00", "00:00-01:30", "22:00-24:00"]}
skip_dates: [2026-12-25, "2026-12-24", "2026-12-25"]
daily_cap: 120
max_per_mailbox_per_day: 40
followups_share: 1
allow_other_campaigns: true
""")
    assert pacing.timezone == "America/New_York"
    assert pacing.window == Window((0, 4), (HourRange(0, 90), HourRange(780, 1020), HourRange(1320, 1440)))
    assert pacing.skip_dates == (date(2026, 12, 24), date(2026, 12, 25))
    assert (pacing.daily_cap, pacing.max_per_mailbox_per_day) == (120, 40)
    assert pacing.followups_share == 1.0 and pacing.allow_other_campaigns is True


def test_hour_ranges_print_as_written() -> None:
    assert [str(HourRange(540, 720)), str(HourRange(1320, 1440))] == ["09:00-12:00", "22:00-24:00"]


def test_ranges_that_touch_do_not_overlap(tmp_path: Path) -> None:
    pacing = load(tmp_path, 'window: {days: [mon], hours: ["12:00-13:00", "09:00-12:00"]}\n')
    assert pacing.window is not None
    assert pacing.window.hours == (HourRange(540, 720), HourRange(720, 780))


@pytest.mark.parametrize(("pacing", "expected"), [
    ("timezone: Mars/Olympus\n", "5: timezone: 'Mars/Olympus' is not an IANA time zone like Europe/Berlin"),
    ("timezone: ../../etc/passwd\n", "5: timezone: '../../etc/passwd' is not an IANA time zone"),
    ('window: {days: [mon], hours: ["25:00-26:00"]}\n', "5: window.hours: '25:00-26:00' is not a range of local times"),
    ('window: {days: [mon], hours: ["09:60-10:00"]}\n', "5: window.hours: '09:60-10:00' is not a range"),
    ('window: {days: [mon], hours: ["9:00-10:00"]}\n', "5: window.hours: '9:00-10:00' is not a range"),
    ('window: {days: [mon], hours: ["24:00-24:00"]}\n', "5: window.hours: '24:00-24:00' is not a range"),
    ('window: {days: [mon], hours: ["17:00-09:00"]}\n', "5: window.hours: '17:00-09:00' ends before it starts"),
    ('window: {days: [mon], hours: ["09:00-09:00"]}\n', "5: window.hours: '09:00-09:00' ends before it starts"),
    ('window:\n  days: [mon]\n  hours:\n    - "09:00-12:00"\n    - "11:00-13:00"\n',
     "9: window.hours: 11:00-13:00 overlaps 09:00-12:00; make the ranges disjoint"),
    ('window: {days: [mon], hours: []}\n', "5: window.hours: no range listed"),
    ('window: {days: [], hours: ["09:00-10:00"]}\n', "5: window.days: no day listed"),
    ('window: {days: [Monday], hours: ["09:00-10:00"]}\n', "5: window.days: 'Monday' is not a day; use mon, tue"),
    ('window: {days: [mon, mon], hours: ["09:00-10:00"]}\n', "5: window.days: mon is listed twice"),
    ('window: {days: [mon], hours: ["09:00-10:00"], tz: UTC}\n', "5: window.tz: unknown key"),
    ("window: weekdays\n", "5: window: expected a mapping of keys, got text"),
    ("skip_dates: [2026-02-30]\n", "5: '2026-02-30' is not a real date or time"),
    ('skip_dates: ["2026-02-30"]\n', "5: skip_dates: '2026-02-30' (text) is not a date like 2026-12-24"),
    ('skip_dates: ["20261224"]\n', "5: skip_dates: '20261224' (text) is not a date"),
    ("skip_dates: [2026-12-24 10:00:00]\n", "5: skip_dates: datetime.datetime(2026, 12, 24, 10, 0)"),
    ("daily_cap: 0\n", "5: daily_cap: 0 is outside 1..1000000"),
    ("daily_cap: 1.5\n", "5: daily_cap: expected a whole number, got a number 1.5"),
    ("daily_cap: true\n", "5: daily_cap: expected a whole number, got true/false"),
    ("max_per_mailbox_per_day: 0\n", "5: max_per_mailbox_per_day: 0 is outside 1..1000000"),
    ("followups_share: 1.5\n", "5: followups_share: expected a share from 0 to 1, like 0.8, got 1.5"),
    ("followups_share: -0.1\n", "5: followups_share: expected a share from 0 to 1"),
    ('allow_other_campaigns: "yes"\n', "5: allow_other_campaigns: expected true or false, got text 'yes'"),
])
def test_a_bad_pacing_key_is_refused_at_its_line(tmp_path: Path, pacing: str, expected: str) -> None:
    assert refused(tmp_path, pacing).startswith(expected)
