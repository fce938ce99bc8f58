"""Headless Chromium (Debian's `chromium` package) for tests that open a generated page like a person would."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.net import on_ci

# No network of any kind: the page must be self-contained, and a test must never phone home.
QUIET_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--mute-audio")
CONSOLE_LINE = re.compile(r":CONSOLE[(:]\d+\)?\]\s*(.*)")


def chromium_or_skip() -> str:
    """The chromium binary; off CI a missing one skips the test, naming the package."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if on_ci():
            pytest.fail("chromium is not installed on CI: .ci/run should install Debian's `chromium` package")
        pytest.skip("install Debian's `chromium` package to run the HTML report tests")
    return found


def run_chromium(binary: str, page: Path, profile_dir: Path, *flags: str,
                 timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """Open `page` headless with console logging on stderr; `flags` add --dump-dom, --screenshot=..., etc."""
    return subprocess.run(
        [binary, *QUIET_FLAGS, f"--user-data-dir={profile_dir}", "--enable-logging=stderr", "--v=0", *flags,
         page.resolve().as_uri()],
        capture_output=True, text=True, timeout=timeout, check=False)


def console_messages(stderr: str) -> list[str]:
    """What the page wrote to its console (errors, uncaught exceptions, failed loads), from Chromium's log."""
    return [match.group(1) for match in CONSOLE_LINE.finditer(stderr)]
