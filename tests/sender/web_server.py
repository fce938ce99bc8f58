"""`sendhost sender web` as a real process under uvicorn on loopback, for the web tests."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from sender.feedback import signature
from sender.ledger.events import Feedback
from sender.sending.tokens import make_token
from tests.conftest import REPO_ROOT
from tests.support.net import free_port, stop_process


@dataclass
class WebServer:
    base: str
    metrics_base: str
    process: subprocess.Popen[str]
    log_path: Path
    previous_key: bytes
    events_key: bytes

    def log(self) -> str:
        return self.log_path.read_text()


def key_file(path: Path, key: bytes) -> Path:
    path.write_text(key.hex() + "\n")
    path.chmod(0o600)
    return path


@contextmanager
def web_server(tmp: Path, database_url: str, extra: Sequence[str] = (),
               events_key: bytes | None = None) -> Iterator[WebServer]:
    port, metrics_port = free_port(), free_port()
    previous, events = secrets.token_bytes(32), events_key or secrets.token_bytes(32)
    tmp.mkdir(parents=True, exist_ok=True)
    log_path = tmp / "web.log"
    env = {**os.environ, "SENDHOST_STATE_DIR": str(tmp / "state"), "SENDHOST_LOG_LEVEL": "INFO"}
    env.pop("SENDHOST_INVENTORY", None)
    command = [sys.executable, "-c", "from toolkit.cli import main; main()", "sender", "--database-url",
               database_url, "web", "--listen", f"127.0.0.1:{port}",
               "--metrics-listen", f"127.0.0.1:{metrics_port}",
               "--previous-key-file", str(key_file(tmp / "previous.key", previous)),
               "--events-key-file", str(key_file(tmp / "events.key", events)), *extra]
    with log_path.open("w") as log:
        process = subprocess.Popen(command, cwd=tmp, env={**env, "PYTHONPATH": str(REPO_ROOT)}, stdout=log,
                                   stderr=subprocess.STDOUT, text=True)
    server = WebServer(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics_port}", process, log_path, previous,
                       events)
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"sender web exited {process.returncode}: {server.log()}")
            try:
                if (httpx.get(f"{server.base}/healthz", timeout=2).status_code == 200
                        # not /metrics/ itself: that would cache a snapshot of the empty ledger for the test
                        and httpx.get(f"{server.metrics_base}/", timeout=2).status_code == 404):
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"sender web never answered /healthz: {server.log()}")
            time.sleep(0.1)
        yield server
    finally:
        stop_process(process)


def sent_row(feedback: Feedback, lead: str, to: str, step: int = 1,
             mailbox: str = "box@sender.example") -> tuple[int, str]:
    """A row the agent sent from `mailbox`: (id, Message-ID)."""
    queued = feedback.ledger.enqueue(lead=lead, step=step, address=to, group="sales", subject="Hi", text="Hello")
    assert queued == "queued"
    (row,) = [r for r in feedback.ledger.claim("w1", 100) if r.lead == lead]
    outcome, message_id = feedback.ledger.begin_attempt(row.id, uuid.uuid4(), mailbox, None,
                                                 f"<{uuid.uuid4()}@sender.example>")
    assert outcome == "ok" and message_id is not None
    assert feedback.ledger.record_sent(row.id, "250 ok")
    return row.id, message_id


def idempotency_key(feedback: Feedback, row: int) -> uuid.UUID:
    with feedback.ledger.calling("read a row's key") as conn:
        found = conn.execute("SELECT idempotency_key FROM sender_emails WHERE id = %s", (row,)).fetchone()
    assert found is not None
    return uuid.UUID(str(found[0]))


def row_token(feedback: Feedback, row: int, key: bytes | None = None) -> str:
    """The unsubscribe token the agent puts in row's mail: its idempotency key, signed with `key` (the ledger's)."""
    return make_token(key if key is not None else feedback.ledger.unsubscribe_key(), idempotency_key(feedback, row))


def signed(key: bytes, body: bytes, t: int | None = None) -> dict[str, str]:
    """The headers a relay sends with `body`, signed at `t` (now)."""
    return {"X-Sendhost-Signature": signature.sign(key, body, int(time.time()) if t is None else t),
            "Content-Type": "application/json"}
