"""Mailbox health (sender.feedback.health) in the status commands: read from the ledger, never written, and shown.

`sender status` and `warmup status` show what `sender health` shows, from the same ledger (the configured one, else
the embedded one); when it cannot be read (none created yet, unreachable, no schema) they say health is unavailable
and why, never that a mailbox is fine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from toolkit.output import emit_table

if TYPE_CHECKING:
    from sender.feedback.health import MailboxHealth
    from sender.postmaster.sync import Latest

TITLE = "mailbox health, last 7 days"
COLUMNS = ("mailbox", "sent", "hard bounces", "complaints", "gate")
HEALTH_CONNECT_TIMEOUT_S = 3  # a status command must not hang on a ledger that does not answer


@dataclass(frozen=True)
class HealthView:
    """The window's counts per lower-case mailbox, or why they could not be read (`counts` is None then)."""

    counts: Mapping[str, Mapping[str, int]] | None
    unavailable: str | None = None
    postmaster: tuple[Latest, ...] = ()  # each domain's last figures from Postmaster Tools (sender.postmaster)

    def mailboxes(self, also: Iterable[str] = ()) -> list[str]:
        """The mailboxes the ledger counted in the window and `also` (lower-case, sorted)."""
        return sorted({*(self.counts or {}), *(address.lower() for address in also)})

    def of(self, mailbox: str) -> MailboxHealth | None:
        """The mailbox's health (zeros when it sent nothing in the window), or None when unavailable."""
        from sender.feedback.health import judge

        return judge(self.counts, mailbox) if self.counts is not None else None

    def json_of(self, mailbox: str) -> dict[str, object]:
        health = self.of(mailbox)
        if health is not None:
            return health.to_json()
        from sender.feedback.health import Gate

        return {"mailbox": mailbox.lower(), "sent_7d": None, "hard_bounces_7d": None, "hard_bounce_rate": None,
                "complaints_7d": None, "complaint_rate": None, "verdict": None, "gate": str(Gate.UNAVAILABLE),
                "reason": self.unavailable}


def read_view(url: str | None, why_none: str = "") -> HealthView:
    """The ledger's health window at `url` (read only; the schema must be current), or unavailable with the reason:
    `why_none` when there is no `url`, else the ledger's own error."""
    from datetime import UTC, datetime

    from sender.feedback.health import read_health
    from sender.ledger.events import Feedback
    from sender.postmaster.sync import latest
    from sendhost.errors import SendhostError

    if url is None:
        return HealthView(None, why_none)
    try:
        with Feedback.from_url(url, connect_timeout=HEALTH_CONNECT_TIMEOUT_S) as feedback:
            feedback.ledger.check_schema()
            return HealthView(read_health(feedback, datetime.now(UTC)), postmaster=tuple(latest(feedback.ledger)))
    except SendhostError as exc:
        return HealthView(None, str(exc))


def read_embedded_view(state_dir: Path, started: Callable[[], None] = lambda: None) -> HealthView:
    """The embedded ledger's health window, the ledger `sender status` reads when none is configured: its server is
    started when it is stopped (then `started` is called), never created (a state directory without one has sent
    nothing through sendhost)."""
    from sender.embedded import embedded_url
    from sender.embedded_status import embedded_postgres_status
    from sendhost.errors import SendhostError

    try:
        found = embedded_postgres_status(state_dir)
        if not found.created:
            return HealthView(None, f"no send ledger yet under {state_dir} (the embedded PostgreSQL is created by the "
                                    "first `sendhost sender` or `campaign` command), or set SENDHOST_DATABASE_URL")
        url = embedded_url(state_dir)
        if not found.running:
            started()
    except SendhostError as exc:
        return HealthView(None, str(exc))
    return read_view(url)


def health_row(health: MailboxHealth) -> tuple[str, int, str, str, str]:
    """One table row: counts with their rates beside them."""
    from warmup.health import format_rate

    return (health.mailbox, health.sent, f"{health.bounced} ({health.bounce_rate:.1%})",
            f"{health.complained} ({format_rate(health.complaint_rate)})", str(health.gate))


def render_health(view: HealthView, mailboxes: Sequence[str]) -> None:
    """The health table of `mailboxes`, or one line saying why health is unavailable."""
    if view.counts is None:
        click.echo(f"mailbox health unavailable: {view.unavailable}")
        return
    rows = [health_row(health) for health in (view.of(mailbox) for mailbox in mailboxes) if health is not None]
    if not rows:
        click.echo("mailbox health: no mailbox sent in the last 7 days")
        return
    emit_table(TITLE, COLUMNS, rows)


POSTMASTER_TITLE = "spam rate as Postmaster Tools reports it"
POSTMASTER_COLUMNS = ("domain", "day", "spam rate", "gate", "reputation", "last reported")


def postmaster_json(view: HealthView, domain: str | None) -> dict[str, object] | None:
    """`domain`'s last figures from Postmaster Tools, with the gate they make; None when none were read."""
    from warmup.health import verdict

    for found in view.postmaster:
        if found.domain == domain:
            gate = verdict(found.spam_ratio) if found.spam_ratio is not None else None
            return {**found.to_json(), "verdict": gate}
    return None


def render_postmaster(view: HealthView, domains: Sequence[str]) -> None:
    """The last day with a spam rate of each of `domains` that Postmaster Tools reported on (none: nothing shown)."""
    from warmup.health import format_rate, verdict

    wanted = set(domains)
    rows = [(found.domain, found.day or "no data", format_rate(found.spam_ratio) if found.spam_ratio is not None
             else "no data", verdict(found.spam_ratio) if found.spam_ratio is not None else "-",
             found.reputation or "-", found.last_reported)
            for found in view.postmaster if found.domain in wanted]
    if rows:
        emit_table(POSTMASTER_TITLE, POSTMASTER_COLUMNS, rows)
