"""`sendhost warmup`: mailbox ramp schedules, the send guard's state, health records and counter rebuilds."""

from __future__ import annotations

import csv
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sendhost.errors import ConfigError
from toolkit.app import App
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from warmup import Decision, Guard
    from warmup.mailboxes import MailboxStatus
    from warmup.schedule import DayCap

EXIT_HELP = "Exit 0 ok; 1 reserve skipped or Redis unreachable; 2 bad input (the message names it)."


@click.group("warmup", epilog=EXIT_HELP)
def group() -> None:
    """Warm-up of sending mailboxes: caps, gaps, health gates and the send guard."""


def _guard(app: App, sync_inventory: bool = True) -> Guard:
    """A guard on the configured Redis, with the inventory's mailboxes added if they are not there yet."""
    from warmup import Guard  # late: `sendhost --help` must not import Redis

    guard = Guard(app.redis())
    if sync_inventory and app.inventory is not None:
        for mailbox in app.inventory.mailboxes:
            if not guard.knows(mailbox.address):
                guard.add_mailbox(mailbox.address, start=date.fromisoformat(mailbox.start), group=mailbox.group,
                                  timezone=mailbox.timezone, domain=mailbox.domain)
    return guard


def _date(value: str, option: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{option} {value!r} is not a date like 2026-11-30") from None


def _jitter(value: str) -> tuple[float, float]:
    parts = value.replace(",", "-").split("-")
    try:
        low, high = (float(p) for p in parts)
    except ValueError:
        raise ConfigError(f"--jitter {value!r} must be LOW-HIGH seconds like 0-90") from None
    return low, high


@group.command("add")
@click.argument("address")
@click.option("--start", "start", required=True, metavar="DATE", help="First sending day (not in the future).")
@click.option("--timezone", default="UTC", show_default=True, help="IANA zone the mailbox's days count in.")
@click.option("--group", "group_name", default="default", show_default=True, help="Mailboxes picked together.")
@click.option("--domain", default=None, help="Sending domain for spam rates (default: the address's domain).")
@click.option("--min-gap", default=420.0, show_default=True, type=float, help="Minimum seconds between sends.")
@click.option("--jitter", default="0-90", show_default=True, help="Extra gap LOW-HIGH seconds, drawn per day.")
@click.option("--ceiling", default=40, show_default=True, type=int, help="Highest daily cap the ramp reaches.")
@click.option("--step", default=5, show_default=True, type=int, help="Cap increase per healthy week.")
@format_option()
@click.pass_obj
def add(app: App, address: str, start: str, timezone: str, group_name: str, domain: str | None, min_gap: float,
        jitter: str, ceiling: int, step: int, fmt: str | None) -> None:
    """Put ADDRESS under warm-up (or update its settings; today's counters are kept)."""
    from warmup.schedule import Ramp

    start_day = _date(start, "--start")
    try:
        ramp = Ramp(step=step, ceiling=ceiling)
    except ValueError as exc:
        raise ConfigError(f"--step/--ceiling: {exc}") from None
    guard = _guard(app, sync_inventory=False)
    created = guard.add_mailbox(address, start=start_day, min_gap_s=min_gap, jitter_s=_jitter(jitter),
                                group=group_name, timezone=timezone, domain=domain, ramp=ramp)
    _render_status(guard.status([address]), app.output_format(fmt), "added" if created else "updated")


@group.command("plan")
@click.argument("mailbox", required=False)
@click.option("--start", "start", metavar="DATE", help="Plan a new mailbox starting on DATE (no Redis needed).")
@click.option("--days", default=42, show_default=True, type=click.IntRange(1, 730), help="Days to show.")
@click.option("--ceiling", default=40, show_default=True, type=int, help="With --start: the ramp's ceiling.")
@click.option("--step", default=5, show_default=True, type=int, help="With --start: cap increase per week.")
@format_option()
@click.pass_obj
def plan_command(app: App, mailbox: str | None, start: str | None, days: int, ceiling: int, step: int,
                 fmt: str | None) -> None:
    """Day-by-day caps of MAILBOX (with its health history) or of a new mailbox starting --start."""
    from warmup.schedule import Ramp, plan

    if (mailbox is None) == (start is None):
        raise ConfigError("plan needs exactly one of MAILBOX or --start DATE")
    if mailbox is not None:
        caps = _guard(app).plan(mailbox, days)
        title = f"warm-up plan of {mailbox.lower()}"
    else:
        assert start is not None
        start_day = _date(start, "--start")
        try:
            ramp = Ramp(step=step, ceiling=ceiling)
        except ValueError as exc:
            raise ConfigError(f"--step/--ceiling: {exc}") from None
        caps = plan(start_day, start_day + timedelta(days=days - 1), ramp)
        title = f"warm-up plan from {start_day}"
    _render_plan(caps, app.output_format(fmt), title)


@group.command("status")
@click.argument("mailboxes", nargs=-1)
@format_option()
@click.pass_obj
def status(app: App, mailboxes: tuple[str, ...], fmt: str | None) -> None:
    """Per mailbox: today's cap, sent, next eligible time, state and breaker (all mailboxes by default)."""
    _render_status(_guard(app).status(list(mailboxes) or None), app.output_format(fmt), None)


@group.command("pause")
@click.argument("mailbox")
@click.option("--reason", default="paused by hand", show_default=True)
@format_option()
@click.pass_obj
def pause(app: App, mailbox: str, reason: str, fmt: str | None) -> None:
    """Stop reserving sends for MAILBOX until `sendhost warmup resume`."""
    guard = _guard(app)
    guard.status([mailbox])  # unknown mailbox: exit 2 before anything is written
    guard.pause(mailbox, reason)
    _render_status(guard.status([mailbox]), app.output_format(fmt), "paused")


@group.command("resume")
@click.argument("mailbox")
@format_option()
@click.pass_obj
def resume(app: App, mailbox: str, fmt: str | None) -> None:
    """Clear a pause, a disconnect (auth failure, breaker tripped twice), a hold and the breaker."""
    guard = _guard(app)
    guard.status([mailbox])
    guard.resume(mailbox)
    _render_status(guard.status([mailbox]), app.output_format(fmt), "resumed")


@group.command("record")
@click.option("--spam-rate", "spam_rate", required=True, metavar="RATE",
              help="The day's spam rate: a percentage like 0.3% or a fraction like 0.003.")
@click.option("--domain", default=None, help="Sending domain the rate is for (as Postmaster Tools reports it).")
@click.option("--mailbox", default=None, help="Or one mailbox the rate is for.")
@click.option("--date", "day", default=None, metavar="DATE", help="Day the rate is for (default: yesterday, UTC).")
@format_option()
@click.pass_obj
def record(app: App, spam_rate: str, domain: str | None, mailbox: str | None, day: str | None,
           fmt: str | None) -> None:
    """Record a day's spam rate: at or above 0.1% holds the ramp; at or above 0.3% pauses and steps back."""
    from warmup.health import format_rate, parse_rate
    from warmup.mailboxes import validate_address

    rate = parse_rate(spam_rate)
    if (domain is None) == (mailbox is None):
        raise ConfigError("record needs exactly one of --domain DOMAIN or --mailbox ADDRESS")
    if mailbox is not None:
        mailbox = validate_address(mailbox)
    today = datetime.now(UTC).date()
    for_day = _date(day, "--date") if day else today - timedelta(days=1)
    if for_day > today + timedelta(days=1):
        raise ConfigError(f"--date {for_day} is in the future; spam rates are reported for past days")
    guard = _guard(app)
    if mailbox is not None:
        guard.status([mailbox])  # unknown mailbox: exit 2 before anything is written
    result = guard.record_spam_rate(rate, for_day, domain=domain, mailbox=mailbox)
    data = {"scope": result.scope, "date": result.day.isoformat(), "spam_rate": format_rate(result.rate),
            "verdict": result.verdict, "paused": list(result.paused)}
    if app.output_format(fmt) == "json":
        emit_json(data)
        return
    emit_table(f"spam rate for {result.scope}", ["date", "spam rate", "verdict", "paused"],
               [(data["date"], data["spam_rate"], result.verdict, ", ".join(result.paused) or "-")])


@group.command("reserve")
@click.argument("mailboxes", nargs=-1, required=True)
@format_option()
@click.pass_obj
def reserve(app: App, mailboxes: tuple[str, ...], fmt: str | None) -> None:
    """Reserve one send on the least-used eligible of MAILBOXES (one group); exit 1 when none may send now."""
    decision = _guard(app).pick(list(mailboxes))
    data = _decision_data(decision)
    if app.output_format(fmt) == "json":
        emit_json(data)
    else:
        emit_table(None, ["status", "mailbox", "count/cap", "retry after (s)", "reason"],
                   [(data["status"], data["mailbox"], data["count_cap"], data["retry_after_s"], data["reason"])],
                   summary=f"reservation {data['reservation']}" if data["reservation"] else None)
    if not decision.reserved:
        wait = "until resumed" if decision.retry_after_s is None else f"in {decision.retry_after_s:.0f} s"
        app.fail(f"{decision.status}: no send allowed now for {', '.join(mailboxes)}; next chance {wait}", 1)


@group.command("import-sends")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@format_option()
@click.pass_obj
def import_sends(app: App, path: Path, fmt: str | None) -> None:
    """Rebuild today's counters from the sender's own log (CSV or JSON rows with `mailbox` and `sent_at`).

    Counters are only ever raised. Rows whose `status` is `cancelled` or `rejected` freed their slot and
    do not count."""
    sends = _read_send_log(path)
    restored = _guard(app).import_sends(sends)
    rows = [(address, count, datetime.fromtimestamp(last / 1000, UTC).isoformat() if last >= 0 else None)
            for address, (count, last) in sorted(restored.items())]
    if app.output_format(fmt) == "json":
        emit_json([{"mailbox": a, "sent_today": c, "last_send": last} for a, c, last in rows])
        return
    emit_table(f"counters rebuilt from {path}", ["mailbox", "sent today", "last send"], rows)


def _read_send_log(path: Path) -> list[tuple[str, datetime]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}; pass a CSV or JSON send log") from None
    if path.suffix.lower() == ".json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ConfigError(f"{path}: expected a JSON list of objects with mailbox and sent_at")
        numbered: list[tuple[str, dict[str, Any]]] = [(f"item {i}", r) for i, r in enumerate(rows)]
    else:
        reader = csv.DictReader(text.splitlines())
        if not reader.fieldnames or not {"mailbox", "sent_at"} <= set(reader.fieldnames):
            raise ConfigError(f"{path}:1: the CSV header needs columns mailbox and sent_at")
        numbered = [(f"line {i + 2}", dict(r)) for i, r in enumerate(reader)]
    sends = []
    for where, row in numbered:
        if str(row.get("status") or "").lower() in ("cancelled", "rejected"):
            continue
        try:
            sent_at = datetime.fromisoformat(str(row.get("sent_at")))
        except ValueError:
            raise ConfigError(f"{path} {where}: sent_at {row.get('sent_at')!r} is not an ISO time like "
                              "2026-11-30T09:15:00+00:00") from None
        if sent_at.tzinfo is None:
            raise ConfigError(f"{path} {where}: sent_at {row.get('sent_at')!r} has no UTC offset; add one "
                              "like +00:00")
        sends.append((str(row.get("mailbox") or ""), sent_at))
    return sends


def _decision_data(decision: Decision) -> dict[str, Any]:
    r = decision.reservation
    return {
        "status": decision.status, "mailbox": decision.mailbox,
        "reservation": r.token if r else None, "day": r.day if r else None,
        "count_cap": f"{r.count}/{r.cap}" if r else None,
        "retry_after_s": decision.retry_after_s, "reason": decision.reason,
    }


def _render_status(rows: list[MailboxStatus], fmt: str, summary: str | None) -> None:
    if fmt == "json":
        emit_json([{
            "mailbox": s.address, "group": s.group, "day": s.day.isoformat(), "day_number": s.day_number,
            "cap": s.cap, "sent": s.sent, "next_eligible": s.next_eligible.isoformat() if s.next_eligible else None,
            "state": s.state, "reason": s.reason, "breaker": s.breaker, "failures_in_window": s.failures_in_window,
            "trips_today": s.trips_today,
        } for s in rows])
        return
    notes = [f"{s.address}: {s.state}: {s.reason}" for s in rows if s.reason]
    if summary:
        notes.append(f"{summary} {', '.join(s.address for s in rows)}")
    emit_table("warm-up status", ["mailbox", "day", "#", "cap", "sent", "next eligible", "state", "breaker"],
               [(s.address, s.day, s.day_number, s.cap, s.sent,
                 s.next_eligible.isoformat(timespec="seconds") if s.next_eligible else "until resumed",
                 s.state, s.breaker) for s in rows],
               summary="\n".join(notes) or None)


def _render_plan(caps: list[DayCap], fmt: str, title: str) -> None:
    if fmt == "json":
        emit_json([{"date": d.day.isoformat(), "day": d.day_number, "cap": d.cap, "state": d.state} for d in caps])
        return
    emit_table(title, ["date", "day", "cap", "state"], [(d.day, d.day_number, d.cap, d.state) for d in caps])
