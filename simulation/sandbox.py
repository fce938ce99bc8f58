"""The simulation's private world: an embedded Redis in a temporary directory and AWS as moto, in process.

Nothing escapes it. The Redis server is killed and its directory removed at the end, however the run ends
(Ctrl-C, SIGTERM, even SIGKILL of this process: see `embedded_redis`). While it runs, every
`AWS_*` variable of the user is hidden (a profile, an endpoint, real keys) and replaced by fake keys and empty
config files, and moto intercepts every AWS request inside the process; the user's environment is restored after.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from sendhost import signals
from sendhost.embedded import redis_server_executable
from simulation.errors import SimulationFailed

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
START_TIMEOUT_S = 10.0

FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "simulation",
    "AWS_SECRET_ACCESS_KEY": "simulation",
    "AWS_SESSION_TOKEN": "simulation",
}


@contextmanager
def fake_aws_env(state_dir: Path, region: str) -> Iterator[None]:
    """Hide the user's AWS settings and credentials for the block; restore them exactly afterwards."""
    saved = {key: value for key, value in os.environ.items() if key.startswith("AWS_")}
    empty = state_dir / "aws-empty"
    empty.write_text("")
    try:
        for key in saved:
            del os.environ[key]
        os.environ.update(FAKE_AWS_ENV)
        os.environ.update({"AWS_CONFIG_FILE": str(empty), "AWS_SHARED_CREDENTIALS_FILE": str(empty),
                           "AWS_DEFAULT_REGION": region, "AWS_EC2_METADATA_DISABLED": "true"})
        yield
    finally:
        for key in [k for k in os.environ if k.startswith("AWS_")]:
            del os.environ[key]
        os.environ.update(saved)


@contextmanager
def embedded_redis(state_dir: Path) -> Iterator[redis.Redis]:
    """A private Redis under `state_dir`, a child of this process, killed when the block ends.

    Not the daemon `sendhost.embedded` starts for real state: a daemon is re-parented to PID 1 at once, so a
    Ctrl-C that lands while it starts or stops leaves it running with its directory. This one runs in its own
    session (a Ctrl-C at the terminal reaches only us, and we stop it), and the kernel kills it if we die
    without cleaning up (PR_SET_PDEATHSIG), so no run leaves a server behind, however it ends.
    """
    sock = state_dir / "redis.sock"
    process: subprocess.Popen[bytes] | None = None
    try:
        # A Ctrl-C between the fork and `process` being set would leave the server running while the caller
        # removes its directory, and it would write its socket and log there again (test_stopping saw it): the
        # signal waits until the server can be stopped.
        with signals.held() as unmasked:
            process = subprocess.Popen(
                [redis_server_executable(), "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
                 "--dir", str(state_dir), "--save", "", "--appendonly", "no", "--logfile",
                 str(state_dir / "redis.log")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_child_hook(unmasked),
            )
        client = redis.Redis(unix_socket_path=str(sock), decode_responses=True, socket_timeout=5.0)
        try:
            _wait_until_it_answers(client, process, state_dir)
            yield client
        finally:
            client.close()
    finally:
        if process is not None:
            process.kill()
            process.wait()


def _child_hook(unmasked: set[int | signal.Signals]) -> Callable[[], None]:
    """What the child runs before exec: ask the kernel for SIGKILL when the process that started it dies, and
    take the signals the parent holds as a server should (the mask survives exec). libc is loaded here, in the
    parent, so the child makes only system calls between fork and exec."""
    prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        signal.pthread_sigmask(signal.SIG_SETMASK, unmasked)

    return hook


def _wait_until_it_answers(client: redis.Redis, process: subprocess.Popen[bytes], state_dir: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SimulationFailed(f"the simulation's Redis exited at start (status {process.returncode}); see "
                                   f"{state_dir / 'redis.log'}")
        try:
            if client.ping():
                return
        except redis.RedisError:
            time.sleep(0.02)
    raise SimulationFailed(f"the simulation's Redis did not answer within {START_TIMEOUT_S:.0f} s")


@contextmanager
def sandbox(region: str) -> Iterator[tuple[redis.Redis, Path]]:
    """Embedded Redis + moto (its tag lookups indexed: simulation.moto_tags; each class's actions read once:
    simulation.moto_actions; DescribeAddresses rendered an unchanged address at a time: simulation.moto_addresses;
    botocore's service models read once for every session: simulation.botocore_data) + fake AWS credentials in a
    temporary directory removed at the end."""
    # A short prefix under the temp dir keeps the Unix socket path well under the 108-byte limit.
    state_dir = Path(tempfile.mkdtemp(prefix="sendhost-sim-"))
    try:
        from simulation.botocore_data import shared_botocore_data

        with fake_aws_env(state_dir, region), shared_botocore_data():
            from moto import mock_aws  # late: moto is heavy, and it must patch botocore before any client exists

            from simulation.moto_actions import cached_action_names
            from simulation.moto_addresses import cached_address_rendering
            from simulation.moto_tags import indexed_tags

            with (mock_aws(), indexed_tags(), cached_action_names(), cached_address_rendering(),
                  embedded_redis(state_dir) as client):
                yield client, state_dir
    except redis.RedisError as exc:
        raise SimulationFailed(f"the simulation's embedded Redis failed: {exc}") from exc
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


def session_factory(region: str) -> Any:
    """A boto3 session with the fake keys spelled out (so no credential chain is consulted at all), made on the
    first call and given to every later one: each new session parsed the service models again (EC2's is megabytes
    of JSON), and one thread of one simulation needs only one."""
    import boto3

    made: list[Any] = []

    def session() -> Any:
        if not made:
            made.append(boto3.Session(region_name=region, **{k.lower(): v for k, v in FAKE_AWS_ENV.items()}))
        return made[0]

    return session
