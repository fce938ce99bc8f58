"""The embedded Redis: a real server under the state directory, shared by every process that points there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sendhost.embedded import ensure_embedded_redis
from sendhost.redis_conn import connect
from tests.conftest import REPO_ROOT

WRITE_AND_READ = """
import sys
from pathlib import Path
from sendhost.redis_conn import connect
client = connect(None, state_dir=Path(sys.argv[1]))
print(client.incr("shared-counter"))
"""


def _stop(state_dir: Path) -> None:
    client = connect(None, state_dir=state_dir)
    client.shutdown(nosave=True)


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


def test_embedded_url_is_a_unix_socket_under_the_state_dir(tmp_path: Path) -> None:
    state_dir = tmp_path / ".sendhost"
    try:
        url = ensure_embedded_redis(state_dir)
        assert url == f"unix://{state_dir.resolve() / 'redis.sock'}"
    finally:
        _stop(state_dir)
