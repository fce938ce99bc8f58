"""A real submission server for sender tests: aiosmtpd with STARTTLS (a trustme CA) and AUTH required, on loopback.

It records every accepted message with the peer address it came from (which proves the source binding), and can
be scripted per recipient with a provider's reply at a stage (RCPT or end of DATA), a slow reply after the end of
DATA (a timeout), or a pause before every reply (slow server, for restart tests). It knows which sessions are open,
so a test whose clients were killed can wait until the server has seen each of them end before reading what
arrived (`Recorder.wait_until_idle`).
"""

from __future__ import annotations

import asyncio
import email
import socket
import ssl
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trustme
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


@dataclass(frozen=True)
class Received:
    peer: str
    mail_from: str
    rcpt: str
    message_id: str
    message: Any  # email.message.Message
    login: str = ""  # the user the session authenticated as (AUTH PLAIN or LOGIN)


@dataclass(frozen=True)
class Scripted:
    stage: str  # "rcpt" | "data" (the reply after the end of DATA) | "hang" (no reply after DATA for `hang_s`)
    reply: str = ""
    hang_s: float = 0.0


@dataclass
class Recorder:
    users: dict[str, str]
    received: list[Received] = field(default_factory=list)
    script: dict[str, Scripted] = field(default_factory=dict)
    delay_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    open_sessions: set[int] = field(default_factory=set)  # id() of each connection the server has not seen end
    # every password login tried, in order: (client's address and port: one per session, mechanism, login,
    # succeeded): how a test counts failed logins per session
    logins: list[tuple[tuple[str, int], str, str, bool]] = field(default_factory=list)
    # a reply at RCPT for every session from one of these client addresses (a server blaming the connecting IP),
    # and each (client address, recipient) it was given to
    refuse_peers: dict[str, str] = field(default_factory=dict)
    refused: list[tuple[str, str]] = field(default_factory=list)

    def authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        login, password = auth_data.login.decode(), auth_data.password.decode()
        success = self.users.get(login) == password
        with self.lock:
            self.logins.append((tuple(session.peer[:2]), mechanism, login, success))
        # auth_data becomes the session's, which is how each received message knows the user it came from
        return AuthResult(success=success, handled=False, auth_data=auth_data)

    async def auth_XOAUTH2(self, server: Any, args: list[str]) -> AuthResult:
        """Google's and Microsoft's OAuth mechanism: `user=...^Aauth=Bearer TOKEN^A^A`, base64, in one line."""
        import base64

        try:
            fields = base64.b64decode(args[1]).decode().split("\x01")
            login = fields[0].removeprefix("user=")
            token = fields[1].removeprefix("auth=Bearer ")
        except (IndexError, ValueError):
            return AuthResult(success=False, handled=False)
        return AuthResult(success=self.users.get(login) == f"token:{token}", handled=False)

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,
                          rcpt_options: list[str]) -> str:
        blamed = self.refuse_peers.get(session.peer[0])
        if blamed is not None:
            with self.lock:
                self.refused.append((session.peer[0], address.lower()))
            return blamed
        scripted = self.script.get(address.lower())
        if scripted is not None and scripted.stage == "rcpt":
            return scripted.reply
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        rcpt = envelope.rcpt_tos[0].lower()
        scripted = self.script.get(rcpt)
        if scripted is not None and scripted.stage == "data":
            return scripted.reply
        message = email.message_from_bytes(envelope.content)
        login = getattr(session.auth_data, "login", None)
        with self.lock:
            self.received.append(Received(session.peer[0], envelope.mail_from, rcpt,
                                          str(message["Message-ID"]), message,
                                          login.decode() if isinstance(login, bytes) else ""))
        if scripted is not None and scripted.stage == "hang":
            await asyncio.sleep(scripted.hang_s)  # the server has it, the client times out waiting
        return "250 2.0.0 OK queued"

    def snapshot(self) -> list[Received]:
        """What arrived so far, a copy taken under the lock (the server's thread appends)."""
        with self.lock:
            return list(self.received)

    def wait_until_idle(self, timeout_s: float = 15.0) -> None:
        """Wait until every connection made to the server has ended. Once a session's connection is lost aiosmtpd
        cancels its handler, so after this nothing more can arrive from the clients that were connected: what a
        killed client had handed over is in `received` or never will be."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self.lock:
                left = len(self.open_sessions)
            if not left:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the submission server still has {left} session(s) open after {timeout_s}s")
            time.sleep(0.02)

    def peers(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for item in self.received:
            counts[item.peer] = counts.get(item.peer, 0) + 1
        return counts


@dataclass
class SubmissionServer:
    host: str
    port: int
    ca_file: Path
    recorder: Recorder


class _TrackedSMTP(SMTP):
    """aiosmtpd's session, telling the recorder when its connection starts and ends. STARTTLS calls
    connection_made a second time for the same session, hence a set."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        recorder: Recorder = self.event_handler
        with recorder.lock:
            recorder.open_sessions.add(id(self))
        super().connection_made(transport)

    def connection_lost(self, error: Exception | None) -> None:
        try:
            super().connection_lost(error)
        finally:
            recorder: Recorder = self.event_handler
            with recorder.lock:
                recorder.open_sessions.discard(id(self))


class _Controller(Controller):
    def factory(self) -> Any:
        # aiosmtpd warns about AUTH without STARTTLS even on implicit TLS, where every byte is encrypted.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Requiring AUTH while not requiring TLS")
            return _TrackedSMTP(self.handler, **self.SMTP_kwargs)


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@contextmanager
def submission_server(tmp_path: Path, users: dict[str, str], host: str = "127.0.0.1",
                      implicit_tls: bool = False, recorder: Recorder | None = None,
                      exclude_mechanisms: tuple[str, ...] = ()) -> Iterator[SubmissionServer]:
    """STARTTLS on a free port (587's protocol), or TLS from the first byte with `implicit_tls` (465's). The server
    offers AUTH PLAIN and LOGIN (and XOAUTH2), less `exclude_mechanisms`. `recorder`: the handler (one that
    authenticates otherwise, say)."""
    ca = trustme.CA()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(host).configure_cert(context)
    ca_file = tmp_path / "submission-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    recorder = recorder or Recorder(users)
    port = _free_port(host)
    # aiosmtpd's auth_require_tls only knows STARTTLS; on implicit TLS every byte is encrypted already.
    tls: dict[str, Any] = ({"ssl_context": context, "auth_require_tls": False} if implicit_tls
                           else {"tls_context": context, "require_starttls": True, "auth_require_tls": True})
    controller = _Controller(recorder, hostname=host, port=port, auth_required=True,
                             authenticator=recorder.authenticate, ready_timeout=10,
                             auth_exclude_mechanism=list(exclude_mechanisms), **tls)
    controller.start()
    try:
        yield SubmissionServer(host, port, ca_file, recorder)
    finally:
        controller.stop()
