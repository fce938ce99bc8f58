"""The HTML report opens in headless Chromium without console errors and shows its five charts."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from simulation import SimResult
from simulation.report_html import COLORS, STEP_PARTS, render_report
from simulation.summary import summarize
from tests.support.chromium import chromium_or_skip, console_messages, run_chromium
from tests.support.png import read_png

BAR_OPACITY = 0.75  # report_html draws bars at this fill-opacity over white


@pytest.fixture(scope="module")
def report(simulate: Callable[..., SimResult], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SimResult]:
    result = simulate(1)
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(render_report(result, summarize(result)), encoding="utf-8")
    return path, result


def test_report_is_self_contained(report: tuple[Path, SimResult]) -> None:
    page = report[0].read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "the page fetches something"
    assert "<script" not in page and "<link" not in page


def test_report_loads_without_console_errors_and_has_five_charts(report: tuple[Path, SimResult],
                                                                  tmp_path: Path) -> None:
    path, result = report
    run = run_chromium(chromium_or_skip(), path, tmp_path / "profile", "--dump-dom")
    assert run.returncode == 0, run.stderr[-2000:]
    assert console_messages(run.stderr) == []
    dom = run.stdout
    figures = re.findall(r'<figure class="chart" id="([\w-]+)">(.*?)</figure>', dom, flags=re.S)
    assert [name for name, _body in figures] == ["chart-sends", "chart-hours", "chart-in-service", "chart-parked",
                                                 "chart-steps-sim-default"]
    bodies = {name: body for name, body in figures}
    # Sends: one bar per mailbox per local day, each day's ramp cap drawn over it.
    mailboxes = len(result.inventory.mailboxes)
    bars = bodies["chart-sends"].count('<rect class="bar"')
    assert bars >= mailboxes * result.config.days
    assert bodies["chart-sends"].count('class="cap"') == bars
    # Hours: a strip of 24 hours per mailbox, each cell the sends in that hour of the mailbox's own clock; the
    # example's campaign has no window, so nothing is marked.
    cells = re.findall(r'<rect class="hour" data-mailbox="([^"]+)" data-hour="(\d+)" data-sends="(\d+)"',
                       bodies["chart-hours"])
    assert len(cells) == 24 * mailboxes
    zones = {m.address.lower(): ZoneInfo(m.timezone) for m in result.inventory.mailboxes}
    expected = Counter((s.mailbox, datetime.fromtimestamp(s.at, zones[s.mailbox]).hour) for s in result.log.sends)
    assert {(mailbox, int(hour)): int(sent) for mailbox, hour, sent in cells if int(sent)} == dict(expected)
    assert 'class="window"' not in bodies["chart-hours"] and "no sending window" in bodies["chart-hours"]
    # In service and parked: step lines with a point per sample.
    for name, series in (("chart-in-service", 2), ("chart-parked", 1)):
        paths = re.findall(r'<path class="series" d="([^"]+)"', bodies[name])
        assert len(paths) == series
        assert all(d.count("H") == len(result.log.samples) - 1 for d in paths)
    # Steps: one bar per step, its segments adding up to the step's rows in the ledger at the end.
    steps = bodies["chart-steps-sim-default"]
    rows = Counter(row.step for row in result.sequences)
    drawn: Counter[int] = Counter()
    for step, count in re.findall(r'<rect class="segment"[^>]*><title>step (\d+): (\d+) ', steps):
        drawn[int(step)] += int(count)
    assert drawn == rows and sorted(drawn) == [1, 2, 3]


def test_report_screenshot_shows_the_charts(report: tuple[Path, SimResult], tmp_path: Path) -> None:
    path, _result = report
    shot = tmp_path / "report.png"
    run = run_chromium(chromium_or_skip(), path, tmp_path / "profile", f"--screenshot={shot}",
                       "--window-size=1000,2800")
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    assert console_messages(run.stderr) == []
    image = read_png(shot.read_bytes())
    assert (image.width, image.height) == (1000, 2800)
    colors = Counter(image.pixels)
    painted = sum(count for color, count in colors.items() if color != (255, 255, 255))
    assert painted / len(image.pixels) > 0.05, "the screenshot is (nearly) blank"
    # Each mailbox's bars (blended over white) and the parked line's color are on screen.
    for index in range(3):
        bar = _blend(COLORS[index], BAR_OPACITY)
        assert colors[bar] > 200, f"no bars in {COLORS[index]}"
    assert colors[_blend(COLORS[1], 1.0)] > 100, "no parked line"
    # The steps chart: the sends without an answer, the replies and the follow-ups queued at the end.
    for label, _field, color in (STEP_PARTS[0], STEP_PARTS[1], STEP_PARTS[6]):
        assert colors[_blend(color, 1.0)] > 100, f"no {label} in the steps chart"


@pytest.mark.service
def test_console_errors_are_caught_by_the_check(tmp_path: Path) -> None:
    # The control: a page that does log errors must be seen to (else the checks above prove nothing).
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><script>console.error("marker-1"); missing();</script></body>'
                    "</html>")
    run = run_chromium(chromium_or_skip(), page, tmp_path / "profile", "--dump-dom")
    messages = console_messages(run.stderr)
    assert any("marker-1" in m for m in messages) and any("missing" in m for m in messages), run.stderr[-2000:]


def _blend(hex_color: str, opacity: float) -> tuple[int, int, int]:
    channels = [int(hex_color[i:i + 2], 16) for i in (1, 3, 5)]
    r, g, b = (round(c * opacity + 255 * (1 - opacity)) for c in channels)
    return r, g, b


def test_coinciding_series_do_not_hide_each_other(report: tuple[Path, SimResult]) -> None:
    """Addresses held and addresses in service are often equal: the line drawn on top must leave the one
    beneath visible (drawn thinner and dashed over a wider solid line)."""
    page = report[0].read_text()
    for chart in ("in-service", "parked"):
        svg = re.search(rf'<svg class="plot" data-chart="{chart}".*?</svg>', page, re.S)
        assert svg, chart
        styles = [(float(width), dash) for width, dash in
                  re.findall(r'<path class="series"[^>]*stroke-width="([\d.]+)"(?: stroke-dasharray="([^"]+)")?',
                             svg[0])]
        assert styles, chart
        for index, (width, dash) in enumerate(styles[1:], start=1):
            assert dash, f"{chart}: series {index} is solid and would cover what lies beneath"
            assert all(width < earlier for earlier, _ in styles[:index]), f"{chart}: series {index} too wide"
    in_service = re.search(r'data-chart="in-service".*?</svg>', page, re.S)
    assert in_service and in_service[0].count('class="series"') == 2
