"""`sendhost sender web` as a real process under uvicorn on loopback, for the web tests."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from sender.ledger.events import Feedback
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
def web_server(tmp: Path, database_url: str) -> Iterator[WebServer]:
    port, metrics_port = free_port(), free_port()
    previous, events = secrets.token_bytes(32), secrets.token_bytes(32)
    log_path = tmp / "web.log"
    env = {**os.environ, "SENDHOST_STATE_DIR": str(tmp / "state"), "SENDHOST_LOG_LEVEL": "INFO"}
    env.pop("SENDHOST_INVENTORY", None)
    command = [sys.executable, "-c", "from toolkit.cli import main; main()", "sender", "--database-url",
               database_url, "web", "--listen", f"127.0.0.1:{port}",
               "--metrics-listen", f"127.0.0.1:{metrics_port}",
               "--previous-key-file", str(key_file(tmp / "previous.key", previous)),
               "--events-key-file", str(key_file(tmp / "events.key", events))]
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
    assert feedback.ledger.enqueue(lead=lead, step=step, to=to, group="sales", subject="Hi", text="Hello") == "queued"
    (row,) = [r for r in feedback.ledger.claim("w1", 100) if r.lead == lead]
    outcome, message_id = feedback.ledger.begin_attempt(row.id, uuid.uuid4(), mailbox, None,
                                                 f"<{uuid.uuid4()}@sender.example>")
    assert outcome == "ok" and message_id is not None
    assert feedback.ledger.record_sent(row.id, "250 ok")
    return row.id, message_id
