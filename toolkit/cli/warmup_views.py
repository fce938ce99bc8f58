"""How `sendhost warmup` shows its results: status and plan tables, reservations, waits as people read them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from toolkit.output import emit_json, emit_table

if TYPE_CHECKING:
    from toolkit.cli.mailbox_health import HealthView
    from warmup import Decision
    from warmup.mailboxes import MailboxStatus
    from warmup.schedule import DayCap


def decision_data(decision: Decision) -> dict[str, Any]:
    r = decision.reservation
    return {
        "status": decision.status, "mailbox": decision.mailbox,
        "reservation": r.token if r else None, "day": r.day if r else None,
        "count_cap": f"{r.count}/{r.cap}" if r else None,
        "retry_after_s": decision.retry_after_s, "reason": decision.reason,
    }


def render_status(rows: list[MailboxStatus], fmt: str, summary: str | None, notes: Sequence[str] = (),
                  health: HealthView | None = None, domains: Mapping[str, str] | None = None) -> None:
    """The status table (and, given `health`, each mailbox's health table and its domain's spam rate as Postmaster
    Tools reports it, `domains` naming each mailbox's domain), or the JSON list of mailboxes."""
    domains = domains or {}
    if fmt == "json":
        from toolkit.cli.mailbox_health import postmaster_json

        emit_json([{
            "mailbox": s.address, "group": s.group, "day": s.day.isoformat(), "day_number": s.day_number,
            "cap": s.cap, "reserved": s.reserved, "sent": s.sent,
            "next_eligible": s.next_eligible.isoformat() if s.next_eligible else None,
            "state": s.state, "reason": s.reason, "breaker": s.breaker, "failures_in_window": s.failures_in_window,
            "trips_today": s.trips_today,
            **({"health": health.json_of(s.address),
                "postmaster": postmaster_json(health, domains.get(s.address))} if health is not None else {}),
        } for s in rows])
        return
    lines = [f"{s.address}: {s.state}: {s.reason}" for s in rows if s.reason]
    lines += notes
    if summary:
        lines.append(f"{summary} {', '.join(s.address for s in rows)}")
    now = datetime.now(UTC)
    emit_table("warm-up status", ["mailbox", "day", "#", "cap", "reserved", "sent", "next eligible", "state",
                                  "breaker"],
               [(s.address, s.day, s.day_number, s.cap, s.reserved, s.sent,
                 when_words(s.next_eligible, now) if s.next_eligible else "until resumed",
                 s.state, s.breaker) for s in rows],
               summary="\n".join(lines) or None)
    if health is not None and rows:
        from toolkit.cli.mailbox_health import render_health, render_postmaster

        render_health(health, [s.address for s in rows])
        render_postmaster(health, sorted({domains[s.address] for s in rows if s.address in domains}))


def when_words(at: datetime, now: datetime) -> str:
    """An instant as a person reads it: local clock time and how long from now, both rounded up."""
    from warmup.days import format_duration

    wait_ms = (at - now).total_seconds() * 1000
    if wait_ms <= 0:
        return "now"
    local = (at + timedelta(microseconds=999_999 - at.microsecond)).replace(microsecond=0).astimezone()
    clock = local.strftime("%H:%M:%S %Z") if local.date() == now.astimezone().date() else \
        local.strftime("%Y-%m-%d %H:%M:%S %Z")
    return f"{clock} (in {format_duration(wait_ms)})"


def wait_words(retry_after_s: float | None) -> str:
    if retry_after_s is None:
        return "until resumed"
    now = datetime.now(UTC)
    return "at " + when_words(now + timedelta(seconds=retry_after_s), now)


def render_plan(caps: list[DayCap], fmt: str, title: str) -> None:
    if fmt == "json":
        emit_json([{"date": d.day.isoformat(), "day": d.day_number, "cap": d.cap, "state": d.state} for d in caps])
        return
    emit_table(title, ["date", "day", "cap", "state"], [(d.day, d.day_number, d.cap, d.state) for d in caps])
