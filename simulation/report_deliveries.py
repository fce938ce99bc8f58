"""The report's deliveries section: what the submission server accepted, per mailbox and per source address.

A run leases dozens to hundreds of addresses, one row each, and the full table would fill most of the page. What
a reader wants first is whether some address carried more than its share and how the sends spread over the
addresses: the ten busiest, and how many addresses sent how much. The full table follows, folded in a closed
<details>."""

from __future__ import annotations

from html import escape

from simulation.mail import Deliveries, SourceLine
from simulation.report_svg import nice_step

TOP_ADDRESSES = 10
MOST_BUCKETS = 10
BAR_PX_PER_ADDRESS = 6  # the distribution's bars: this many pixels per address, so counts compare across rows


def deliveries_section(found: Deliveries | None) -> str:
    if found is None:
        return ""
    mailboxes = "".join(f"<tr><td>{escape(mailbox)}</td><td>{count}</td></tr>"
                        for mailbox, count in found.per_mailbox.items())
    return (f"<h2>Deliveries at the submission server</h2><p>{found.total} messages accepted, each from the loopback "
            f"address standing for the address the agent leased, {len(found.per_source)} addresses in all.</p>"
            '<table id="deliveries-per-mailbox"><tr><th>mailbox</th><th>delivered</th></tr>'
            f"{mailboxes}</table>{_busiest(found.per_source)}{_distribution(found.per_source)}"
            f'<details id="deliveries-all"><summary>Every source address ({len(found.per_source)})</summary>'
            f"{_source_table('deliveries-per-source', found.per_source)}</details>")


def _busiest(lines: list[SourceLine]) -> str:
    busiest = sorted(lines, key=lambda line: (-line.deliveries, line.loopback))[:TOP_ADDRESSES]
    return (f"<h3>The {len(busiest)} busiest addresses</h3>"
            f"{_source_table('deliveries-busiest', busiest)}")


def _distribution(lines: list[SourceLine]) -> str:
    """How many addresses sent how many messages, in buckets of a round width."""
    if not lines:
        return ""
    most = max(line.deliveries for line in lines)
    width = 1 if most < MOST_BUCKETS else int(nice_step(most * 8 / MOST_BUCKETS))
    counts = [0] * (most // width + 1)
    for line in lines:
        counts[line.deliveries // width] += 1
    rows = "".join(
        f'<tr><td>{_bucket(index, width)}</td><td>{count}</td><td><span class="count-bar" '
        f'style="width:{count * BAR_PX_PER_ADDRESS}px"></span></td></tr>' for index, count in enumerate(counts))
    return ("<h3>Sends per address</h3>"
            '<table id="deliveries-distribution"><tr><th>messages sent from it</th><th>addresses</th><th></th></tr>'
            f"{rows}</table>")


def _bucket(index: int, width: int) -> str:
    low = index * width
    return str(low) if width == 1 else f"{low}..{low + width - 1}"


def _source_table(element_id: str, lines: list[SourceLine]) -> str:
    rows = "".join(
        f"<tr><td>{escape(line.loopback)}</td><td>{escape(line.host)}</td>"
        f"<td>{'primary' if line.slot is None else line.slot}</td><td>{escape(line.public_ip or '-')}</td>"
        f"<td>{line.deliveries}</td><td>{'-' if line.budget is None else line.budget}</td></tr>" for line in lines)
    return (f'<table id="{element_id}"><tr><th>source address</th><th>host</th><th>slot</th><th>stands for</th>'
            f"<th>delivered</th><th>budget</th></tr>{rows}</table>")

