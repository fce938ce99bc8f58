"""The report's chart frame, shared by its charts: the plot's size, axes whose top tick is at or above the
highest value drawn, the SVG element and a legend of colour swatches."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from html import escape

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
WIDTH, HEIGHT = 900, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 16, 44
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM


def axis_top(y_max: float) -> float:
    """The y axis's top: the first tick at or above `y_max`, so no bar or spike passes the last labelled line."""
    step = nice_step(max(y_max, 1.0))
    return step * max(1, math.ceil(max(y_max, 1.0) / step - 1e-9))


def y_of(value: float, top: float) -> float:
    return TOP + PLOT_H * (1 - value / top)


def axes(top: float, x_ticks: list[tuple[float, str]], x_label: str) -> list[str]:
    """Grid lines and labels from 0 to `top` (from axis_top), and the x axis's ticks and label."""
    parts = []
    step = nice_step(top)
    value = 0.0
    while value <= top + 1e-9:
        y = y_of(value, top)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
                     f'<text class="ytick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value:g}</text>')
        value += step
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + PLOT_H}" y2="{TOP + PLOT_H}"/>')
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + PLOT_H}"/>')
    label_every = max(1, len(x_ticks) // 16)
    for index, (x, label) in enumerate(x_ticks):
        if index % label_every == 0:
            parts.append(f'<text x="{x:.1f}" y="{TOP + PLOT_H + 16}" text-anchor="middle">{escape(label)}</text>')
    parts.append(f'<text x="{LEFT + PLOT_W / 2:.0f}" y="{HEIGHT - 6}" text-anchor="middle">{escape(x_label)}</text>')
    return parts


def nice_step(y_max: float) -> float:
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 500, 1000):
        if y_max / step <= 8:
            return float(step)
    return float(round(y_max / 8))


def svg(name: str, parts: list[str]) -> str:
    return (f'<svg class="plot" data-chart="{name}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
            f'height="{HEIGHT}" xmlns="http://www.w3.org/2000/svg" role="img">{"".join(parts)}</svg>')


def legend(entries: list[tuple[str, str]]) -> str:
    spans = "".join(f'<span><i class="swatch" style="background:{color}"></i>{escape(label)}</span>'
                    for label, color in entries)
    return f'<div class="legend">{spans}</div>'


def empty() -> str:
    return '<p class="empty">Nothing to draw: the run produced no data for this chart.</p>'


def day_label(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%m-%d")
