"""The simulation's mail: the sender agent's real send path into a real SMTP server on loopback addresses.

Each simulated send is one `sender.Agent.send_one`: claim a row from the ledger (the embedded PostgreSQL) →
`Guard.pick` → `Pool.lease` → the last suppression check → SMTP submission bound to the lease's source address →
the send record. The submission server is aiosmtpd on 127.0.0.1 (AUTH required, plain over loopback, which the
sender allows only for a loopback host); it records the peer address of every message it accepts.

The agents are built by the sender's composition root (sender.assembly) on the simulated clock, which the guard,
the pool and the ledger read instead of Redis TIME and PostgreSQL's now(). The simulation subclasses nothing; it
gives the real code three small hooks, each named for what it does:
- `StartedMailboxes.pick` lets a group pick only among the mailboxes whose start date has come (the simulation
  puts each under the guard as it starts), and keeps the last reservation for the send log and what it was asked
  to pick among (one pinned mailbox, or the group);
- `LoopbackSources` gives each leased address (a slot's Elastic IP of one generation, or a host's primary) its own
  127.x address to bind, so what the server saw *is* the per-address record;
- `PutBackDelays` (the ledger's `put_back_delay`) notes the delay the agent asked when it put a row back for later
  (the ledger writes it as asked), for the simulation's scheduler (which reads `last_s`).
"""

from __future__ import annotations

import contextlib
import email
import ipaddress
import logging
import re
import secrets
import socket
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ippool import Lease
from sender.assembly import SenderMachinery
from sender.errors import LedgerUnavailable
from sender.ledger.store import Ledger
from sender.settings import AgentSettings
from sendhost.model import Credential, Mailbox, Submission
from simulation.errors import SimulationFailed
from simulation.model import SimInventory
from warmup import Answer, CampaignSlot, Decision, Guard, Reservation

LOOPBACK_HOST = "127.0.0.1"
# Source addresses are numbered from here: clear of 127.0.0.1, where the server listens.
FIRST_SOURCE = ipaddress.IPv4Address("127.1.0.1")
UNSUBSCRIBE_BASE_URL = "https://unsubscribe.invalid"  # never fetched: the simulation has no feedback endpoint
SMTP_TIMEOUT_S = 10.0
NOT_STARTED_RETRY_S = 3600.0
_LINK = re.compile(r"<([^<>]+)>")  # the links of a List-Unsubscribe header
_CLICK = re.compile(r"https://[^\s/]+/c/[A-Za-z0-9_-]+")  # a tracked link (sender.sending.links)


# --- the clock and the addresses ---------------------------------------------------------------------------------


@dataclass
class StartedMailboxes:
    """The agent's `pick`: the guard's, among the group's mailboxes whose start date has come."""

    guard: Guard
    started: set[str] = field(default_factory=set)
    last_reservation: Reservation | None = None
    # What the agent last asked to pick among: a lead's later step asks for its one pinned mailbox, a first step
    # for the whole group. A refusal of the former says nothing about the group's other mailboxes.
    last_asked: tuple[str, ...] = ()

    def start(self, address: str) -> None:
        self.started.add(address.lower())

    def pick(self, addresses: Sequence[str], /, *, campaign: CampaignSlot | None = None,
             window_left_s: float | None = None) -> Decision:
        self.last_asked = tuple(a.lower() for a in addresses)
        started = tuple(a for a in addresses if a.lower() in self.started)
        if not started:
            return Decision(Answer.SKIPPED_PAUSED, None, retry_after_s=NOT_STARTED_RETRY_S,
                            reason="no mailbox of the group has reached its start date")
        decision = self.guard.pick(started, campaign=campaign, window_left_s=window_left_s)
        self.last_reservation = decision.reservation
        return decision


@dataclass(frozen=True)
class SourceAddress:
    """What one loopback source address stands for: a slot's address of one generation, or a host's primary."""

    loopback: str
    host: str
    public_ip: str | None  # None: the host's primary (a fallback send)
    slot: int | None
    generation: int | None


class LoopbackSources:
    """The agent's `source_address`: the loopback address standing for what each lease leased."""

    def __init__(self) -> None:
        self.sources: dict[str, SourceAddress] = {}
        self._by_key: dict[tuple[str, str | None, int | None, int | None], str] = {}
        self.last_lease: Lease | None = None
        self.leases = 0  # how many leases it was asked about: every lease the agents took

    def __call__(self, lease: Lease) -> str:
        self.leases += 1
        key = (lease.host, lease.public_ip, lease.slot, lease.generation)
        loopback = self._by_key.get(key)
        if loopback is None:
            loopback = str(FIRST_SOURCE + len(self._by_key))
            self._by_key[key] = loopback
            self.sources[loopback] = SourceAddress(loopback, lease.host, lease.public_ip, lease.slot,
                                                   lease.generation)
        self.last_lease = lease
        return loopback


@dataclass
class PutBackDelays:
    """The ledger's `put_back_delay` here: the delay the agent asked for a row it gave back is written as asked
    (the row waits in the ledger, so the next claim takes the next row, as the agent's own loop does) and kept in
    `last_s` for the simulation's scheduler, which waits that long when the whole group is blocked."""

    last_s: float | None = None

    def __call__(self, asked_s: float) -> float:
        self.last_s = asked_s
        return asked_s


class InlineExecutor(Executor):
    """Runs each task at once in the calling thread: the agent's side work happens at the simulated instant."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # handed to the caller through the future, as a pool would
            future.set_exception(exc)
        # A Ctrl-C (KeyboardInterrupt) or a stop (SystemExit) goes on up: a pool's thread never gets them, and a
        # future nobody reads swallowed them, so the run went on after the signal.
        return future


# --- the submission server ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    """One message the submission server accepted: from which peer address, as whom, to whom, and the headers a
    recipient acts on (the thread it belongs to, the one-click unsubscribe link)."""

    peer: str
    login: str
    mail_from: str
    rcpt: str
    message_id: str
    subject: str = ""
    in_reply_to: str | None = None
    references: tuple[str, ...] = ()
    unsubscribe_url: str | None = None  # the https link of List-Unsubscribe
    click_urls: tuple[str, ...] = ()  # the tracked links of its text (docs/tracking.md)


@dataclass
class SubmissionRecorder:
    """aiosmtpd's handler and authenticator: checks each mailbox's password, records every accepted message."""

    users: dict[str, str]
    deliveries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> Any:
        from aiosmtpd.smtp import AuthResult, LoginPassword

        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        login, password = auth_data.login.decode(), auth_data.password.decode()
        return AuthResult(success=self.users.get(login) == password, handled=False, auth_data=login)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content)
        login = session.auth_data if isinstance(session.auth_data, str) else ""
        in_reply_to = message["In-Reply-To"]
        links = _LINK.findall(str(message.get("List-Unsubscribe", "")))
        text = message.get_payload(decode=True) if not message.is_multipart() else b""
        clicks = tuple(_CLICK.findall(text.decode("utf-8", "replace") if isinstance(text, bytes) else ""))
        with self.lock:
            for rcpt in envelope.rcpt_tos:
                self.deliveries.append(Delivery(
                    session.peer[0], login, str(envelope.mail_from), rcpt.lower(), str(message["Message-ID"]),
                    str(message.get("Subject", "")), str(in_reply_to) if in_reply_to else None,
                    tuple(str(message.get("References", "")).split()),
                    next((link for link in links if link.startswith("https:")), None), clicks))
        return "250 2.0.0 OK queued"


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@contextmanager
def submission_server(users: dict[str, str]) -> Iterator[tuple[int, SubmissionRecorder]]:
    """aiosmtpd on 127.0.0.1, AUTH required (plain: loopback only), until the block ends."""
    from aiosmtpd.controller import Controller

    class _Controller(Controller):
        def factory(self) -> Any:
            # aiosmtpd warns, at every connection, about AUTH without TLS: here it never leaves loopback.
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Requiring AUTH while not requiring TLS")
                return super().factory()

    recorder = SubmissionRecorder(users)
    port = _free_port(LOOPBACK_HOST)
    controller = _Controller(recorder, hostname=LOOPBACK_HOST, port=port, auth_required=True,
                             auth_require_tls=False, authenticator=recorder.authenticate, ready_timeout=10)
    # aiosmtpd logs a deprecation of its own (Session.login_data) at every successful AUTH, as a warning.
    server_log = logging.getLogger("mail.log")
    level = server_log.level
    server_log.setLevel(logging.ERROR)
    controller.start()
    try:
        yield port, recorder
    finally:
        controller.stop()
        server_log.setLevel(level)


# --- the ledger --------------------------------------------------------------------------------------------------


@contextmanager
def embedded_ledger(state_dir: Path) -> Iterator[str]:
    """A private embedded PostgreSQL under `state_dir`, migrated, stopped when the block ends; yields its URL."""
    from sender.embedded import private_server
    from sender.ledger import connection as db

    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(private_server(state_dir))
            with contextlib.closing(db.connect(url)) as conn:
                # The simulation's ledger is thrown away at the end: no write needs to wait for the disk.
                conn.execute("ALTER SYSTEM SET fsync = off")
                conn.execute("ALTER SYSTEM SET synchronous_commit = off")
                conn.execute("SELECT pg_reload_conf()")
            with Ledger.from_url(url) as ledger:
                ledger.migrate()
        except LedgerUnavailable as exc:
            raise SimulationFailed(f"the simulation's embedded PostgreSQL failed: {exc}") from None
        yield url


# --- the world ---------------------------------------------------------------------------------------------------


@dataclass
class MailWorld:
    """What the simulated senders send through: the ledger, one agent per (host, group), the server's record."""

    ledger: Ledger  # on the simulated clock
    put_back: PutBackDelays
    agents: dict[tuple[str, str], Any]  # (host, group) -> sender.sending.agent.Agent
    recorder: SubmissionRecorder
    guard: Guard
    started: StartedMailboxes
    sources: LoopbackSources
    groups: tuple[str, ...]
    unsubscribe_key: bytes  # the ledger's key of the one-click links' tokens


def mailbox_settings(inventory: SimInventory, port: int,
                     passwords: dict[str, str]) -> tuple[dict[str, str], tuple[Mailbox, ...]]:
    """Each mailbox submitting to the loopback server as itself, its password given to the agent through an
    environment of its own (never a file): (that environment, the mailboxes)."""
    env: dict[str, str] = {}
    mailboxes = []
    for index, mailbox in enumerate(inventory.mailboxes):
        variable = f"SENDHOST_SIM_PASSWORD_{index}"
        env[variable] = passwords[mailbox.address]
        credential = Credential(mailbox.address, password_env=variable)
        mailboxes.append(replace(
            mailbox, smtp=Submission(LOOPBACK_HOST, port, "none", mailbox.address, credential), imap=None))
    return env, tuple(mailboxes)


@contextmanager
def mail_world(state_dir: Path, inventory: SimInventory, sending: SenderMachinery) -> Iterator[MailWorld]:
    """The ledger on an embedded PostgreSQL, the submission server, and an agent per (host, group), built by the
    sender's composition root over the simulation's guard and pool (`sending`)."""
    from sender.ledger import connection as db

    passwords = {mailbox.address: secrets.token_urlsafe(12) for mailbox in inventory.mailboxes}
    put_back = PutBackDelays()
    with (embedded_ledger(state_dir) as url,
          contextlib.closing(Ledger(db.connect(url), url, clock=sending.clock, put_back_delay=put_back)) as ledger,
          submission_server(passwords) as (port, recorder)):
        key = ledger.unsubscribe_key()
        env, mailboxes = mailbox_settings(inventory, port, passwords)
        side_tasks = InlineExecutor()
        started, sources = StartedMailboxes(sending.guard), LoopbackSources()
        groups = tuple(sorted({m.group for m in mailboxes}))
        agents: dict[tuple[str, str], Any] = {}
        for host in inventory.hosts:
            for group in groups:
                # No primary_ip: the pool reports the host's primary, and LoopbackSources maps it like any address.
                settings = AgentSettings(host=host.name, primary_ip=None,
                                         mailboxes=tuple(m for m in mailboxes if m.group == group),
                                         unsubscribe_base_url=UNSUBSCRIBE_BASE_URL, smtp_timeout_s=SMTP_TIMEOUT_S)
                agents[(host.name, group)] = sending.agent(settings, unsubscribe_key=key, env=env,
                                                           side_tasks=side_tasks, pick=started.pick,
                                                           source_address=sources)
        try:
            yield MailWorld(ledger, put_back, agents, recorder, sending.guard, started, sources, groups, key)
        except LedgerUnavailable as exc:
            raise SimulationFailed(f"the simulation's embedded PostgreSQL failed: {exc}") from None


# --- what the server saw -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceLine:
    """Deliveries the server saw from one source address, and the budget drawn for the address it stands for."""

    loopback: str
    host: str
    public_ip: str | None
    slot: int | None
    generation: int | None
    deliveries: int
    budget: int | None  # None for a host's primary address


@dataclass(frozen=True)
class Deliveries:
    """The submission server's record, per mailbox (the AUTH login) and per source address (the peer)."""

    total: int
    per_mailbox: dict[str, int]
    per_source: list[SourceLine]

    def to_json(self) -> dict[str, Any]:
        return {"total": self.total, "per_mailbox": dict(self.per_mailbox),
                "per_source": [line.__dict__ for line in self.per_source]}


def count_deliveries(delivered: Sequence[Delivery], sources: dict[str, SourceAddress],
                     budgets: dict[tuple[str, int, int], int]) -> Deliveries:
    per_mailbox = Counter(d.login.lower() for d in delivered)
    per_peer = Counter(d.peer for d in delivered)
    lines = []
    for peer, count in sorted(per_peer.items(), key=lambda item: ipaddress.IPv4Address(item[0])):
        source = sources.get(peer)
        if source is None:  # nothing the pool leased: the summary shows it rather than hiding it
            lines.append(SourceLine(peer, "?", None, None, None, count, None))
            continue
        budget = (budgets.get((source.host, source.slot, source.generation))
                  if source.slot is not None and source.generation is not None else None)
        lines.append(SourceLine(peer, source.host, source.public_ip, source.slot, source.generation, count, budget))
    return Deliveries(len(delivered), dict(sorted(per_mailbox.items())), lines)
