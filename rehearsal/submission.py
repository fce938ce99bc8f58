"""The sandbox's submission server: aiosmtpd on loopback, AUTH PLAIN/LOGIN required (in clear: loopback only, the
inventory says `security: none`), every accepted message recorded with the peer address it came from.

Where the sandbox has an IMAP server (rehearsal.mailstore), it also does what a provider does with a submitted
message: a copy in the sending mailbox's Sent folder, and mail to a sandbox mailbox in that mailbox's INBOX, so a
reply can be rehearsed. A message it could not store is refused (451) and not recorded: the world is broken, and
an accepted message missing from Sent would rehearse something no provider does.

Run as `python -m rehearsal.submission PORT SANDBOX_DIR`; it serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import email
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from rehearsal import mailstore
from rehearsal.errors import SandboxConfigError

RECORD_FILE = "messages.jsonl"
SENT_FOLDER = "Sent"

log = logging.getLogger("sendhost.sandbox.submission")


class RecordingHandler:
    """Accepts mail from authenticated users, stores it where the sandbox's IMAP has mailboxes, and appends one JSON
    line per recipient to the record file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.users = mailstore.read_users(root)
        self.record = root / RECORD_FILE
        self.lock = threading.Lock()

    def authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        ok = self.users.get(auth_data.login.decode().lower()) == auth_data.password.decode()
        return AuthResult(success=ok, handled=False, auth_data=auth_data)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content)
        login = session.auth_data.login.decode() if isinstance(session.auth_data, LoginPassword) else ""
        try:
            await asyncio.to_thread(self.store, login, envelope.rcpt_tos, envelope.content)
        except SandboxConfigError as exc:
            log.error("%s", exc)
            return "451 4.3.0 the sandbox could not store the message; see its smtp.log"
        lines = [json.dumps({"peer": session.peer[0], "login": login, "mail_from": envelope.mail_from, "rcpt": rcpt,
                             "message_id": message.get("Message-ID", "")}) + "\n" for rcpt in envelope.rcpt_tos]
        with self.lock, self.record.open("a") as out:
            out.writelines(lines)
        return "250 OK recorded"

    def store(self, login: str, rcpts: list[str], raw: bytes) -> None:
        """The Sent copy and each sandbox recipient's INBOX copy; nothing where the sandbox has no IMAP."""
        address = mailstore.read_address(self.root)
        if address is None:
            return
        if login.lower() in self.users:
            mailstore.append(address, self.users, login, SENT_FOLDER, raw)
        for rcpt in dict.fromkeys(r.lower() for r in rcpts):  # the envelope says who it is for, not the headers
            if rcpt in self.users:
                mailstore.append(address, self.users, rcpt, "INBOX", raw)


def serve(port: int, root: Path) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    handler = RecordingHandler(root)
    controller = Controller(handler, hostname="127.0.0.1", port=port, authenticator=handler.authenticate,
                            auth_required=True, auth_require_tls=False)
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    controller.start()
    try:
        stopped.wait()
    finally:
        controller.stop()


if __name__ == "__main__":
    serve(int(sys.argv[1]), Path(sys.argv[2]))
