"""`sendhost simulate` stopped by a signal, as a user stops it: no report, no Redis server left behind, no
temporary directory left behind, and an exit status that says what happened. Real processes, real signals."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

# Real `sendhost simulate` processes, interrupted, terminated and killed.
pytestmark = [pytest.mark.service, pytest.mark.slow]


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):  # a thread that ended while we looked
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start(tmp_path: Path) -> tuple[subprocess.Popen[str], int, Path]:
    """A simulation long enough to interrupt, and its Redis server once it runs: (process, redis pid, its dir)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SENDHOST_", "AWS_")) and k != "REDIS_URL"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONFAULTHANDLER"] = "1"  # a hang is reported with every thread's stack (see _finish)
    process = subprocess.Popen([sys.executable, "-m", "toolkit", "simulate", "--days", "30", "--report",
                                str(tmp_path / "report.html")], cwd=tmp_path, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for child in _children(process.pid):
            args = _cmdline(child)
            # redis-server rewrites its title to "redis-server unixsocket:<dir>/redis.sock" once it runs.
            if "--dir" in args:
                return process, child, Path(args[args.index("--dir") + 1])
            title = re.search(r"redis-server unixsocket:(\S+)/redis\.sock", " ".join(args))
            if title:
                return process, child, Path(title[1])
        if process.poll() is not None:
            raise AssertionError(f"simulate ended before its Redis started: {process.communicate()}")
        time.sleep(0.01)
    process.kill()
    raise AssertionError("simulate started no redis-server child within 60 s")


def _finish(process: subprocess.Popen[str], timeout_s: float = 60) -> tuple[str, str]:
    """Its output once it ends; if it hangs instead, fail with every thread's stack (SIGABRT -> faulthandler)."""
    try:
        return process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        _, stderr = process.communicate(timeout=30)
        raise AssertionError(f"simulate hung {timeout_s:.0f} s after the signal; its stacks:\n"
                             f"{stderr[-6000:]}") from None


def _gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("after_s", [0.0, 0.5, 2.0])
def test_ctrl_c_exits_130_and_leaves_nothing_behind(tmp_path: Path, after_s: float) -> None:
    process, redis_pid, directory = _start(tmp_path)
    try:
        time.sleep(after_s)
        process.send_signal(signal.SIGINT)
        stdout, stderr = _finish(process)
        assert process.returncode == 130, stderr
        assert stderr.strip() == "interrupted" and stdout == ""
        assert not (tmp_path / "report.html").exists()
        assert list(tmp_path.glob(".report.html.*")) == []
        assert _gone(redis_pid), "the simulation's redis-server outlived it"
        assert not directory.exists(), f"{directory} was left behind"
    finally:
        if process.poll() is None:
            process.kill()


def test_sigterm_cleans_up_too(tmp_path: Path) -> None:
    process, redis_pid, directory = _start(tmp_path)
    try:
        time.sleep(0.5)
        process.terminate()
        _finish(process)
        assert process.returncode == 128 + signal.SIGTERM
        assert not (tmp_path / "report.html").exists()
        assert _gone(redis_pid) and not directory.exists()
    finally:
        if process.poll() is None:
            process.kill()


def test_a_killed_simulation_takes_its_redis_with_it(tmp_path: Path) -> None:
    """SIGKILL leaves no chance to clean up: the kernel still ends the server (its parent-death signal)."""
    import shutil

    process, redis_pid, directory = _start(tmp_path)
    try:
        process.kill()
        process.communicate(timeout=60)
        assert _gone(redis_pid), "a redis-server survived its killed simulation under PID 1"
    finally:
        shutil.rmtree(directory, ignore_errors=True)  # the one thing SIGKILL cannot let us remove
