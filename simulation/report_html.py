"""`--report FILE.html`: one self-contained page (inline CSS and SVG, no script, nothing fetched) with the run's key
numbers (ending with pool plan's monthly cost for its hosts and volume) and its charts: sends per mailbox per local
day against its ramp cap, sends per hour of the day per mailbox with the sending window marked
(simulation.report_hours), addresses in service and EIPs held, and parked EIPs, over time (binned:
simulation.report_pool), and for each campaign what became of each step (with its table and the sequences' end
reasons) and its sends per day by step (simulation.report_step_days); then the deliveries (simulation.report_deliveries)
and the DNS audit."""

from __future__ import annotations

from html import escape

from ippool.plan import PlanInput, inventory_hosts, make_plan
from simulation.engine import SimResult
from simulation.report_deliveries import deliveries_section
from simulation.report_hours import hours_chart
from simulation.report_pool import in_service_chart, parked_chart
from simulation.report_step_days import step_days_chart
from simulation.report_svg import (
    BOTTOM,
    COLORS,
    LEFT,
    PLOT_W,
    TOP,
    WIDTH,
    axes,
    axis_top,
    empty,
    legend,
    nice_step,
    svg,
    y_of,
)
from simulation.sequence_summary import CampaignLine, StepLine
from simulation.summary import Summary, covered_day, sends_per_mailbox_day


def render_report(result: SimResult, summary: Summary) -> str:
    """The whole HTML page."""
    days = f"{summary.days} day{'s' if summary.days != 1 else ''}"
    title = f"sendhost simulate: {days} from {summary.start} (seed {summary.seed})"
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f"<title>{escape(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
        f"<h1>{escape(title)}</h1>",
        _key_numbers(result, summary),
        _figure("chart-sends", "Sends per mailbox per day (its own local day) against the ramp cap",
                _sends_chart(result)),
        _figure("chart-hours", "Sends per hour of the day, on the recipient's clock (the lead's time zone), over "
                "the run",
                hours_chart(result)),
        _figure("chart-in-service", "Addresses in service and Elastic IPs held over time",
                in_service_chart(result)),
        _figure("chart-parked", "Parked Elastic IPs over time", parked_chart(result)),
        _campaigns(result, summary),
        deliveries_section(summary.deliveries),
        _audit(summary),
        "</body>", "</html>", ""])


CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; max-width: 940px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
figure { margin: 20px 0; } figcaption { font-weight: 600; margin-bottom: 4px; }
svg text { font: 11px system-ui, sans-serif; fill: #333; } .axis { stroke: #888; } .grid { stroke: #eee; }
svg text.zone { font-size: 9px; fill: #777; }
table.campaign-steps td, table.campaign-steps th { padding: 3px 5px; }
.count-bar { display: inline-block; height: 10px; background: #4c78a8; }
details summary { cursor: pointer; margin: 8px 0; } h3 { font-size: 14px; margin-top: 18px; }
.explain { color: #444; } .explain p, .explain ul { margin: 4px 0; }
.legend span { display: inline-block; margin-right: 16px; } .swatch { display: inline-block; width: 12px;
height: 12px; margin-right: 4px; vertical-align: -2px; }
"""


def _key_numbers(result: SimResult, summary: Summary) -> str:
    fresh = "-" if summary.fresh_share is None else f"{summary.fresh_share:.0%}"
    rows = [
        ("sends", f"{summary.sends} ({summary.sends / summary.days:.0f}/day)"),
        ("what bound the run", summary.bound.text() if summary.bound is not None else "-"),
        ("leads", f"{sum(line.leads for line in summary.campaigns)} imported, {summary.leads_turned_away} turned "
                  f"away: they arrived beyond what bound the run ({summary.sends_per_day}/day came in)"),
        ("recipients' answers", summary.reactions_text()),
        ("out-of-office leads", summary.away_text()),
        ("fallbacks to the primary IP", str(sum(summary.fallbacks.values()))),
        ("rotations", f"{summary.rotations} ({summary.retired_by_command} retired by on-call)"),
        ("fresh-IP share", fresh),
        ("redraws", f"{summary.redraws} (AWS handed back a recently released address {summary.aws_handed_back} times)"),
        ("max sends on one address", f"{summary.max_sends_on_address} (budget {summary.budget_range[0]}.."
                                     f"{summary.budget_range[1]})"),
        ("parked EIP-hours in the run", f"{summary.parked_eip_hours:.1f} h = ${summary.parked_cost_usd:.2f}"),
        ("audit findings", ", ".join(f"{count} {severity}" for severity, count in summary.findings.items())),
    ]
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    body += _monthly_cost(result, summary)
    mailboxes = "".join(
        f"<tr><td>{escape(m.address)}</td><td>{m.start}</td><td>{m.sends}</td><td>{m.capacity}</td>"
        f"<td>{m.days_at_cap}</td><td>{m.days_over_cap}</td></tr>" for m in summary.mailboxes)
    return (f'<table id="key-numbers">{body}</table>{_promises(summary)}'
            '<table id="mailboxes"><tr><th>mailbox</th><th>start</th><th>sends</th><th>sum of caps</th>'
            f"<th>days at cap</th><th>days over cap</th></tr>{mailboxes}</table>")


def _promises(summary: Summary) -> str:
    """Whether each of the README's promises held in the run, with the figures behind it (simulation.promises)."""
    rows = "".join(f'<tr data-promise="{p.code}" data-held="{str(p.held).lower()}"><td>{escape(p.promise)}</td>'
                   f"<td>{'yes' if p.held else '<b>NO</b>'}</td><td>{escape(p.figures)}</td></tr>"
                   for p in summary.promises)
    return ('<h2>The promises, in this run</h2><table id="promises"><tr><th>promise</th><th>held</th>'
            f"<th>figures</th></tr>{rows}</table>") if rows else ""


def _monthly_cost(result: SimResult, summary: Summary) -> str:
    """What the run's hosts would cost a month at the volume the run really sent: `pool plan`'s own figure, by
    its own code and defaults, so the two never disagree. Most of it is remaps, which the parked EIP-hours miss."""
    sends_per_day = round(summary.sends / summary.days)
    plan = make_plan(PlanInput(sends_per_day=sends_per_day, hosts=inventory_hosts(result.inventory.hosts)))
    text = (f"${plan.monthly_cost_usd:,.2f}/month at {sends_per_day:,} sends/day on {plan.active_eips} slots: "
            f"${plan.ipv4_cost_usd:,.2f} public IPv4 + ${plan.remap_cost_usd:,.2f} for "
            f"{plan.remaps_per_month:,.0f} remaps (what `sendhost pool plan --sends-per-day {sends_per_day}` "
            "prints for these hosts, at its default prices and redraw rate)")
    return (f'<tr id="monthly-cost" data-sends-per-day="{sends_per_day}"><th>monthly cost, as pool plan</th>'
            f"<td>{escape(text)}</td></tr>")


# What became of a step's rows, in the order a bar shows them: (label, the StepLine field, colour). `sent` here is
# the sends that got no answer; the answered ones are the next three. Colours of their own (not COLORS), so each
# chart's colours on a screenshot are that chart's.
STEP_PARTS = (("sent, no answer", "unanswered", "#4c78a8"), ("replied", "replied", "#54a24b"),
              ("bounced", "bounced", "#e45756"), ("unsubscribed", "unsubscribed", "#f58518"),
              ("failed", "failed", "#9d755d"), ("cancelled: the sequence had ended", "cancelled", "#bab0ac"),
              ("queued at the end", "queued", "#72b7b2"), ("waiting at the end", "waiting", "#b279a2"))
BAR_H, BAR_GAP = 26, 14
STEP_COLUMNS = ("step", "delay", "subject", "sent", "replied", "bounced", "unsubscribed", "clicked",
                "scanner clicks", "failed", "cancelled", "queued", "waiting", "gap, days (min, median)")


def _campaigns(result: SimResult, summary: Summary) -> str:
    """Each campaign: a bar per step (what became of its rows), the step table, how the sequences ended, and its
    sends per day by step."""
    if not summary.campaigns:
        return ""
    parts = ["<h2>Campaign</h2><p>Each lead gets step 1, then each later step its delay after the step before was "
             "sent, from the same mailbox, in the same thread; a reply, a bounce or an unsubscribe ends its sequence. "
             "<i>sent</i> counts every step handed over, the replied, bounced and unsubscribed among them; "
             "<i>clicked</i> the rows a person clicked a tracked link of, <i>scanner clicks</i> the rows a mail "
             "gateway's scanner walked (never counted as clicks); the gap is how long after the step before a step "
             "went.</p>"]
    for line in summary.campaigns:
        parts.append(_figure(f"chart-steps-{line.name}", f"{line.name}: what became of each step ({line.leads} leads)",
                             _steps_chart(line)))
        parts.append(_step_table(line))
        parts.append(_figure(f"chart-step-sends-{line.name}", f"{line.name}: sends per UTC day, by step",
                             step_days_chart(result, line.name)))
    return "".join(parts)


def _step_part(step: StepLine, field: str) -> int:
    if field == "unanswered":
        return step.sent - step.replied - step.bounced - step.unsubscribed
    return int(getattr(step, field))


def _steps_chart(line: CampaignLine) -> str:
    if not line.steps:
        return empty()
    x_max = max([sum(_step_part(step, field) for _label, field, _color in STEP_PARTS) for step in line.steps]
                + [1])
    plot_w = PLOT_W
    height = TOP + len(line.steps) * (BAR_H + BAR_GAP) + BOTTOM
    parts = [f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{height - BOTTOM}"/>']
    for index, step in enumerate(line.steps):
        y = TOP + index * (BAR_H + BAR_GAP) + BAR_GAP / 2
        parts.append(f'<text x="{LEFT - 6}" y="{y + BAR_H / 2 + 4:.1f}" text-anchor="end">step {step.step}</text>')
        x = float(LEFT)
        for label, field, color in STEP_PARTS:
            count = _step_part(step, field)
            if count <= 0:
                continue
            width = plot_w * count / x_max
            parts.append(f'<rect class="segment" x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{BAR_H}" '
                         f'fill="{color}"><title>step {step.step}: {count} {escape(label)}</title></rect>')
            x += width
    tick = nice_step(x_max)
    value = 0.0
    while value <= x_max + 1e-9:
        x = LEFT + plot_w * value / x_max
        parts.append(f'<text x="{x:.1f}" y="{height - BOTTOM + 16}" text-anchor="middle">{value:g}</text>')
        value += tick
    parts.append(f'<text x="{LEFT + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle">rows of the step</text>')
    svg = (f'<svg class="plot" data-chart="steps" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg" role="img">{"".join(parts)}</svg>')
    return svg + legend([(label, color) for label, _field, color in STEP_PARTS])


def _step_table(line: CampaignLine) -> str:
    rows = "".join(
        f"<tr><td>{step.step}</td><td>{escape(step.delay)}</td>"
        f"<td>{escape(step.subject) if step.subject else '<i>reply in the thread</i>'}</td><td>{step.sent}</td>"
        f"<td>{step.replied}</td><td>{step.bounced}</td><td>{step.unsubscribed}</td><td>{step.clicked}</td>"
        f"<td>{step.scanned}</td><td>{step.failed}</td>"
        f"<td>{step.cancelled}</td><td>{step.queued}</td><td>{step.waiting}</td>"
        f"<td>{_days(step.min_after_previous_s, step.median_after_previous_s)}</td></tr>"
        for step in line.steps)
    ended = "".join(f"<tr><td>{escape(reason)}</td><td>{count}</td></tr>"
                    for reason, count in [*line.ended.items(), ("still going", line.going)])
    head = "".join(f"<th>{escape(name)}</th>" for name in STEP_COLUMNS)
    return (f'<table class="campaign-steps" id="steps-{line.name}"><tr>{head}</tr>{rows}</table>'
            f'<table class="sequences-ended" id="ended-{line.name}"><tr><th>sequence ended</th><th>leads</th></tr>'
            f"{ended}</table>")


def _days(shortest_s: float | None, median_s: float | None) -> str:
    if shortest_s is None or median_s is None:
        return "-"
    return f"{shortest_s / 86_400:.2f}, {median_s / 86_400:.2f}"


def _audit(summary: Summary) -> str:
    rows = "".join(f"<tr><td>{escape(d['domain'])}</td><td>{escape(f['severity'])}</td><td>{escape(f['code'])}</td>"
                   f"<td>{escape(f['message'])}</td><td>{escape(f['location'] or '-')}</td></tr>"
                   for d in summary.domains for f in d["findings"])
    if not summary.domains:
        return "<h2>DNS audit</h2><p>No zone files audited.</p>"
    clean = [escape(d["domain"]) for d in summary.domains if not d["findings"]]
    note = f"<p>No findings: {', '.join(clean)}.</p>" if clean else ""
    table = ("<table><tr><th>domain</th><th>severity</th><th>code</th><th>message</th><th>where</th></tr>"
             f"{rows}</table>") if rows else ""
    return f"<h2>DNS audit</h2>{table}{note}"


def _figure(element_id: str, caption: str, svg: str) -> str:
    return f'<figure class="chart" id="{element_id}"><figcaption>{escape(caption)}</figcaption>{svg}</figure>'


def _sends_chart(result: SimResult) -> str:
    counts = sends_per_mailbox_day(result)
    addresses = [m.address.lower() for m in result.inventory.mailboxes]
    # Each mailbox counts its own local days: draw the days the run touched for it (the edges may be partial).
    covered = {(m.address.lower(), day) for m in result.inventory.mailboxes
               for day in result.caps.get(m.address.lower(), {}) if covered_day(result, day, m.timezone)}
    days = sorted({day for _address, day in covered})
    if not days or not addresses:
        return empty()
    y_max = max([counts.get((a, d), 0) for a in addresses for d in days]
                + [result.caps.get(a, {}).get(d, 0) for a in addresses for d in days] + [1])
    top = axis_top(y_max)
    group_w = PLOT_W / len(days)
    bar_w = max(1.0, group_w * 0.8 / len(addresses))
    parts = axes(top, [(LEFT + (i + 0.5) * group_w, day[5:]) for i, day in enumerate(days)], "local day")
    for i, day in enumerate(days):
        for j, address in enumerate(addresses):
            if (address, day) not in covered:
                continue
            color = COLORS[j % len(COLORS)]
            x = LEFT + i * group_w + group_w * 0.1 + j * bar_w
            sent = counts.get((address, day), 0)
            cap = result.caps.get(address, {}).get(day)
            y = y_of(sent, top)
            parts.append(f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" '
                         f'height="{y_of(0, top) - y:.1f}" fill="{color}" fill-opacity="0.75">'
                         f"<title>{escape(address)} {day}: {sent} sent, cap {cap}</title></rect>")
            if cap is not None:
                cap_y = y_of(cap, top)
                parts.append(f'<line class="cap" x1="{x:.1f}" x2="{x + bar_w:.1f}" y1="{cap_y:.1f}" '
                             f'y2="{cap_y:.1f}" stroke="#000" stroke-width="2"/>')
    entries = [(address, COLORS[j % len(COLORS)]) for j, address in enumerate(addresses)] + [("ramp cap", "#000")]
    return svg("sends", parts) + legend(entries)
