"""The embedded Redis: a real server under the state directory, shared by every process that points there."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pytest

from sendhost.embedded import _answers, ensure_embedded_redis, stop_embedded
from sendhost.errors import ConfigError
from sendhost.redis_conn import connect
from tests.conftest import REPO_ROOT, run_cli

WRITE_AND_READ = """
import sys
from pathlib import Path
from sendhost.redis_conn import connect
client = connect(None, state_dir=Path(sys.argv[1]))
print(client.incr("shared-counter"))
"""


def _stop(state_dir: Path) -> None:
    """Stop the test's embedded server if one runs (called in `finally`, so none outlives its test)."""
    stop_embedded(state_dir)


@pytest.mark.service
def test_two_processes_share_one_embedded_server(tmp_path: Path) -> None:
    state_dir = tmp_path / ".sendhost"
    env = {"PYTHONPATH": str(REPO_ROOT)}
    try:
        outputs = [
            subprocess.run([sys.executable, "-c", WRITE_AND_READ, str(state_dir)], capture_output=True, text=True,
                           env=env, check=True, timeout=60).stdout.strip()
            for _ in range(2)
        ]
        # The second process saw the first one's write: one server, not one per process.
        assert outputs == ["1", "2"]
        assert connect(None, state_dir=state_dir).get("shared-counter") == "2"
    finally:
        _stop(state_dir)


@pytest.mark.service
def test_concurrent_starts_make_one_server(tmp_path: Path) -> None:
    state_dir = tmp_path / ".sendhost"
    env = {"PYTHONPATH": str(REPO_ROOT)}
    try:
        procs = [subprocess.Popen([sys.executable, "-c", WRITE_AND_READ, str(state_dir)], stdout=subprocess.PIPE,
                                  text=True, env=env) for _ in range(4)]
        results = sorted(int(p.communicate(timeout=60)[0]) for p in procs)
        assert results == [1, 2, 3, 4]
        assert len(list(state_dir.glob("redis.pid"))) == 1
    finally:
        _stop(state_dir)


@pytest.mark.service
def test_embedded_url_is_a_unix_socket_under_the_state_dir(tmp_path: Path) -> None:
    state_dir = tmp_path / ".sendhost"
    try:
        url = ensure_embedded_redis(state_dir)
        assert url == f"unix://{state_dir.resolve() / 'redis.sock'}"
    finally:
        _stop(state_dir)


# --- persistence, `sendhost embedded status|stop`, and a shared machine ------------------------------------------

def _cli_in(state_dir: Path, *args: str):  # type: ignore[no-untyped-def]
    return run_cli(*args, env={"SENDHOST_STATE_DIR": str(state_dir)}, cwd=state_dir.parent)


def _pid(state_dir: Path) -> int:
    return int((state_dir / "redis.pid").read_text().strip())


def _dead(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


@pytest.mark.slow
@pytest.mark.service
def test_a_pause_survives_the_embedded_server_being_killed(tmp_path: Path) -> None:
    state_dir = tmp_path / ".sendhost"
    try:
        assert _cli_in(state_dir, "warmup", "add", "a@x.com", "--start", date.today().isoformat()).returncode == 0
        paused = _cli_in(state_dir, "warmup", "pause", "a@x.com", "--reason", "spam complaint")
        assert paused.returncode == 0, paused.stderr
        time.sleep(1.5)  # appendfsync everysec: what was acknowledged a second ago is on disk
        pid = _pid(state_dir)
        os.kill(pid, signal.SIGKILL)
        assert _dead(pid)
        status = _cli_in(state_dir, "warmup", "status", "--format", "json")
        assert status.returncode == 0, status.stderr
        [row] = json.loads(status.stdout)
        assert (row["mailbox"], row["state"], row["reason"]) == ("a@x.com", "paused", "spam complaint")
        assert _pid(state_dir) != pid  # a new server, which read the append-only file
    finally:
        _stop(state_dir)


@pytest.mark.slow
@pytest.mark.service
def test_embedded_status_and_stop(tmp_path: Path) -> None:
    state_dir = tmp_path / ".sendhost"
    before = _cli_in(state_dir, "embedded", "status", "--format", "json")
    assert before.returncode == 0, before.stderr
    assert json.loads(before.stdout)["running"] is False
    assert not (state_dir / "redis.pid").exists()  # status starts nothing
    assert _cli_in(state_dir, "warmup", "add", "a@x.com", "--start", date.today().isoformat()).returncode == 0
    shown = json.loads(_cli_in(state_dir, "embedded", "status", "--format", "json").stdout)
    assert shown["running"] is True and shown["appendonly"] == "yes" and shown["redis_version"].startswith("6.")
    assert shown["pid"] == _pid(state_dir) and shown["keys"] > 0 and shown["aof_bytes"] > 0
    stopped = _cli_in(state_dir, "embedded", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert f"pid {shown['pid']}" in stopped.stdout
    assert _dead(shown["pid"], timeout_s=0.5)  # stop returns once the server is gone
    assert json.loads(_cli_in(state_dir, "embedded", "status", "--format", "json").stdout)["running"] is False
    again = _cli_in(state_dir, "embedded", "stop")
    assert again.returncode == 0 and "no embedded Redis running" in again.stdout
    # The state outlived the server.
    status = _cli_in(state_dir, "warmup", "status", "--format", "json")
    try:
        assert [row["mailbox"] for row in json.loads(status.stdout)] == ["a@x.com"]
    finally:
        _stop(state_dir)


@pytest.mark.slow
@pytest.mark.service
def test_a_server_that_came_back_empty_says_so(tmp_path: Path) -> None:
    state_dir = tmp_path / ".sendhost"
    try:
        assert _cli_in(state_dir, "warmup", "add", "a@x.com", "--start", date.today().isoformat()).returncode == 0
        assert _cli_in(state_dir, "embedded", "stop").returncode == 0
        (state_dir / "sendhost.aof").unlink()  # the state is lost
        (state_dir / "sendhost.rdb").unlink(missing_ok=True)
        status = _cli_in(state_dir, "warmup", "status")
        assert status.returncode == 1, status.stdout + status.stderr
        assert "started empty, but it held state before" in status.stderr
    finally:
        _stop(state_dir)


@pytest.mark.service
def test_state_files_are_private_and_the_directory_is_closed(tmp_path: Path) -> None:
    state_dir = tmp_path / ".sendhost"
    state_dir.mkdir(mode=0o755)
    os.chmod(state_dir, 0o755)
    try:
        ensure_embedded_redis(state_dir)
        assert stat.S_IMODE(os.stat(state_dir).st_mode) == 0o700
        for name in ("redis.lock", "redis.log", "redis.pid", "sendhost.aof", "instance"):
            assert stat.S_IMODE(os.stat(state_dir / name).st_mode) == 0o600, name
    finally:
        _stop(state_dir)


def test_a_planted_symlink_is_not_followed(tmp_path: Path) -> None:
    state_dir = tmp_path / ".sendhost"
    state_dir.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    (state_dir / "redis.log").symlink_to(victim)
    result = _cli_in(state_dir, "warmup", "status")
    assert result.returncode == 2, result.stderr
    assert "refusing" in result.stderr and "redis.log" in result.stderr and "symbolic link" in result.stderr
    assert victim.read_text() == "keep me\n"
    pid_file = state_dir / "redis.pid"
    assert not pid_file.exists() or pid_file.read_text() == ""  # no server started


def test_something_else_at_the_socket_path_is_refused(tmp_path: Path) -> None:
    state_dir = tmp_path / ".sendhost"
    state_dir.mkdir(mode=0o700)
    (state_dir / "redis.sock").write_text("")
    result = _cli_in(state_dir, "warmup", "status")
    assert result.returncode == 2 and "refusing" in result.stderr and "not a socket" in result.stderr, result.stderr


@pytest.mark.service
def test_a_socket_or_directory_of_another_user_is_not_trusted(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    state_dir = tmp_path / ".sendhost"
    try:
        ensure_embedded_redis(state_dir)  # a live server answering PING on the socket
        # Seen by another user, everything there belongs to someone else: nothing of it is trusted.
        monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 4242)
        with pytest.raises(ConfigError, match=r"belongs to uid \d+, not to you"):
            ensure_embedded_redis(state_dir)
        with pytest.raises(ConfigError, match="not a socket of yours"):
            _answers(state_dir / "redis.sock")
    finally:
        monkeypatch.undo()
        _stop(state_dir)


@pytest.mark.service
def test_a_deep_state_dir_gets_its_socket_in_a_private_directory(tmp_path: Path) -> None:
    state_dir = tmp_path / ("d" * 60) / ("e" * 60) / ".sendhost"
    try:
        url = ensure_embedded_redis(state_dir)
        sock = Path(url.removeprefix("unix://"))
        assert sock.parent != state_dir and sock.parent.name.startswith(f"sendhost-{os.geteuid()}-")
        assert stat.S_IMODE(os.stat(sock.parent).st_mode) == 0o700
        assert os.stat(sock.parent).st_uid == os.geteuid()
    finally:
        _stop(state_dir)


@pytest.mark.slow
@pytest.mark.service
def test_state_kept_only_in_a_snapshot_is_loaded_and_then_kept_append_only(tmp_path: Path) -> None:
    """What an older sendhost left (a snapshot, no append-only file) is not dropped by the first start."""
    state_dir = tmp_path / ".sendhost"
    try:
        client = connect(None, state_dir=state_dir)
        client.set("paused-by-hand", "a@x.com")
        client.config_set("appendonly", "no")
        client.save()
        client.close()
        stop_embedded(state_dir)
        (state_dir / "sendhost.aof").unlink(missing_ok=True)
        client = connect(None, state_dir=state_dir)
        assert client.get("paused-by-hand") == "a@x.com"
        assert client.config_get("appendonly")["appendonly"] == "yes"
        client.close()
    finally:
        _stop(state_dir)
