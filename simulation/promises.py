"""Whether the README's promises held in a run, each with the figures behind it, checked from what the run's real
parts recorded: `pool reconcile` at the end (AWS against Redis), the event log (each send's lease and the guard's
cap), the submission server's record of each message, and the ledger's rows of every lead.

    for promise in check_promises(result):
        print(promise.code, promise.held, promise.figures)

The simulation's tests (tests/simulation/test_invariants.py, test_sequences.py) check the same rules their own
way, from the same records; these are the results a reader of the summary sees.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

from simulation.engine import SimResult


@dataclass(frozen=True)
class Promise:
    """One promise: what it says, whether the run kept it, and the figures that show it."""

    code: str
    promise: str
    held: bool
    figures: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def check_promises(result: SimResult) -> list[Promise]:
    """Every promise, in the README's order."""
    return [_no_eip_leaked(result), _ip_budget(result), _no_send_blocked(result), _mailbox_caps(result),
            _followups(result), _sent_once(result)]


def _no_eip_leaked(result: SimResult) -> Promise:
    """`pool reconcile` found AWS and Redis agreeing, every EIP held is in a slot or parked as the log says, and no
    address served two slots at once."""
    log = result.log
    retired = {(r.host, r.slot, r.generation) for r in log.retirements}
    in_slots = sum(1 for p in log.placements if (p.host, p.slot, p.generation) not in retired)
    released = {r.allocation_id for r in log.released}
    parked = sum(1 for p in log.parked if p.allocation_id not in released)
    allocated = len({p.allocation_id for p in log.placements} | {p.allocation_id for p in log.parked})
    twice = _serving_twice(result)
    held = not result.reconcile and result.eips_at_end == in_slots + parked and not twice
    figures = (f"pool reconcile at the end: {len(result.reconcile) or 'no'} difference"
               f"{'s' if len(result.reconcile) != 1 else ''}"
               + (f" (first: {result.reconcile[0]})" if result.reconcile else "")
               + f"; {result.eips_at_end} EIPs held at the end ({in_slots} in slots, {parked} parked); "
               f"{allocated} allocated and {len(released)} released over the run; "
               f"{twice or 'no'} address{'es' if twice != 1 else ''} in two slots at once")
    return Promise("no-eip-leaked", "no Elastic IP is leaked or double-used", held, figures)


def _serving_twice(result: SimResult) -> int:
    """Addresses placed in a slot while still serving another (a tenure from its placement to its retirement)."""
    ends = {(r.host, r.slot, r.generation): r.at for r in result.log.retirements}
    tenures: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for p in result.log.placements:
        tenures[p.public_ip].append((p.at, ends.get((p.host, p.slot, p.generation), result.end_s)))
    twice = 0
    for spans in tenures.values():
        spans.sort()
        twice += any(later_start < earlier_end for (_s, earlier_end), (later_start, _e) in pairwise(spans))
    return twice


def _ip_budget(result: SimResult) -> Promise:
    """Sends per address tenure (the log) and deliveries per source address (the server) against its budget."""
    budgets = {(p.host, p.slot, p.generation): p.budget for p in result.log.placements}
    used = Counter((s.host, s.slot, s.generation) for s in result.log.sends
                   if s.slot is not None and s.generation is not None)
    over = sum(1 for tenure, sends in used.items() if sends > budgets.get(tenure, 0))
    sources = result.deliveries.per_source if result.deliveries is not None else []
    over_seen = sum(1 for line in sources if line.budget is not None and line.deliveries > line.budget)
    most = max(used.items(), key=lambda item: (item[1], -budgets.get(item[0], 0)), default=None)
    held = over == 0 and over_seen == 0
    busiest = f"the most on one address {most[1]} (its budget {budgets.get(most[0], 0)})" if most else "none"
    low, high = (min(budgets.values()), max(budgets.values())) if budgets else (0, 0)
    figures = (f"{len(used)} addresses served, {over} over their budget ({low}..{high} sends); {busiest}; in the "
               f"server's record, {over_seen} source address{'es' if over_seen != 1 else ''} over budget")
    return Promise("ip-budget", "an IP never exceeds its send budget", held, figures)


def _no_send_blocked(result: SimResult) -> Promise:
    """Each send went out at once on a leased address or the host's primary, and the server accepted each."""
    sends = result.log.sends
    on_slots = sum(1 for s in sends if s.public_ip is not None)
    reasons = Counter(s.fallback_reason for s in sends if s.public_ip is None)
    unexplained = reasons.pop(None, 0)
    accepted = result.deliveries.total if result.deliveries is not None else len(sends)
    held = unexplained == 0 and accepted == len(sends)
    why = ", ".join(f"{reason} {count}" for reason, count in sorted(reasons.items()))
    figures = (f"{len(sends):,} sends, each with an address: {on_slots:,} on a slot's EIP, "
               f"{sum(reasons.values())} on the host's primary address (the fallback{': ' + why if why else ''})"
               + (f", {unexplained} without one" if unexplained else "")
               + f"; the server accepted {accepted:,}")
    return Promise("no-send-blocked", "a send is never blocked for lack of an IP", held, figures)


def _mailbox_caps(result: SimResult) -> Promise:
    """Sends per mailbox and local day against the guard's cap of that day and the ramp's."""
    per_day = Counter((s.mailbox, s.local_day) for s in result.log.sends)
    guard = {(s.mailbox, s.local_day): s.cap for s in result.log.sends}
    over = sum(1 for key, sends in per_day.items()
               if sends > min(guard[key], result.caps.get(key[0], {}).get(key[1], guard[key])))
    at_cap = sum(1 for key, sends in per_day.items() if sends == guard[key])
    figures = f"{len(per_day)} mailbox-days with sends, {at_cap} at their cap, {over} over it"
    return Promise("mailbox-caps", "a mailbox never sends over its warm-up cap", over == 0, figures)


def _followups(result: SimResult) -> Promise:
    """From the ledger's rows: each follow-up sent after its step before and its delay, from step 1's mailbox."""
    delays = {spec.name: [step.delay_s for step in spec.steps] for spec in result.specs}
    rows: dict[tuple[str, str], dict[int, Any]] = defaultdict(dict)
    for row in result.sequences:
        rows[(row.campaign, row.address)][row.step] = row
    sent = early = elsewhere = 0
    shortest: float | None = None
    for (campaign, _lead), steps in rows.items():
        for number, row in steps.items():
            if number == 1 or row.accepted_at is None:
                continue
            sent += 1
            before = steps.get(number - 1)
            delay = delays.get(campaign, [])[number - 1] if number - 1 < len(delays.get(campaign, [])) else 0.0
            if before is None or before.accepted_at is None or row.accepted_at < before.accepted_at + delay:
                early += 1
            else:
                after = (row.accepted_at - before.accepted_at) / delay if delay else None
                shortest = after if shortest is None or (after is not None and after < shortest) else shortest
            elsewhere += steps.get(1) is None or row.mailbox != steps[1].mailbox
    figures = (f"{sent:,} follow-ups sent, {early} before their step's delay, {elsewhere} from another mailbox than "
               f"step 1's" + (f"; the soonest at {shortest:.2f} times its delay" if shortest is not None else ""))
    return Promise("followups", "no follow-up goes before its step's delay, nor from another mailbox",
                   early == 0 and elsewhere == 0, figures)


def _sent_once(result: SimResult) -> Promise:
    """The server's record: each Message-ID accepted once, each lead's step accepted once."""
    ids = Counter(d.message_id for d in result.delivered)
    step_of = {row.message_id: (row.campaign, row.address, row.step) for row in result.sequences if row.message_id}
    steps = Counter(step_of.get(d.message_id) for d in result.delivered)
    twice = sum(1 for count in ids.values() if count > 1)
    steps_twice = sum(1 for key, count in steps.items() if key is not None and count > 1)
    figures = (f"the server accepted {len(result.delivered):,} messages, {len(ids):,} distinct Message-IDs; "
               f"{twice} sent twice, {steps_twice} lead's step{'s' if steps_twice != 1 else ''} sent twice")
    return Promise("sent-once", "a message is never sent twice", twice == 0 and steps_twice == 0, figures)
