"""The report's pool charts: addresses in service with the Elastic IPs held, and parked Elastic IPs, over the run.

The pool changes within seconds (a slot rotates, an address parks for minutes), so drawn sample by sample over days
each change is a sliver narrower than a pixel and the chart reads as a barcode. Each chart is therefore binned: the
run is cut into equal spans of a round duration (5 minutes .. a day) chosen so that every span is at least
MIN_BIN_PX wide, and each span is drawn as one step at the highest count within it, over a band from the lowest to
the highest. A value holds from its sample until the next, so a span also counts the value carried into it."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from simulation.engine import SimResult
from simulation.report_svg import COLORS, LEFT, PLOT_W, axes, axis_top, day_label, empty, legend, svg, y_of

MIN_BIN_PX = 4.0
BIN_DURATIONS_S = (300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400)
# (stroke width, dash pattern) of the 1st, 2nd... series of a chart, drawn in that order: a later one thinner and
# dashed, so where two series coincide (every address in service is held) the one on top leaves the other visible.
SERIES_STYLES = ((3.0, ""), (1.5, "6 3"))
BAND_OPACITY = 0.22


@dataclass(frozen=True)
class Series:
    label: str
    color: str
    points: Sequence[tuple[float, int]]  # (time, value): the value holds until the next sample


@dataclass(frozen=True)
class Bin:
    start_s: float
    end_s: float
    low: int
    high: int


def bin_duration(span_s: float) -> int:
    """The shortest round duration whose bins are each at least MIN_BIN_PX wide over `span_s`."""
    most_bins = PLOT_W / MIN_BIN_PX
    for duration in BIN_DURATIONS_S:
        if span_s / duration <= most_bins:
            return duration
    return math.ceil(span_s / most_bins)


def bins(points: Sequence[tuple[float, int]], start_s: float, end_s: float, duration_s: float) -> list[Bin]:
    """[start_s, end_s] cut into spans of `duration_s` (the last one takes the remainder, so none is shorter): each
    with the lowest and highest value in it, counting the value carried in from the sample before it (or made at its
    start)."""
    edges = [start_s + n * duration_s for n in range(max(1, math.floor((end_s - start_s) / duration_s)))] + [end_s]
    ordered = sorted(points)
    index, carried = 0, None
    while index < len(ordered) and ordered[index][0] < start_s:
        carried = ordered[index][1]
        index += 1
    found: list[Bin] = []
    for bin_start, bin_end in itertools.pairwise(edges):
        # A sample made at the bin's very start is the value from then on: the one carried in held only before it.
        while index < len(ordered) and ordered[index][0] <= bin_start:
            carried = ordered[index][1]
            index += 1
        values = [] if carried is None else [carried]
        # The last span closes at end_s, taking a sample made at the very end.
        while index < len(ordered) and (ordered[index][0] < bin_end or bin_end == end_s):
            carried = ordered[index][1]
            values.append(carried)
            index += 1
        if values:
            found.append(Bin(bin_start, bin_end, min(values), max(values)))
    return found


def in_service_chart(result: SimResult) -> str:
    samples = result.log.samples
    series = [Series("addresses in service", COLORS[0], [(s.at, s.leasable) for s in samples]),
              Series("Elastic IPs held", COLORS[4], [(s.at, s.held) for s in samples])]
    return _chart(result, "in-service", series, [
        ("in service", "slots whose Elastic IP is attached and still under its send budget: the addresses a sender "
                       "can lease right now."),
        ("held", "every Elastic IP the account has allocated and pays for: those in slots (in service, or just "
                 "rotated in) plus the parked ones."),
    ])


def parked_chart(result: SimResult) -> str:
    series = [Series("parked Elastic IPs", COLORS[1], [(s.at, s.parked) for s in result.log.samples])]
    return _chart(result, "parked", series, [
        ("parked", f"an address retired (its send budget spent, or by on-call) is kept allocated for "
                   f"{_park_minutes(result)} before it is released, so AWS cannot hand the same address straight "
                   "back to the pool's next allocation. Parked addresses are held and billed, but send nothing."),
    ])


def _park_minutes(result: SimResult) -> str:
    minutes = sorted({host.pool.park_minutes for host in result.inventory.hosts})
    text = " or ".join(f"{m:g}" for m in minutes) or "15"
    return f"{text} minutes"


def _chart(result: SimResult, name: str, series: list[Series], meanings: list[tuple[str, str]]) -> str:
    if not any(line.points for line in series):
        return empty()
    span = max(result.end_s - result.start_s, 1.0)
    duration = bin_duration(span)
    binned = [bins(line.points, result.start_s, result.end_s, duration) for line in series]
    top = axis_top(max([b.high for line in binned for b in line] + [1]))
    days = max(1, round(span / 86_400))
    every = max(1, days // 14)
    ticks = [(_x(result, result.start_s + d * 86_400), day_label(result.start_s + d * 86_400))
             for d in range(0, days + 1, every)]
    parts = axes(top, ticks, "UTC day")
    for line, line_bins in zip(series, binned, strict=True):  # every band first, so no band covers a line
        parts.append(f'<path class="band" d="{_band_path(result, line_bins, top)}" fill="{line.color}" '
                     f'fill-opacity="{BAND_OPACITY}" stroke="none"><title>{escape(line.label)}: lowest to highest '
                     "in each bin</title></path>")
    for index, (line, line_bins) in enumerate(zip(series, binned, strict=True)):
        width, dashes = SERIES_STYLES[min(index, len(SERIES_STYLES) - 1)]
        dash = f' stroke-dasharray="{dashes}"' if dashes else ""
        parts.append(f'<path class="series" data-bin-s="{duration}" d="{_step_path(result, line_bins, top)}" '
                     f'fill="none" stroke="{line.color}" stroke-width="{width}"{dash}>'
                     f"<title>{escape(line.label)}: highest in each bin</title></path>")
    explained = "".join(f"<li><b>{escape(word)}</b>: {escape(meaning)}</li>" for word, meaning in meanings)
    reading = (f"Each step is {_duration_text(duration)}: the line is the highest count within it, the shaded band "
               "runs from the lowest to the highest.")
    return (svg(name, parts) + legend([(line.label, line.color) for line in series])
            + f'<div class="explain"><p>{escape(reading)}</p><ul>{explained}</ul></div>')


def _x(result: SimResult, at: float) -> float:
    return LEFT + PLOT_W * (at - result.start_s) / max(result.end_s - result.start_s, 1.0)


def _step_path(result: SimResult, line: list[Bin], top: float) -> str:
    path = []
    for index, each in enumerate(line):
        start, end, y = _x(result, each.start_s), _x(result, each.end_s), y_of(each.high, top)
        path.append(f"M{start:.1f},{y:.1f}" if index == 0 else f"V{y:.1f}")
        path.append(f"H{end:.1f}")
    return " ".join(path)


def _band_path(result: SimResult, line: list[Bin], top: float) -> str:
    path = []
    for index, each in enumerate(line):  # along the highs left to right, then back along the lows
        y = y_of(each.high, top)
        path.append(f"M{_x(result, each.start_s):.1f},{y:.1f}" if index == 0 else f"V{y:.1f}")
        path.append(f"H{_x(result, each.end_s):.1f}")
    for each in reversed(line):
        path.append(f"V{y_of(each.low, top):.1f}")
        path.append(f"H{_x(result, each.start_s):.1f}")
    return " ".join([*path, "Z"])


def _duration_text(seconds: int) -> str:
    if seconds % 86_400 == 0:
        return "a day" if seconds == 86_400 else f"{seconds // 86_400} days"
    if seconds % 3600 == 0:
        return "an hour" if seconds == 3600 else f"{seconds // 3600} hours"
    return f"{seconds / 60:g} minutes"
