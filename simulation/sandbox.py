"""The simulation's private world: an embedded Redis in a temporary directory and AWS as moto, in process.

Nothing escapes it. The Redis server is shut down and its directory removed at the end. While it runs, every
`AWS_*` variable of the user is hidden (a profile, an endpoint, real keys) and replaced by fake keys and empty
config files, and moto intercepts every AWS request inside the process; the user's environment is restored after.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from sendhost.embedded import ensure_embedded_redis
from simulation.errors import SimulationFailed

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
    """A private embedded Redis under `state_dir`, shut down (without saving) when the block ends."""
    url = ensure_embedded_redis(state_dir)
    client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5.0)
    try:
        client.config_set("save", "")  # nothing of a simulation is worth a snapshot
        yield client
    finally:
        # The server closes the connection as it goes down: that error is the expected answer.
        with contextlib.suppress(redis.RedisError):
            client.shutdown(nosave=True)
        client.close()


@contextmanager
def sandbox(region: str) -> Iterator[tuple[redis.Redis, Path]]:
    """Embedded Redis + moto + fake AWS credentials in a temporary directory removed at the end."""
    # A short prefix under the temp dir keeps the Unix socket path well under the 108-byte limit.
    state_dir = Path(tempfile.mkdtemp(prefix="sendhost-sim-"))
    try:
        from moto import mock_aws  # late: moto is heavy, and it must patch botocore before any client exists

        with fake_aws_env(state_dir, region), mock_aws(), embedded_redis(state_dir) as client:
            yield client, state_dir
    except redis.RedisError as exc:
        raise SimulationFailed(f"the simulation's embedded Redis failed: {exc}") from exc
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


def session_factory(region: str) -> Any:
    """boto3 sessions with the fake keys spelled out (so no credential chain is consulted at all)."""
    import boto3

    return lambda: boto3.Session(region_name=region, **{k.lower(): v for k, v in FAKE_AWS_ENV.items()})
