"""The report's hour-of-day chart: for each mailbox, a strip of 24 cells, its sends in each hour of the day on the
recipient's clock (the lead's time zone, where the window is read) over the whole run (darker: more; the count
written in the cell), with its campaign's sending window marked under the strip. A day drained right after
midnight, or a window's sends bunched in its first hour, shows at a glance; so does a spread over the window."""

from __future__ import annotations

from html import escape

from sender.campaigns.pacing import HourRange
from simulation.engine import SimResult
from simulation.summary import sends_per_mailbox_hour

WIDTH = 900
LABEL_W, TOTAL_W, TOP = 190, 64, 22
CELL_H, WINDOW_GAP, WINDOW_H, ROW_GAP = 20, 2, 4, 8
ROW_H = CELL_H + WINDOW_GAP + WINDOW_H + ROW_GAP
CELL_COLOR = "#1f77b4"
WINDOW_COLOR = "#222"
MIN_OPACITY = 0.15  # the lightest shade of an hour with any send, so one send is not lost against white
DARK_TEXT_FROM = 0.55  # at this opacity and above the count is written in white


def hours_chart(result: SimResult) -> str:
    """The chart's SVG and legend, or a note when nothing was sent."""
    counts = sends_per_mailbox_hour(result)
    mailboxes = result.inventory.mailboxes
    if not counts or not mailboxes:
        return '<p class="empty">Nothing to draw: the run sent nothing.</p>'
    windows = {spec.group: spec.pacing.window.hours for spec in result.specs if spec.pacing.window is not None}
    cell_w = (WIDTH - LABEL_W - TOTAL_W) / 24
    height = TOP + len(mailboxes) * ROW_H
    parts = [f'<text x="{LABEL_W + (hour + 0.5) * cell_w:.1f}" y="{TOP - 8}" text-anchor="middle">{hour:02d}</text>'
             for hour in range(24)]
    parts.append(f'<text x="{WIDTH - TOTAL_W + 6}" y="{TOP - 8}">sends</text>')
    for row, mailbox in enumerate(mailboxes):
        address = mailbox.address.lower()
        y = TOP + row * ROW_H
        per_hour = [counts.get((address, hour), 0) for hour in range(24)]
        busiest = max(per_hour) or 1
        parts.append(f'<text x="{LABEL_W - 8}" y="{y + 9}" text-anchor="end">{escape(address)}</text>'
                     f'<text class="zone" x="{LABEL_W - 8}" y="{y + 21}" text-anchor="end">'
                     f"its leads' clocks</text>")
        for hour, sent in enumerate(per_hour):
            x = LABEL_W + hour * cell_w
            opacity = MIN_OPACITY + (1 - MIN_OPACITY) * sent / busiest if sent else 0.0
            parts.append(f'<rect class="hour" data-mailbox="{escape(address)}" data-hour="{hour}" '
                         f'data-sends="{sent}" x="{x:.1f}" y="{y}" width="{cell_w:.1f}" height="{CELL_H}" '
                         f'fill="{CELL_COLOR}" fill-opacity="{opacity:.2f}" stroke="#ddd">'
                         f"<title>{escape(address)} {hour:02d}:00-{hour + 1:02d}:00 on the lead's clock: "
                         f"{sent} sent</title></rect>")
            if sent:
                color = "#fff" if opacity >= DARK_TEXT_FROM else "#333"
                parts.append(f'<text class="count" x="{x + cell_w / 2:.1f}" y="{y + 14}" text-anchor="middle" '
                             f'fill="{color}" style="fill:{color}">{sent}</text>')
        for hours in windows.get(mailbox.group, ()):
            parts.append(_window_bar(hours, y + CELL_H + WINDOW_GAP, cell_w, address))
        parts.append(f'<text x="{WIDTH - TOTAL_W + 6}" y="{y + 14}">{sum(per_hour)}</text>')
    svg = (f'<svg class="plot" data-chart="hours" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg" role="img">{"".join(parts)}</svg>')
    return svg + _legend(bool(windows))


def _window_bar(hours: HourRange, y: float, cell_w: float, address: str) -> str:
    x = LABEL_W + cell_w * hours.start / 60
    width = cell_w * (hours.end - hours.start) / 60
    return (f'<rect class="window" data-mailbox="{escape(address)}" data-start="{hours.start}" '
            f'data-end="{hours.end}" x="{x:.1f}" y="{y}" width="{width:.1f}" height="{WINDOW_H}" '
            f'fill="{WINDOW_COLOR}"><title>sending window {hours}</title></rect>')


def _legend(windowed: bool) -> str:
    window = (f'<span><i class="swatch" style="background:{WINDOW_COLOR};height:4px;vertical-align:2px"></i>'
              "its campaign's sending window, read on each lead's clock</span>") if windowed \
        else "<span>no sending window: the campaigns may send at any hour</span>"
    return (f'<div class="legend"><span><i class="swatch" style="background:{CELL_COLOR}"></i>sends in the hour over '
            f"the whole run (darker: more, within the mailbox's row)</span>{window}</div>")
