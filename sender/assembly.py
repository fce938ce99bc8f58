"""The composition root of the sender: one place that builds the agent (its guard, pool and hot-path Redis client),
the inbox reading (with its health report to the warm-up guard) and the web service's keys, from settings and
clients. The CLI, the simulation and the tests build through it; the CLI only turns the inventory into settings.

The unsubscribe key is chosen here, once, for the agent that signs the links and the web service that checks them.

Time comes from one `clock` (epoch seconds), given to everything that reads one: the guard's and the pool's scripts
(instead of Redis TIME), the agent's counter rebuild and, once the ledger takes a clock, the ledger (instead of
PostgreSQL's now()). Without one, each keeps its production source. The simulation passes its simulated clock.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import redis

from ippool import Lease, Pool
from sender.ledger.store import Ledger
from sender.oauth import TokenKeeper
from sender.oauth.keeper import check_credential
from sender.oauth.opening import open_refreshing
from sender.sending.agent import Agent
from sender.sending.attempt import Opener
from sender.settings import AgentSettings
from sendhost import redis_conn
from warmup import Guard, Picker

if TYPE_CHECKING:
    from sender.campaigns.spec import CampaignSpec
    from sender.feedback.inbox import MailboxReport
    from sender.feedback.web import WebKeys
    from sender.ledger.cap_wait import CapWait
    from sender.ledger.events import Feedback
    from sender.ledger.stalled import Stalled
    from sender.ledger.waits import Conditions, Waits
    from sendhost.model import Mailbox, PostmasterSettings

INBOX_EVERY_S = 60.0


# --- the ledger and the unsubscribe key --------------------------------------------------------------------------


def connect_ledger(url: str, clock: Callable[[], float] | None = None) -> Ledger:
    """A connection to the ledger at `url`, on `clock` when one is given."""
    return Ledger.from_url(url, clock=clock)


def open_ledger(url: str, *, embedded: bool, clock: Callable[[], float] | None = None) -> Ledger:
    """The ledger at `url`: the embedded one is migrated on first use, a configured one must have been migrated."""
    ledger = connect_ledger(url, clock)
    if embedded:
        ledger.migrate()
    else:
        ledger.check_schema()
    return ledger


def unsubscribe_key(ledger: Ledger, key_file: str | None) -> bytes:
    """The key that signs unsubscribe links: the inventory's key file when it names one, else the ledger's own."""
    from sender.sending.tokens import read_key_file

    return read_key_file(key_file) if key_file else ledger.unsubscribe_key()


# --- the agent ---------------------------------------------------------------------------------------------------


def hot_path_client(redis_url: str | None, state_dir: Path) -> redis.Redis:
    """The agent's Redis client: the hot-path role (a short timeout, one retry without backoff), so a sick Redis
    costs a send a fallback lease or a `skipped-unavailable`, never seconds."""
    return redis_conn.connect(redis_url, role=redis_conn.HOT_PATH, state_dir=state_dir)


@dataclass
class SenderMachinery:
    """What every agent of one process shares: the hot-path Redis client, the warm-up guard, the pool and the
    clock they all read (None: Redis TIME)."""

    client: redis.Redis
    guard: Guard
    pool: Pool
    clock: Callable[[], float] | None = None

    def agent(self, settings: AgentSettings, *, unsubscribe_key: bytes,
              checkpoint: Callable[[str], None] | None = None, env: Mapping[str, str] | None = None,
              side_tasks: Executor | None = None, pick: Picker | None = None,
              source_address: Callable[[Lease], str | None] | None = None,
              mailbox_settings: Callable[[], Sequence[Mailbox]] | None = None,
              daily: Callable[[], object] | None = None, tokens: TokenKeeper | None = None,
              opener: Opener | None = None) -> Agent:
        """The agent for `settings` (one host's mailboxes) over the shared parts; `pick` and `source_address`
        replace the guard's pick and the lease's source address, `mailbox_settings` re-reads the inventory's
        mailboxes, `daily` runs once a day; `tokens` and `opener` replace the mailboxes' secrets and their
        submission sessions (a forecast's: simulation.forecast) (see `Agent`)."""
        return Agent(settings, self.guard, self.pool, unsubscribe_key=unsubscribe_key,
                     checkpoint=checkpoint, env=env, side_tasks=side_tasks, clock=self.clock or time.time,
                     pick=pick, source_address=source_address, mailbox_settings=mailbox_settings, daily=daily,
                     tokens=tokens, opener=opener or open_refreshing)


def build_sender(client: redis.Redis, *, clock: Callable[[], float] | None = None, rng: random.Random | None = None,
                 new_seed: Callable[[], str] | None = None) -> SenderMachinery:
    """The guard and the pool over `client` (give it the hot-path role: `hot_path_client`), on `clock`; `rng`
    draws the pool's budgets, `new_seed` each new mailbox's jitter seed (the simulation's are seeded)."""
    return SenderMachinery(client, Guard(client, clock=clock, new_seed=new_seed), Pool(client, clock=clock, rng=rng),
                           clock)


@dataclass
class LedgerPlace:
    """Where the ledger is: a configured URL, or (None) the embedded PostgreSQL under `state_dir`, started when its
    URL is first asked for and migrated on first use."""

    configured: str | None
    state_dir: Path

    @property
    def embedded(self) -> bool:
        return self.configured is None

    @cached_property
    def url(self) -> str:
        from sender.embedded import embedded_url

        return self.configured or embedded_url(self.state_dir)

    def open(self, clock: Callable[[], float] | None = None) -> Ledger:
        """A connection, the schema migrated (embedded) or checked (configured)."""
        return open_ledger(self.url, embedded=self.embedded, clock=clock)


def build_agent(settings: AgentSettings, ledger: LedgerPlace, *, redis_url: str | None, state_dir: Path,
                unsubscribe_key_file: str | None = None, env: Mapping[str, str] | None = None,
                checkpoint: Callable[[str], None] | None = None,
                clock: Callable[[], float] | None = None,
                mailbox_settings: Callable[[], Sequence[Mailbox]] | None = None,
                postmaster: PostmasterSettings | None = None,
                postmaster_domains: Sequence[str] = ()) -> tuple[Agent, Callable[[], Ledger]]:
    """The agent of one host, and a factory of ledger connections for its workers, all on `clock`. A missing
    secret, a ledger not migrated or a bad key file is bad input now, not a failed send at 3 a.m.
    `mailbox_settings` re-reads the inventory's mailboxes each sweep cycle, for their warm-up settings; with
    `postmaster`, the agent reads `postmaster_domains` from Postmaster Tools once a day (sender.postmaster)."""
    for mailbox in settings.mailboxes:
        assert mailbox.smtp is not None  # AgentSettings holds only mailboxes that submit
        check_credential(mailbox.smtp.credential, env)
    with ledger.open(clock) as opened:
        key = unsubscribe_key(opened, unsubscribe_key_file)
    machinery = build_sender(hot_path_client(redis_url, state_dir), clock=clock)
    url = ledger.url
    daily = None
    if postmaster is not None:
        from sender.postmaster.daily import DailySync

        daily = DailySync(postmaster, postmaster_domains, lambda: connect_ledger(url, clock), machinery.guard,
                          env=env, clock=clock or time.time)
    return (machinery.agent(settings, unsubscribe_key=key, checkpoint=checkpoint, env=env,
                            mailbox_settings=mailbox_settings, daily=daily),
            lambda: connect_ledger(url, clock))


# --- the status views: the ledger's rows with the guard's counts -----------------------------------------------


def campaign_pace(ledger: Ledger, spec: CampaignSpec, guard: Guard | None, group: Iterable[str] | None,
                  pinned: Iterable[str] = (), unreachable: str | None = None, state: str = "running",
                  count_rows: bool = True) -> CapWait:
    """What of `spec`'s campaign waits for a cap now (sender.ledger.cap_wait), the caps read from `guard`
    (sender.guard_view); `guard` None, or one that fails, leaves the cap part unknown (why: `unreachable`, or the
    guard's error)."""
    from sender.guard_view import campaign_reader
    from sender.ledger.cap_wait import cap_wait

    return cap_wait(ledger, spec, None if guard is None else campaign_reader(guard, spec, group, pinned), unreachable,
                    state, count_rows)


def enqueue_waits(ledger: Ledger, guard: Guard | None, groups: Mapping[str, Sequence[str]],
                  unreachable: str | None = None) -> Waits:
    """The rows of `sender enqueue` not sent yet, each in one reason (sender.ledger.waits): no window, no campaign
    cap; the mailboxes of `groups` read from `guard` (None, or one that fails: their part unknown)."""
    from sender.ledger.waits import gather, read_rows

    now = ledger.now() or datetime.now(UTC)
    rows = read_rows(ledger, "enqueue", now)
    if not rows:
        return gather(rows, enqueue_conditions(now, None, groups, ())[0])
    pinned = {facts.pinned for facts, _n in rows if facts.pinned}
    conditions, unreachable = enqueue_conditions(now, guard, groups, pinned, unreachable,
                                                 {facts.group for facts, _n in rows})
    return gather(rows, conditions, unreachable)


def enqueue_conditions(now: datetime, guard: Guard | None, groups: Mapping[str, Sequence[str]],
                       pinned: Iterable[str], unreachable: str | None = None,
                       used: Iterable[str] | None = None) -> tuple[Conditions, str | None]:
    """What holds the rows of `sender enqueue` now: the mailboxes of `groups` (those `used`, None: all) and
    `pinned`, read from `guard`; and why they could not be read (None: they were)."""
    from sender.guard_view import mailbox_days
    from sender.ledger.waits import Conditions
    from warmup.errors import WarmupUnavailable

    days = None
    if guard is not None:
        wanted = {box for group in (groups if used is None else used) for box in groups.get(group, ())}
        try:
            days = mailbox_days(guard, wanted | set(pinned), now)
        except WarmupUnavailable as exc:
            unreachable = str(exc)
    return (Conditions(now, "running", "UTC", mailboxes=days, groups=groups),
            None if days is not None else unreachable or "not read")


def stalled_followups(ledger: Ledger, guard: Guard, campaign: str | None = None) -> list[Stalled]:
    """The due follow-ups of `campaign` (None: all) behind a paused or disconnected mailbox (sender.ledger.stalled),
    the mailboxes' states read from `guard`. WarmupUnavailable when Redis cannot be read."""
    from sender.guard_view import mailbox_states
    from sender.ledger import stalled

    return stalled.stalled_followups(ledger, lambda mailboxes, now: mailbox_states(guard, mailboxes, now), campaign)


# --- the inbox reading and its health report ---------------------------------------------------------------------


def report_health(feedback: Feedback, guard: Callable[[], Guard], mailboxes: Sequence[str], now: datetime) -> None:
    """New bounces or complaints: judge those mailboxes and tell the warm-up guard (sender.feedback.health). The
    guard is built only then; a failure is logged, and the next new bounce tries again."""
    if not mailboxes:
        return
    from sender.feedback.health import apply_health
    from sendhost.errors import SendhostError

    try:
        apply_health(feedback, guard(), mailboxes, now)
    except (SendhostError, OSError, redis.RedisError) as exc:  # the reading is done; the next new bounce tries again
        logging.getLogger("sendhost.sender.health").error("health: the warm-up guard was not told: %s", exc)


@dataclass(frozen=True)
class InboxReading:
    """Every account's new mail into the ledger, then the health of the mailboxes it bounced or complained about
    told to the guard (`guard` builds it; the admin role: pausing is not the hot path)."""

    database_url: str
    accounts: tuple[Mailbox, ...]
    guard: Callable[[], Guard]
    env: Mapping[str, str] | None = None

    def one_pass(self) -> list[MailboxReport]:
        from sender.feedback.inbox import read_all
        from sender.ledger.events import Feedback

        with Feedback.from_url(self.database_url) as feedback:
            reports = read_all(feedback, list(self.accounts), env=self.env)
            report_health(feedback, self.guard,
                          [r.mailbox for r in reports if r.outcomes["bounced"] or r.outcomes["complained"]],
                          datetime.now(UTC))
        return reports

    def start(self, stop: threading.Event, every_s: float = INBOX_EVERY_S) -> threading.Thread:
        """A daemon thread making a pass every `every_s` until `stop`. A failure is logged and tried again at the
        next pass."""
        from sender.errors import SenderError

        inbox_log = logging.getLogger("sendhost.sender.inbox")

        def loop() -> None:
            while not stop.is_set():
                try:
                    self.one_pass()
                except SenderError as exc:  # the ledger down: the next pass reads the same messages again
                    inbox_log.warning("inbox: pass failed: %s", exc)
                except Exception:  # a bug must not end the agent's inbox reading for good: log it, try next pass
                    inbox_log.exception("inbox: pass failed")
                stop.wait(every_s)

        thread = threading.Thread(target=loop, name="sender-inbox", daemon=True)
        thread.start()
        return thread


# --- the web service ---------------------------------------------------------------------------------------------


def web_keys(current: bytes, previous: bytes | None = None, events: bytes | None = None,
             legacy_signatures: bool = False, signature_tolerance_s: int | None = None) -> WebKeys:
    """The web service's keys: the unsubscribe key the agent signs with (`unsubscribe_key`), the one it replaced
    while rotating, and the HMAC key of POST /events (none: /events answers 404), with how far its signature's time
    may be from our clock (None: 5 minutes) and whether its first form (`sha256=`, no time) is still accepted."""
    from sender.feedback import signature
    from sender.feedback.web import WebKeys

    return WebKeys((current, *([previous] if previous else [])), events, legacy_signatures,
                   signature.TOLERANCE_S if signature_tolerance_s is None else signature_tolerance_s)
