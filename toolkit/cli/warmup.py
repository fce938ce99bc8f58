"""`sendhost warmup`: mailbox ramp schedules, the send guard's state, health records and counter rebuilds."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sendhost.errors import ConfigError
from sendhost.model import DEFAULT_GROUP, DEFAULT_TIMEZONE, JITTER_S, MIN_GAP_S
from toolkit.app import DATABASE_SETTINGS, App, reads_only
from toolkit.cli.help_format import WholeHelpGroup
from toolkit.cli.warmup_sendlog import read_send_log
from toolkit.cli.warmup_views import decision_data, render_plan, render_status, wait_words
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from sendhost.model import Mailbox
    from toolkit.cli.mailbox_health import HealthView
    from warmup import Guard
    from warmup.mailboxes import MailboxStatus
    from warmup.schedule import DayCap, Ramp

EXIT_HELP = ("Exit 0 ok; 1 reserve skipped or Redis unreachable; 2 bad input or configuration, a Redis refusing the "
             "URL's user or password included (the message names it).")


@click.group("warmup", cls=WholeHelpGroup, epilog=EXIT_HELP)
def group() -> None:
    """Warm-up of sending mailboxes: caps, gaps, health gates and the send guard."""


def _guard(app: App) -> Guard:
    """A guard on the configured Redis, as it is: what read commands use (they never write state)."""
    from warmup import Guard  # late: `sendhost --help` must not import Redis

    return Guard(app.redis())


def _synced_guard(app: App) -> Guard:
    """A guard with the inventory's mailboxes added if they are not there yet: what write commands use."""
    guard = _guard(app)
    if app.inventory is not None:
        for mailbox in app.inventory.mailboxes:
            if not guard.knows(mailbox.address):
                guard.add_mailbox(mailbox.address, start=mailbox.start, group=mailbox.group,
                                  timezone=mailbox.timezone, domain=mailbox.domain)
    return guard


def _store(app: App) -> str:
    """Where warm-up state lives, for messages: the embedded server's directory or the URL's source."""
    if app.config.redis_url.value:
        return f"the Redis from {app.config.redis_url.source}"
    return f"the embedded Redis under {app.state_dir}"


def _date(value: str, option: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{option} {value!r} is not a date like 2026-11-30") from None


JITTER_FLAG_DEFAULT = f"{JITTER_S[0]:g}-{JITTER_S[1]:g}"


def _jitter(value: str) -> tuple[float, float]:
    parts = value.replace(",", "-").split("-")
    try:
        low, high = (float(p) for p in parts)
    except ValueError:
        raise ConfigError(f"--jitter {value!r} must be LOW-HIGH seconds like {JITTER_FLAG_DEFAULT}") from None
    if not 0 <= low <= high:
        raise ConfigError(f"--jitter {value!r}: need 0 <= LOW <= HIGH seconds, like {JITTER_FLAG_DEFAULT}")
    return low, high


def _flag(option: str, check: Callable[[str], str], value: str) -> str:
    """Run a warmup validator, naming the CLI flag (not the Python parameter) when it refuses."""
    from warmup.errors import WarmupConfigError

    try:
        return check(value)
    except WarmupConfigError as exc:
        raise ConfigError(f"{option}: {exc}") from None


def _ramp(step: int, ceiling: int) -> Ramp:
    from warmup.schedule import Ramp

    try:
        return Ramp(step=step, ceiling=ceiling)
    except ValueError as exc:
        raise ConfigError(f"--step {step} / --ceiling {ceiling}: {exc}") from None


@group.command("add")
@click.argument("address")
@click.option("--start", "start", required=True, metavar="DATE",
              help="First sending day; may be in the future (nothing is reserved before it).")
@click.option("--timezone", default=DEFAULT_TIMEZONE, show_default=True, help="IANA zone the mailbox's days count in.")
@click.option("--group", "group_name", default=DEFAULT_GROUP, show_default=True, help="Mailboxes picked together.")
@click.option("--domain", default=None, help="Sending domain for spam rates (default: the address's domain).")
@click.option("--min-gap", default=MIN_GAP_S, show_default=True, type=float, help="Minimum seconds between sends.")
@click.option("--jitter", default=JITTER_FLAG_DEFAULT, show_default=True,
              help="Extra gap LOW-HIGH seconds, drawn afresh for every send.")
@click.option("--ceiling", default=40, show_default=True, type=int, help="Highest daily cap the ramp reaches.")
@click.option("--step", default=5, show_default=True, type=int, help="Cap increase per healthy week.")
@click.option("--force", is_flag=True, help="Allow moving the start earlier so that today leaves week one.")
@format_option()
@click.pass_obj
def add(app: App, address: str, start: str, timezone: str, group_name: str, domain: str | None, min_gap: float,
        jitter: str, ceiling: int, step: int, force: bool, fmt: str | None) -> None:
    """Put ADDRESS under warm-up (or update its settings; today's counters are kept)."""
    from warmup.mailboxes import validate_group, validate_timezone

    start_day = _date(start, "--start")
    if min_gap < 0:
        raise ConfigError(f"--min-gap {min_gap:g}: must be 0 or more seconds, like {MIN_GAP_S:g}")
    jitter_s = _jitter(jitter)
    ramp = _ramp(step, ceiling)
    _flag("--group", validate_group, group_name)
    _flag("--timezone", validate_timezone, timezone)
    guard = _guard(app)
    created = guard.add_mailbox(address, start=start_day, min_gap_s=min_gap, jitter_s=jitter_s, group=group_name,
                                timezone=timezone, domain=domain, ramp=ramp, force=force)
    render_status(guard.status([address]), app.output_format(fmt), "added" if created else "updated")


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
    """Day-by-day caps of MAILBOX (with its health history) or of a new mailbox starting --start.

    A mailbox whose first day is still ahead shows its waiting days as not-started, from today."""
    from warmup.schedule import plan

    if (mailbox is None) == (start is None):
        raise ConfigError("plan needs exactly one of MAILBOX or --start DATE")
    today = datetime.now(UTC).date()
    if mailbox is not None:
        guard = _guard(app)
        declared = _inventory_mailbox(app, mailbox)
        if declared is not None and not guard.knows(mailbox):  # planned from the inventory; nothing written
            first = declared.start
            caps = plan(first, first + timedelta(days=days - 1))
        else:
            caps = guard.plan(mailbox, days)
            first = caps[0].day
        title = f"warm-up plan of {mailbox.lower()}"
    else:
        assert start is not None
        first = _date(start, "--start")
        caps = plan(first, first + timedelta(days=days - 1), _ramp(step, ceiling))
        title = f"warm-up plan from {first}"
    render_plan(_waiting_days(today, first) + caps, app.output_format(fmt), title)


def _waiting_days(today: date, first: date) -> list[DayCap]:
    """Days from today up to a future first day: nothing is reserved on them."""
    from warmup.schedule import DayCap

    return [DayCap(today + timedelta(days=n), 0, 0, "not-started") for n in range((first - today).days)]


def _inventory_mailbox(app: App, address: str) -> Mailbox | None:
    if app.inventory is None:
        return None
    return next((m for m in app.inventory.mailboxes if m.address.lower() == address.lower()), None)


@reads_only
@group.command("status")
@click.argument("mailboxes", nargs=-1)
@format_option()
@click.pass_obj
def status(app: App, mailboxes: tuple[str, ...], fmt: str | None) -> None:
    """Per mailbox: today's cap, sent, next eligible time, state and breaker (all mailboxes by default), and its
    last 7 days from the ledger: sends, hard bounces, complaints, their rates and the health gate.

    Reads only. Health comes from the ledger `sender status` reads (SENDHOST_DATABASE_URL, the inventory's
    sendhost_database_url, else the embedded PostgreSQL, started if stopped); when there is none yet, or it does not
    answer, health shows as unavailable and why. Exit 1 when the store holds no warm-up
    state where some was expected (the inventory lists mailboxes, or the embedded Redis came back without its
    data)."""
    guard = _guard(app)
    output = app.output_format(fmt)
    if mailboxes:
        in_inventory = {m.address.lower() for m in app.inventory.mailboxes} if app.inventory else set()
        pending = [a.lower() for a in mailboxes if a.lower() in in_inventory and not guard.knows(a)]
        wanted = [a for a in mailboxes if a.lower() not in pending]  # anything else unknown: exit 2, named
        rows = guard.status(wanted) if wanted else []
        notes = [f"not in {_store(app)} yet: {', '.join(pending)} (listed in the inventory; the next "
                 "`warmup reserve`, `pause` or `record` adds them)"] if pending else []
        render_status(rows, output, None, notes=notes if output != "json" else [],
                      health=_health(app) if rows else None, domains=_domains(guard, rows))
        return
    rows = guard.status()
    known = {row.address for row in rows}
    declared = [m.address.lower() for m in app.inventory.mailboxes] if app.inventory else []
    missing = [address for address in declared if address not in known]
    notes = []
    if missing:
        notes.append(f"not in {_store(app)} yet: {', '.join(missing)} (listed in the inventory; the next "
                     "`warmup reserve`, `pause` or `record` adds them)")
    elif not rows:
        notes.append("no mailbox is under warm-up; add one with `sendhost warmup add ADDRESS --start DATE` or list "
                     "it under sendhost_mailboxes in the inventory")
    render_status(rows, output, None, notes=notes if output != "json" else [], health=_health(app) if rows else None,
                  domains=_domains(guard, rows))
    if rows:
        return
    lost = guard.mailboxes.lost_note()
    if lost is not None:
        app.fail(f"{_store(app)} holds no warm-up state: it came back without its data ({lost}); mailboxes, "
                 "counters and pauses are gone: rebuild today's counters with `sendhost warmup import-sends LOG` "
                 "and pause again what was paused", 1)
    if missing:
        app.fail(f"{_store(app)} holds no warm-up state, though the inventory lists {len(missing)} mailbox"
                 f"{'es' if len(missing) != 1 else ''}: it was lost or never written; if these mailboxes have "
                 "sent, rebuild today's counters with `sendhost warmup import-sends LOG`", 1)


def _domains(guard: Guard, rows: list[MailboxStatus]) -> dict[str, str]:
    """Each mailbox's sending domain, whose spam rate Postmaster Tools reports."""
    return {row.address: guard.settings(row.address).domain for row in rows}


def _health(app: App) -> HealthView:
    """The mailboxes' health from the ledger `sender status` reads: the configured one, else the embedded one."""
    from sender.errors import SenderConfigError
    from toolkit.cli.mailbox_health import read_embedded_view, read_view

    try:
        configured = app.database_url().value
    except SenderConfigError as exc:  # a malformed URL: health cannot be read, the warm-up state still can
        return read_view(None, str(exc))
    if configured is not None:
        return read_view(configured)
    return read_embedded_view(app.state_dir, lambda: app.say_embedded_started("PostgreSQL", DATABASE_SETTINGS))


@group.command("pause")
@click.argument("mailbox")
@click.option("--reason", default="paused by hand", show_default=True)
@format_option()
@click.pass_obj
def pause(app: App, mailbox: str, reason: str, fmt: str | None) -> None:
    """Stop reserving sends for MAILBOX until `sendhost warmup resume`."""
    guard = _synced_guard(app)
    guard.status([mailbox])  # unknown mailbox: exit 2 before anything is written
    guard.pause(mailbox, reason)
    render_status(guard.status([mailbox]), app.output_format(fmt), "paused")


@group.command("resume")
@click.argument("mailbox")
@format_option()
@click.pass_obj
def resume(app: App, mailbox: str, fmt: str | None) -> None:
    """Clear a pause, a disconnect (auth failure, breaker tripped twice), a hold and the breaker."""
    guard = _synced_guard(app)
    guard.status([mailbox])
    guard.resume(mailbox)
    render_status(guard.status([mailbox]), app.output_format(fmt), "resumed")


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
    from warmup.mailboxes import CAP_CHANGE_HORIZON_DAYS, validate_address

    rate = parse_rate(spam_rate)
    if (domain is None) == (mailbox is None):
        raise ConfigError("record needs exactly one of --domain DOMAIN or --mailbox ADDRESS")
    if mailbox is not None:
        mailbox = validate_address(mailbox)
    today = datetime.now(UTC).date()
    for_day = _date(day, "--date") if day else today - timedelta(days=1)
    if for_day > today + timedelta(days=1):
        raise ConfigError(f"--date {for_day} is in the future; spam rates are reported for past days")
    guard = _synced_guard(app)
    if mailbox is not None:
        guard.status([mailbox])  # unknown mailbox: exit 2 before anything is written
    result = guard.record_spam_rate(rate, for_day, domain=domain, mailbox=mailbox)
    changes = [{"mailbox": c.address, "from": c.day.isoformat(), "cap_before": c.before, "cap_after": c.after,
                "state": c.state} for c in result.cap_changes]
    data = {"scope": result.scope, "date": result.day.isoformat(), "spam_rate": format_rate(result.rate),
            "verdict": result.verdict, "mailboxes": list(result.mailboxes), "paused": list(result.paused),
            "cap_changes": changes}
    if app.output_format(fmt) == "json":
        emit_json(data)
        return
    lines = [f"{c.address}: cap from {c.day} {c.before} -> {c.after} ({c.state})" for c in result.cap_changes]
    if not lines:
        lines.append(f"caps unchanged for the next {CAP_CHANGE_HORIZON_DAYS} days of "
                     f"{', '.join(result.mailboxes)}" + (" (the ramp holds: this day does not count towards the "
                                                         "next step)" if result.verdict == "hold" else ""))
    emit_table(f"spam rate for {result.scope}", ["date", "spam rate", "verdict", "paused"],
               [(data["date"], data["spam_rate"], result.verdict, ", ".join(result.paused) or "-")],
               summary="\n".join(lines))


@group.command("reserve")
@click.argument("mailboxes", nargs=-1, required=True)
@format_option()
@click.pass_obj
def reserve(app: App, mailboxes: tuple[str, ...], fmt: str | None) -> None:
    """Reserve one send on the least-used eligible of MAILBOXES (one group); exit 1 when none may send now.

    The reservation counts against the day's cap until it is settled: after sending, `sendhost warmup confirm
    TOKEN`; if nothing was sent, `sendhost warmup cancel TOKEN` gives the slot back."""
    decision = _synced_guard(app).pick(list(mailboxes))
    data = decision_data(decision)
    wait = wait_words(decision.retry_after_s)
    if app.output_format(fmt) == "json":
        emit_json(data)
    else:
        token = data["reservation"]
        emit_table(None, ["status", "mailbox", "count/cap", "next chance", "reason"],
                   [(data["status"], data["mailbox"], data["count_cap"], None if decision.reserved else wait,
                     data["reason"])],
                   summary=None if token is None else
                   f"reservation {token} (counts against today's cap until settled): after the send, "
                   f"`sendhost warmup confirm {token}`; not sent, `sendhost warmup cancel {token}`")
    if not decision.reserved:
        app.fail(f"{decision.status}: no send allowed now for {', '.join(mailboxes)}; next chance {wait}", 1)


@group.command("confirm")
@click.argument("token")
@click.pass_obj
def confirm(app: App, token: str) -> None:
    """The send of reservation TOKEN went out: settle it (it keeps counting against its day)."""
    guard = _guard(app)
    reservation = guard.reservation_of(token)
    if not guard.confirm(reservation):
        app.fail(f"reservation {token} was not confirmed: it was already confirmed or cancelled, or Redis did "
                 "not answer", 1)
    click.echo(f"confirmed {token}: counted as sent by {reservation.mailbox} on {reservation.day}")


@group.command("cancel")
@click.argument("token")
@click.option("--failure", metavar="CLASS", default=None,
              help="Why the send failed (a failure class: recipient, content, account_quota, ...); without "
                   "it the send was never attempted and the slot is given back.")
@click.pass_obj
def cancel(app: App, token: str, failure: str | None) -> None:
    """The send of reservation TOKEN did not go out: give the slot back (or apply --failure's response)."""
    from warmup import FailureClass

    classes = {c.value: c for c in FailureClass}
    if failure is not None and failure not in classes:
        raise ConfigError(f"--failure {failure!r} is not a failure class; use one of {', '.join(classes)}")
    guard = _guard(app)
    reservation = guard.reservation_of(token)
    outcome = guard.cancel(reservation, classes[failure] if failure else None)
    if not outcome.applied:
        app.fail(f"reservation {token} was not cancelled: Redis did not answer; the slot stays used", 1)
    if not outcome.settled:
        app.fail(f"reservation {token} was already confirmed or cancelled; nothing changed", 1)
    freed = "the slot is free again" if outcome.freed else "the slot stays used"
    extra = "; the mailbox is disconnected until resumed" if outcome.disconnected else (
        "; the circuit breaker tripped" if outcome.tripped else "")
    click.echo(f"cancelled {token}: {freed}{extra}")


@group.command("import-sends")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@format_option()
@click.pass_obj
def import_sends(app: App, path: Path, fmt: str | None) -> None:
    """Rebuild today's counters from the sender's own log (CSV or JSON rows with `mailbox` and `sent_at`).

    Counters are only ever raised. Rows whose `status` is `cancelled` or `rejected` freed their slot and
    do not count."""
    sends = read_send_log(path)
    restored = _synced_guard(app).import_sends(sends)
    rows = [(address, count, datetime.fromtimestamp(last / 1000, UTC).isoformat() if last >= 0 else None)
            for address, (count, last) in sorted(restored.items())]
    if app.output_format(fmt) == "json":
        emit_json([{"mailbox": a, "sent_today": c, "last_send": last} for a, c, last in rows])
        return
    emit_table(f"counters rebuilt from {path}", ["mailbox", "sent today", "last send"], rows)
