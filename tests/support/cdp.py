"""Headless Chromium driven over the DevTools protocol: open a page, click, read the DOM, as a person would."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

from tests.support.chromium import QUIET_FLAGS
from tests.support.net import free_port


class Page:
    """One tab: `navigate`, `evaluate` JavaScript, wait for a condition."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._next = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        self._socket.send(json.dumps({"id": self._next, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv(timeout=30))
            if message.get("id") == self._next:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete' && location.href === " + json.dumps(url))

    def wait_for(self, expression: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate(expression) is True:
                return
            time.sleep(0.1)
        raise TimeoutError(f"the page never satisfied {expression}")


@contextmanager
def chromium_page(binary: str, profile_dir: Path) -> Iterator[Page]:
    port = free_port()
    process = subprocess.Popen([binary, *QUIET_FLAGS, f"--user-data-dir={profile_dir}",
                                f"--remote-debugging-port={port}", "--remote-allow-origins=*", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        targets: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as response:
                    targets = [t for t in json.load(response) if t.get("type") == "page"]
                if targets:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        if not targets:
            raise RuntimeError("chromium's DevTools endpoint never listed a page")
        with connect(targets[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=20) as socket:
            page = Page(socket)
            page.call("Page.enable")
            yield page
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
