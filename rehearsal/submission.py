"""The sandbox's submission server: aiosmtpd on loopback, AUTH PLAIN/LOGIN required (in clear: loopback only, the
inventory says `security: none`), every accepted message recorded with the peer address it came from.

Run as `python -m rehearsal.submission PORT USERS_JSON RECORD_JSONL`; it serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import email
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class RecordingHandler:
    """Accepts mail from authenticated users and appends one JSON line per recipient to the record file."""

    def __init__(self, users: dict[str, str], record: Path) -> None:
        self.users = users
        self.record = record
        self.lock = threading.Lock()

    def authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        ok = self.users.get(auth_data.login.decode()) == auth_data.password.decode()
        return AuthResult(success=ok, handled=False, auth_data=auth_data)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content)
        login = session.auth_data.login.decode() if isinstance(session.auth_data, LoginPassword) else ""
        lines = [json.dumps({"peer": session.peer[0], "login": login, "mail_from": envelope.mail_from, "rcpt": rcpt,
                             "message_id": message.get("Message-ID", "")}) + "\n" for rcpt in envelope.rcpt_tos]
        with self.lock, self.record.open("a") as out:
            out.writelines(lines)
        return "250 OK recorded"


def serve(port: int, users_file: Path, record: Path) -> None:
    handler = RecordingHandler(json.loads(users_file.read_text()), record)
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
    serve(int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
