"""The campaign file: checked whole, each problem `file:line: key: problem`, exit 2."""

from __future__ import annotations

import re
import textwrap
from datetime import date
from pathlib import Path

import pytest

from sender.campaigns.pacing import HourRange, Pacing, Window
from sender.campaigns.spec import CampaignError, load_campaign
from sendhost.errors import ConfigError
from tests.conftest import REPO_ROOT
from toolkit.inventory import load_inventory

MINIMAL = """\
name: q1-founders
group: sales
fields: [first_name, company]
steps:
  - {delay: 0s, subject: "Quick question, {first_name|there}", body: "Hi {first_name|there}, ..."}
  - {delay: 3d, body: "Following up on my note about {company} ..."}
  - {delay: 4d, body: "Last one from me ..."}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "campaign.yml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def refused(tmp_path: Path, text: str, groups: set[str] | None = None) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_campaign(path, groups)
    assert raised.value.exit_code == 2
    message = str(raised.value)
    assert message.startswith(f"{path}:"), message
    return message.removeprefix(f"{path}:")


def test_the_issues_example_reads_as_three_steps_each_delayed_after_the_previous(tmp_path: Path) -> None:
    spec = load_campaign(write(tmp_path, MINIMAL), {"sales"})
    assert (spec.name, spec.group, spec.fields) == ("q1-founders", "sales", ("first_name", "company"))
    assert [(s.number, s.delay_s) for s in spec.steps] == [(1, 0), (2, 3 * 86_400), (3, 4 * 86_400)]
    assert spec.steps[0].subject is not None and spec.steps[0].subject.text == "Quick question, {first_name|there}"
    assert spec.steps[1].subject is None and spec.steps[2].subject is None
    assert [s.line for s in spec.steps] == [5, 6, 7]
    assert spec.required_fields == {"company"}
    assert spec.used_fields == {"first_name", "company"}
    assert spec.pacing == Pacing()  # no pacing keys: UTC, no window, only the mailboxes' caps


def test_the_shipped_example_parses_against_the_example_inventorys_groups() -> None:
    groups = {m.group for m in load_inventory(REPO_ROOT / "inventory.example.yml").mailboxes}
    spec = load_campaign(REPO_ROOT / "campaign.example.yml", groups)
    assert spec.group in groups and len(spec.steps) == 3
    assert spec.pacing.timezone == "Europe/Berlin"
    assert spec.pacing.window == Window((0, 1, 2, 3, 4), (HourRange(540, 720), HourRange(780, 1020)))
    assert spec.pacing.daily_cap == 120 and spec.pacing.max_per_mailbox_per_day == 40
    assert date(2026, 12, 25) in spec.pacing.skip_dates
    assert "\n\n" in spec.steps[0].body.text and "unsubscribe_url" in spec.steps[0].body.names


def test_step_1_may_leave_out_its_delay(tmp_path: Path) -> None:
    spec = load_campaign(write(tmp_path, MINIMAL.replace("delay: 0s, ", "")))
    assert spec.steps[0].delay_s == 0


@pytest.mark.parametrize(("change", "expected"), [
    (("group: sales", "group: sales\ncolour: blue"), "3: colour: unknown key; the keys here are name, group"),
    (("{delay: 3d, body", "{delay: 3d, colour: blue, body"), "6: steps[2].colour: unknown key"),
    (("delay: 3d", "delay: 3 days"), "6: steps[2].delay: '3 days' is not a duration like 0s"),
    (("delay: 3d", "delay: 3"), "6: steps[2].delay: 3 is not a duration like 0s, 90s, 30m, 4h, 3d or 1d12h; write 3s"),
    (("about {company}", "about {compnay}"),
     "6: steps[2].body: unknown merge field {compnay}: the file declares first_name, company; add it under fields:"),
    (("fields: [first_name, company]\n", ""), "4: steps[1].subject: unknown merge field {first_name}: the file "
                                              "declares no fields"),
    (("about {company}", "about {0.__class__}"), "6: steps[2].body: the field {0.__class__} at character"),
    (("Quick question, ", "{unsubscribe_url} "), "5: steps[1].subject: unknown merge field {unsubscribe_url}: a "
                                                 "subject cannot hold it"),
    (("{delay: 0s, subject: \"Quick question, {first_name|there}\", ", "{"), "5: steps[1]: step 1 needs a subject"),
    (("delay: 0s", "delay: 1h"), "5: steps[1].delay: step 1 goes as soon as"),
    (("delay: 4d", "delay: 0s"), "7: steps[3].delay: a follow-up waits more than 0s and at most 365d"),
    (("delay: 4d", "delay: 366d"), "7: steps[3].delay: a follow-up waits more than 0s and at most 365d"),
    (("{delay: 4d, body", "{body"), "7: steps[3].delay: required key is missing: how long after step 2"),
    (("Quick question", "Quick\\r\\nBcc: all@x.example"),
     "5: a value holds the control character '\\r' at character 6"),
    (("Quick question", "Quick\\nquestion"), "5: steps[1].subject: holds a line feed (LF) at character 6; a "
                                             "subject is one line"),
    (("Last one from me", "Last \\e[2J one"), "7: a value holds the control character '\\x1b'"),
    (('"Last one from me ..."', '" "'), "7: steps[3].body: a body has 1 to 100000 characters"),
    (("name: q1-founders", "name: Q1 Founders"), "1: name: 'Q1 Founders' is not a campaign name"),
    (("name: q1-founders", "name: q1-{x}"), "1: name: 'q1-{x}' is not a campaign name"),
    (("name: q1-founders\n", ""), "1: name: required key is missing"),
    (("fields: [first_name, company]", "fields: [first_name, email]"), "3: fields: 'email' is not a merge field"),
    (("fields: [first_name, company]", "fields: [first_name, first_name]"), "3: fields: 'first_name' is listed twice"),
    (("fields: [first_name, company]", "fields: [First Name]"), "3: fields: 'First Name' is not a field name"),
    (("fields: [first_name, company]", "fields: first_name"), "3: fields: expected a list, got text"),
])
def test_a_bad_campaign_file_is_refused_at_the_line_of_the_key(tmp_path: Path, change: tuple[str, str],
                                                               expected: str) -> None:
    old, new = change
    assert old in MINIMAL
    assert refused(tmp_path, MINIMAL.replace(old, new, 1), {"sales"}).startswith(expected)


def test_a_group_no_mailbox_has_is_refused_naming_the_groups_there_are(tmp_path: Path) -> None:
    assert refused(tmp_path, MINIMAL, {"default", "support"}) == \
        "2: group: no mailbox is in group 'sales'; the inventory's mailbox groups are default, support"


def test_a_file_that_is_not_a_mapping_or_has_no_steps_is_refused(tmp_path: Path) -> None:
    assert refused(tmp_path, "- a\n- b\n") == "1: the file: expected a mapping of keys, got a list"
    assert refused(tmp_path, "name: x\ngroup: sales\nsteps: []\n") == "3: steps: no step; a campaign has at least one"
    step = '  - {delay: 1d, body: "x"}\n'
    many = "name: x\ngroup: sales\nsteps:\n  - {subject: s, body: b}\n" + step * 20
    assert refused(tmp_path, many) == "3: steps: 21 steps; at most 20"


def test_a_step_that_is_not_a_mapping_is_refused_at_its_line(tmp_path: Path) -> None:
    assert refused(tmp_path, MINIMAL.replace('  - {delay: 4d, body: "Last one from me ..."}', "  - just text")) \
        == "7: steps[3]: expected a mapping of keys, got text"


def test_a_campaign_file_of_nested_aliases_is_refused_at_the_line_that_passes_the_bound(tmp_path: Path) -> None:
    levels = "".join(f"x{n}: &x{n} [{', '.join([f'*x{n - 1}'] * 9)}]\n" for n in range(1, 9))
    text = MINIMAL + 'x0: &x0 ["{first_name}", b, c, d, e, f, g, h, i]\n' + levels
    assert refused(tmp_path, text, {"sales"}).startswith("13: the aliases in this file stand for more than")


def test_a_missing_file_is_a_configuration_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"{tmp_path / 'nope.yml'}: no such file; pass the campaign")):
        load_campaign(tmp_path / "nope.yml")


def test_a_campaign_error_exits_2() -> None:
    assert issubclass(CampaignError, ConfigError) and CampaignError("x").exit_code == 2


def test_the_guide_shows_the_shipped_examples_as_they_are() -> None:
    guide = (REPO_ROOT / "docs" / "campaigns.md").read_text(encoding="utf-8")
    example = (REPO_ROOT / "campaign.example.yml").read_text(encoding="utf-8")
    leads = (REPO_ROOT / "leads.example.csv").read_text(encoding="utf-8")
    assert f"```yaml\n{example}```" in guide
    assert f"```csv\n{leads}```" in guide


def test_tracking_is_off_unless_the_file_turns_it_on(tmp_path: Path) -> None:
    assert not load_campaign(write(tmp_path, MINIMAL)).tracking.on
    tracked = load_campaign(write(tmp_path, MINIMAL + "tracking: {clicks: true, domain: T.Example.com.}\n"))
    assert (tracked.tracking.clicks, tracked.tracking.opens, tracked.tracking.domain) == (True, False,
                                                                                         "t.example.com")


@pytest.mark.parametrize(("tracking", "expected"), [
    ("tracking: {clicks: true}", "8: tracking: tracking needs a domain of your own (domain: t.example.com"),
    ("tracking: {opens: true}", "8: tracking: tracking needs a domain of your own"),
    ("tracking: {clicks: true, domain: 'https://t.example.com'}", "8: tracking.domain: 'https://t.example.com' is "
                                                                 "not a host name"),
    ("tracking: {clicks: true, domain: localhost}", "8: tracking.domain: 'localhost' is not a host name"),
    ("tracking: {clicks: yes please, domain: t.example.com}", "8: tracking.clicks: expected true or false"),
    ("tracking: {links: true}", "8: tracking.links: unknown key; the keys here are clicks, opens, domain"),
    ("tracking: true", "8: tracking: expected a mapping of keys, got true/false"),
])
def test_tracking_without_a_domain_of_its_own_is_refused(tmp_path: Path, tracking: str, expected: str) -> None:
    assert refused(tmp_path, MINIMAL + tracking + "\n", {"sales"}).startswith(expected)
