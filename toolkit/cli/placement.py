"""`sendhost placement test|status`: placement tests on the inventory's seed mailboxes (docs/placement.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from toolkit.cli.sender.context import SenderContext, ledger_group, pass_sender
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from sender import Ledger
    from sender.placement.rest import Change
    from sender.placement.store import Result
    from sendhost.model import Mailbox

group = ledger_group("placement", "Placement tests: our mail as our own seed mailboxes receive it.")

TEST_COLUMNS = ("mailbox", "seed", "provider", "placement", "folder", "after", "spf", "dkim", "dmarc", "arc")


@group.command("test")
@click.option("--group", "mailbox_group", metavar="G", help="Test every mailbox of warm-up group G.")
@click.option("--mailbox", "mailbox_address", metavar="BOX", help="Test one mailbox.")
@click.option("--campaign", metavar="NAME", help="Send the campaign's step (with --step) instead of a neutral text.")
@click.option("--step", type=click.IntRange(1, 20), help="The campaign's step to send (with --campaign).")
@click.option("--wait", "wait_text", default="10m", show_default=True, metavar="DURATION",
              help="How long to look for each message after its submission was accepted (30s, 10m, 1h).")
@click.option("--send", "send_here", is_flag=True,
              help="Run the agent's send path here once (as `sender run --once`, every due row included) instead "
                   "of waiting for the running agent.")
@click.option("--host", "host_name", metavar="HOST", envvar="SENDHOST_HOST",
              help="With --send: the inventory host this process sends from (env SENDHOST_HOST).")
@click.option("--poll", "poll_s", default=15.0, show_default=True, type=click.FloatRange(0.1, 600),
              help="Seconds between two reads of the seeds.")
@format_option()
@pass_sender
def test_command(sc: SenderContext, mailbox_group: str | None, mailbox_address: str | None, campaign: str | None,
                 step: int | None, wait_text: str, send_here: bool, host_name: str | None, poll_s: float,
                 fmt: str | None) -> None:
    """From each chosen mailbox one message to each seed, then where each landed.

    Each message goes through the agent's real send path, pinned to its mailbox: the warm-up guard reserves it as
    any send (it counts against the mailbox's day and waits out its gap). Each seed is then read by IMAP until every
    message is found or its wait ends: the folder (INBOX, spam, Gmail's category), how long it took, and the
    receiver's own SPF, DKIM, DMARC and ARC results under the seed's authserv-id. A message not found is "not
    found", never spam. Exit 1 when a message was not placed in an inbox."""
    import time

    from sender.campaigns.durations import parse_duration
    from sender.placement import flow

    app = sc.app
    inventory = app.require_inventory()
    if not inventory.seeds:
        app.fail(f"{inventory.path}: no seeds; add sendhost_seeds (docs/placement.md) to test placement", 2)
    if (campaign is None) != (step is None):
        app.fail("--campaign and --step go together: name the campaign and the step to send", 2)
    wait_s = parse_duration(wait_text)
    mailboxes = _chosen(sc, mailbox_group, mailbox_address)
    with sc.ledger() as ledger:
        content = flow.campaign_content(ledger, campaign, step) if campaign and step else flow.neutral
        started = time.time()
        test = flow.start(ledger, mailboxes, inventory.seeds, wait_s=wait_s, content=content, campaign=campaign,
                          step=step)
        click.echo(f"placement test {test}: {len(mailboxes) * len(inventory.seeds)} message(s) queued through the "
                   "agent's send path (each counts against its mailbox's warm-up cap)", err=True)
    if send_here:
        _send_here(sc, host_name)
    with sc.ledger() as ledger:
        results = flow.follow(ledger, test, inventory.seeds, {m.address.lower(): m.domain for m in mailboxes},
                              wait_s=wait_s, started=started, env=app.env, poll_s=poll_s)
        changes = _judge(sc, ledger, test, mailboxes)
    _render(sc, test, results, fmt, changes)
    missed = [r for r in results if r.placement not in ("inbox", "category")]
    if missed:
        sc.app.fail(f"{len(missed)} of {len(results)} message(s) not placed in an inbox", 1)


def _chosen(sc: SenderContext, mailbox_group: str | None, mailbox_address: str | None) -> list[Mailbox]:
    inventory = sc.app.require_inventory()
    if mailbox_group and mailbox_address:
        sc.app.fail("name --group or --mailbox, not both", 2)
    sending = [m for m in inventory.mailboxes if m.smtp is not None]
    if mailbox_address:
        chosen = [m for m in sending if m.address == mailbox_address.strip().lower()]
        if not chosen:
            known = ", ".join(m.address for m in sending) or "none"
            sc.app.fail(f"no mailbox {mailbox_address} with smtp settings in {inventory.path} (mailboxes: {known})",
                        2)
    elif mailbox_group:
        chosen = [m for m in sending if m.group == mailbox_group]
        if not chosen:
            known = ", ".join(sorted({m.group for m in sending})) or "none"
            sc.app.fail(f"no mailbox of group {mailbox_group!r} with smtp settings in {inventory.path} "
                        f"(groups: {known})", 2)
    else:
        chosen = sending
        if not chosen:
            sc.app.fail(f"{inventory.path}: no mailbox with smtp settings to test", 2)
    return chosen


def _judge(sc: SenderContext, ledger: Ledger, test: int, mailboxes: list[Mailbox]) -> list[Change]:
    """Rest or lift each tested mailbox by its inbox share (sendhost_placement.rest_below); each change on stderr."""
    from sender.placement.rest import judge
    from warmup import Guard

    policy = sc.app.require_inventory().placement
    if policy.rest_below is None:
        return []
    guard = Guard(sc.app.redis())
    try:
        changes = [c for m in mailboxes if (c := judge(ledger, guard, m.address, policy, test)) is not None]
    finally:
        guard.close()
    for change in changes:
        click.echo(f"{change.mailbox} {change.change}: {change.why}", err=True)
    return changes


def _send_here(sc: SenderContext, host_name: str | None) -> None:
    import threading

    from sender.sending.report import ReportKind
    from toolkit.cli.sender.run import build_agent

    agent, ledger_factory = build_agent(sc, host_name)
    reports = agent.run(ledger_factory, 1, once=True, stop=threading.Event())
    for report in reports:
        if report.kind is not ReportKind.SENT:
            click.echo(f"agent: row {report.row} {report.kind}: {report.detail}", err=True)


def _after(result: Result) -> str | None:
    return None if result.found_after_s is None else f"{result.found_after_s:.0f}s"


def _placement_text(result: Result) -> str:
    if result.placement == "category":
        return f"inbox ({result.category})"
    if result.placement in ("not_found", "not_sent", "unknown"):
        return f"{result.placement.replace('_', ' ')}: {result.detail}" if result.detail else result.placement
    return result.placement


def _dkim_text(result: Result) -> str | None:
    if result.dkim is None:
        return None
    return f"{result.dkim} ({result.dkim_domain})" if result.dkim_domain else result.dkim


def _render(sc: SenderContext, test: int, results: list[Result], fmt: str | None, changes: list[Change]) -> None:
    if sc.app.output_format(fmt) == "json":
        emit_json({"test": test, "results": [r.to_json() for r in results],
                   "rests": [{"mailbox": c.mailbox, "change": c.change, "why": c.why} for c in changes]})
        return
    rows: list[list[Any]] = []
    for r in results:
        found = r.placement in ("inbox", "spam", "category", "other")
        rows.append([r.mailbox, r.seed, r.provider, _placement_text(r), r.folder, _after(r),
                     r.spf if found else None, _dkim_text(r) if found else None, r.dmarc if found else None,
                     r.arc if found else None])
    inbox = sum(r.placement in ("inbox", "category") for r in results)
    emit_table(f"placement test {test}", TEST_COLUMNS, rows, f"{inbox} of {len(results)} in an inbox")


STATUS_COLUMNS = ("mailbox", "provider", "tests", "inbox", "inbox share", "rested")


@group.command("status")
@format_option()
@pass_sender
def status_command(sc: SenderContext, fmt: str | None) -> None:
    """Each mailbox's inbox share per provider over its last tests (sendhost_placement.tests, default 3), and the
    mailboxes rested for it: how (ramp halved or paused), since when, on which tests and why."""
    from sender.placement.rest import open_rests, reconcile, shares

    inventory = sc.app.require_inventory()
    policy = inventory.placement
    guard, _why = sc.status_guard()
    with sc.ledger() as ledger:
        if guard is not None:
            try:
                reconcile(ledger, guard)
            finally:
                guard.close()
        found = shares(ledger, policy.tests)
        rests = open_rests(ledger)
    if sc.app.output_format(fmt) == "json":
        emit_json({"tests": policy.tests, "rest_below": policy.rest_below, "shares": [s.to_json() for s in found],
                   "rested": [{"mailbox": r.mailbox, "since": r.rested_at.isoformat(), "how": r.how,
                               "reason": r.reason, "tests": list(r.tests)} for r in rests.values()]})
        return
    rows = [[s.mailbox, s.provider, ", ".join(map(str, s.tests)), f"{s.inbox}/{s.judged}", f"{s.share:.0%}",
             f"{rests[s.mailbox].how} since {rests[s.mailbox].rested_at:%Y-%m-%d %H:%M}" if s.mailbox in rests
             else None] for s in found]
    below = f"; rested below {policy.rest_below:.0%}" if policy.rest_below is not None else ""
    emit_table(f"inbox share over the last {policy.tests} tests per provider{below}", STATUS_COLUMNS, rows,
               "\n".join(f"{r.mailbox} rested ({r.how}): {r.reason}" for r in rests.values()) or None)
