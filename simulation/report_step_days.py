"""The report's per-campaign panel: a campaign's sends on each UTC day of the run, stacked by step, from the
ledger's rows (when the submission server accepted each). Follow-ups start days after step 1 and then take a growing
share of each day's sends; the panel shows when each step began and how the day's sends divided among them."""

from __future__ import annotations

from collections import Counter
from html import escape

from simulation.engine import SimResult
from simulation.report_svg import COLORS, LEFT, PLOT_W, axes, axis_top, day_label, empty, legend, svg, y_of

BAR_SHARE = 0.7  # of a day's width, the rest a gap between days


def step_days_chart(result: SimResult, campaign: str) -> str:
    """Stacked bars, one per UTC day of the run, a segment per step (its sends that day)."""
    days = max(1, round((result.end_s - result.start_s) / 86_400))
    counts = Counter((int((row.accepted_at - result.start_s) // 86_400), row.step) for row in result.sequences
                     if row.campaign == campaign and row.accepted_at is not None)
    if not counts:
        return empty()
    steps = sorted({step for _day, step in counts})
    days = max(days, 1 + max(day for day, _step in counts))
    top = axis_top(max(sum(counts[(day, step)] for step in steps) for day in range(days)))
    day_w = PLOT_W / days
    ticks = [(LEFT + (day + 0.5) * day_w, day_label(result.start_s + day * 86_400)) for day in range(days)]
    parts = axes(top, ticks, "UTC day")
    for day in range(days):
        x, below = LEFT + day * day_w + day_w * (1 - BAR_SHARE) / 2, 0
        for step in steps:
            sent = counts[(day, step)]
            if not sent:
                continue
            y_top, y_bottom = y_of(below + sent, top), y_of(below, top)
            parts.append(f'<rect class="step-sends" data-day="{day}" data-step="{step}" data-sends="{sent}" '
                         f'x="{x:.1f}" y="{y_top:.1f}" width="{day_w * BAR_SHARE:.1f}" height="{y_bottom - y_top:.1f}" '
                         f'fill="{_color(step, steps)}"><title>{day_label(result.start_s + day * 86_400)}: '
                         f"{sent} sends of step {step}</title></rect>")
            below += sent
    return (svg(f"step-sends-{escape(campaign)}", parts)
            + legend([(f"step {step}", _color(step, steps)) for step in steps]))


def _color(step: int, steps: list[int]) -> str:
    return COLORS[steps.index(step) % len(COLORS)]
