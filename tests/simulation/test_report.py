"""The HTML report opens in headless Chromium without console errors and shows its five charts."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from simulation import SimResult
from simulation.report_html import STEP_PARTS, render_report
from simulation.report_pool import MIN_BIN_PX, Bin, bin_duration, bins
from simulation.report_svg import COLORS, PLOT_H, PLOT_W, TOP, axis_top
from simulation.summary import summarize
from tests.support.artifacts import keep
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
                                                 "chart-steps-sim-default", "chart-step-sends-sim-default"]
    bodies = {name: body for name, body in figures}
    # Sends: one bar per mailbox per local day, each day's ramp cap drawn over it.
    mailboxes = len(result.inventory.mailboxes)
    bars = bodies["chart-sends"].count('<rect class="bar"')
    assert bars >= mailboxes * result.config.days
    assert bodies["chart-sends"].count('class="cap"') == bars
    # Hours: a strip of 24 hours per mailbox, each cell the sends in that hour of the recipient's clock (its lead's
    # time zone); the example's campaign sends Monday to Friday 09:00-17:00 on that clock, marked under each strip,
    # and nothing goes outside it.
    cells = re.findall(r'<rect class="hour" data-mailbox="([^"]+)" data-hour="(\d+)" data-sends="(\d+)"',
                       bodies["chart-hours"])
    assert len(cells) == 24 * mailboxes
    expected = Counter((s.mailbox, datetime.fromtimestamp(s.at, ZoneInfo(result.lead_timezones[s.address or ""]))
                        .hour) for s in result.log.sends)
    assert {(mailbox, int(hour)): int(sent) for mailbox, hour, sent in cells if int(sent)} == dict(expected)
    assert {int(hour) for _mailbox, hour, sent in cells if int(sent)} <= set(range(9, 17))
    marks = re.findall(r'<rect class="window" data-mailbox="([^"]+)" data-start="(\d+)" data-end="(\d+)"',
                       bodies["chart-hours"])
    assert sorted(marks) == sorted((m.address.lower(), "540", "1020") for m in result.inventory.mailboxes)
    # In service and parked: a step line per series, each with its band (test_pool_charts_are_binned has the rest).
    for name, series in (("chart-in-service", 2), ("chart-parked", 1)):
        assert bodies[name].count('<path class="series"') == series
        assert bodies[name].count('<path class="band"') == series
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
    keep(shot, "simulation-report.png")  # before the checks: a screenshot that fails them is the one to look at
    keep(path, "simulation-report.html")
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


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    ancestors: list[dict[str, str]]  # the attributes of each enclosing element, outermost first
    text: list[str] = field(default_factory=list)  # all the text inside it

    def within(self, **wanted: str) -> bool:
        return any(all(a.get(k.replace("_", "-")) == v for k, v in wanted.items()) for a in self.ancestors)


class _Elements(HTMLParser):
    """Every element of a page, in document order, with its ancestors and its text."""

    VOID = frozenset({"meta", "br", "hr", "img", "input", "link"})

    def __init__(self) -> None:
        super().__init__()
        self.found: list[Element] = []
        self.open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs}, [e.attrs for e in self.open])
        self.found.append(element)
        if tag not in self.VOID:
            self.open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append(Element(tag, {k: v or "" for k, v in attrs}, [e.attrs for e in self.open]))

    def handle_endtag(self, tag: str) -> None:
        while self.open:
            if self.open.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        for element in self.open:
            element.text.append(data)


def elements(page: str) -> list[Element]:
    parser = _Elements()
    parser.feed(page)
    parser.close()
    assert not parser.open, f"unclosed: {[e.tag for e in parser.open]}"
    return parser.found


def _steps(d: str) -> list[tuple[float, float, float]]:
    """A step path's (x from, x to, y) for each horizontal run, from its M x,y / H x / V y commands."""
    x = y = 0.0
    runs = []
    for command, first, second in re.findall(r"([MHV])(-?[\d.]+)(?:,(-?[\d.]+))?", d):
        if command == "M":
            x, y = float(first), float(second)
        elif command == "V":
            y = float(first)
        else:
            runs.append((x, float(first), y))
            x = float(first)
    return runs


def test_pool_charts_are_binned(report: tuple[Path, SimResult]) -> None:
    """The pool's charts are steps at least MIN_BIN_PX wide, each at the highest count within its bin (so a
    spike of one sample still shows), under a y axis whose top tick is at or above everything drawn."""
    path, result = report
    found = elements(path.read_text())
    span = result.end_s - result.start_s
    samples = result.log.samples
    for chart, series in (("in-service", [[(s.at, s.leasable) for s in samples], [(s.at, s.held) for s in samples]]),
                          ("parked", [[(s.at, s.parked) for s in samples]])):
        inside = [e for e in found if e.within(data_chart=chart)]
        top = max(float("".join(e.text)) for e in inside if e.attrs.get("class") == "ytick")
        assert top >= max(value for points in series for _at, value in points), f"{chart}: a spike passes the top"
        paths = [e for e in inside if e.tag == "path" and e.attrs.get("class") == "series"]
        assert len(paths) == len(series)
        for drawn, points in zip(paths, series, strict=True):
            duration = float(drawn.attrs["data-bin-s"])
            runs = _steps(drawn.attrs["d"])
            assert len(runs) == math.floor(span / duration)
            assert min(end - start for start, end, _y in runs) >= MIN_BIN_PX - 0.15, f"{chart}: a sliver"
            # Each run at the highest value its bin saw: the value carried in, or any sample within it.
            for index, (_start, _end, y) in enumerate(runs):
                begin = result.start_s + index * duration
                end = begin + duration if index < len(runs) - 1 else math.inf
                carried = [v for at, v in points if at <= begin][-1:]
                within = [v for at, v in points if begin <= at < end]
                assert round(top * (1 - (y - TOP) / PLOT_H)) == max(carried + within), f"{chart}: bin {index}"


def test_pool_charts_say_what_the_words_mean(report: tuple[Path, SimResult]) -> None:
    found = elements(report[0].read_text())
    explained = {chart: {"".join(e.text).strip() for e in found if e.tag == "b" and e.within(id=f"chart-{chart}")}
                 for chart in ("in-service", "parked")}
    assert explained == {"in-service": {"in service", "held"}, "parked": {"parked"}}
    parked = " ".join("".join(e.text) for e in found if e.attrs.get("class") == "explain" and
                      e.within(id="chart-parked"))
    assert "kept allocated for 15 minutes" in parked and "AWS cannot hand the same address straight back" in parked
    assert "Each step is 2 hours: the line is the highest count within it" in parked


def test_bins_keep_a_spike_and_the_value_carried_in() -> None:
    points = [(0.0, 1), (100.0, 5), (130.0, 1), (1300.0, 0)]
    assert bins(points, 0.0, 2000.0, 600.0) == [Bin(0.0, 600.0, 1, 5), Bin(600.0, 1200.0, 1, 1),
                                                  Bin(1200.0, 2000.0, 0, 1)]
    # a sample made at a bin's very start is its value from then on: the higher one before it is not in the bin
    assert bins([(0.0, 6), (600.0, 5), (900.0, 5)], 0.0, 1200.0, 600.0) == [Bin(0.0, 600.0, 6, 6),
                                                                          Bin(600.0, 1200.0, 5, 5)]
    nine_days = 9 * 86_400
    assert bin_duration(nine_days) == 7200 and PLOT_W * 7200 / nine_days >= MIN_BIN_PX
    assert PLOT_W * bin_duration(3600) / 3600 >= MIN_BIN_PX


@pytest.mark.parametrize(("highest", "top"), [(0, 1), (1, 1), (10, 10), (11, 12), (97, 100), (101, 120)])
def test_the_top_tick_is_at_or_above_the_highest_value(highest: int, top: int) -> None:
    assert axis_top(highest) == top


def _rows(found: list[Element], table_id: str) -> list[list[str]]:
    """A table's body rows, each cell's text."""
    cells = [e for e in found if e.tag == "td" and e.within(id=table_id)]
    rows = [e for e in found if e.tag == "tr" and e.within(id=table_id)]
    texts = {id(e): "".join(e.text) for e in cells}
    return [[texts[id(c)] for c in cells if c.ancestors[-1] is row.attrs] for row in rows if
            any(c.ancestors[-1] is row.attrs for c in cells)]


def test_the_address_table_is_folded_under_a_summary(report: tuple[Path, SimResult]) -> None:
    """The busiest ten addresses and how many addresses sent how much are on the page; the full table, a row per
    address, waits in a closed <details>."""
    path, result = report
    found = elements(path.read_text())
    per_peer = Counter(d.peer for d in result.delivered)
    details = [e for e in found if e.tag == "details"]
    assert [e.attrs.get("id") for e in details] == ["deliveries-all"] and "open" not in details[0].attrs
    full = _rows(found, "deliveries-per-source")
    assert {row[0]: int(row[4]) for row in full} == dict(per_peer)
    assert all(e.within(id="deliveries-all") for e in found if e.attrs.get("id") == "deliveries-per-source")
    busiest = _rows(found, "deliveries-busiest")
    assert len(busiest) == min(10, len(per_peer)) < len(full)
    assert [int(row[4]) for row in busiest] == sorted(per_peer.values(), reverse=True)[:10]
    assert not any(e.within(id="deliveries-all") for e in found if e.attrs.get("id") == "deliveries-busiest")
    spread = _rows(found, "deliveries-distribution")
    assert sum(int(row[1]) for row in spread) == len(per_peer)
    for bucket, addresses, _bar in spread:
        low, _, high = bucket.partition("..")
        inside = [n for n in per_peer.values() if int(low) <= n <= int(high or low)]
        assert int(addresses) == len(inside), bucket


def test_the_monthly_cost_is_what_pool_plan_prints(report: tuple[Path, SimResult]) -> None:
    """The report's monthly cost is `pool plan`'s for the run's hosts (the example inventory's) at the sends per day
    the run really made: both figures as printed, the total and its remaps."""
    from tests.support.cli import run_cli
    from toolkit.cli.simulate import example_inventory
    from toolkit.inventory import load_inventory

    path, result = report
    inventory = example_inventory()
    assert result.inventory.hosts == load_inventory(inventory).hosts
    row = next(e for e in elements(path.read_text()) if e.attrs.get("id") == "monthly-cost")
    sends_per_day = row.attrs["data-sends-per-day"]
    assert int(sends_per_day) == round(summarize(result).sends / result.config.days) > 0
    text = "".join(row.text)
    stated = re.search(r"\$([\d,.]+)/month at ([\d,]+) sends/day .* \+ \$([\d,.]+) for ", text)
    assert stated and stated[2] == sends_per_day, text
    printed = run_cli("--inventory", str(inventory), "pool", "plan", "--sends-per-day", sends_per_day,
                      env={"AWS_EC2_METADATA_DISABLED": "true"})  # no credentials: the quota line says unknown
    assert printed.returncode == 0, printed.stderr
    assert f"for {sends_per_day} sends/day, ${stated[1]}/month (remaps ${stated[3]})" in printed.stdout


def test_each_campaign_has_its_sends_per_day_by_step(report: tuple[Path, SimResult]) -> None:
    """The campaign's panel: a segment per UTC day and step, its sends that day as the ledger's rows have them."""
    path, result = report
    drawn = {(int(e.attrs["data-day"]), int(e.attrs["data-step"])): int(e.attrs["data-sends"])
             for e in elements(path.read_text())
             if e.attrs.get("class") == "step-sends" and e.within(id="chart-step-sends-sim-default")}
    expected = Counter((int((row.accepted_at - result.start_s) // 86_400), row.step) for row in result.sequences
                       if row.accepted_at is not None)
    assert drawn == dict(expected)
    assert {step for _day, step in drawn} == {1, 2, 3} and sum(drawn.values()) == len(result.delivered)


def test_the_step_table_shows_the_clicks_of_people_and_of_scanners(report: tuple[Path, SimResult]) -> None:
    path, result = report
    [campaign] = summarize(result).campaigns
    page = path.read_text()
    assert "<th>clicked</th><th>scanner clicks</th>" in page
    for step in campaign.steps:
        assert (f"<td>{step.unsubscribed}</td><td>{step.clicked}</td><td>{step.scanned}</td>") in page
    assert campaign.steps[0].clicked > 0


def test_the_report_says_what_bound_the_run_and_whether_each_promise_held(report: tuple[Path, SimResult]) -> None:
    path, result = report
    page = path.read_text()
    summary = summarize(result)
    assert summary.bound is not None
    assert f"<tr><th>what bound the run</th><td>{summary.bound.text()}</td></tr>" in page.replace("&#x27;", "'")
    rows = re.findall(r'<tr data-promise="([\w-]+)" data-held="(true|false)">', page)
    assert rows == [(promise.code, "true") for promise in summary.promises] and len(rows) == 6
