"""The worker loop: a stop request lets the slot in hand finish and starts no other; SIGTERM ends the CLI worker."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from ippool.rotator import ROTATED
from ippool.worker_loop import Worker
from tests.conftest import REPO_ROOT
from tests.support.ippool_cli import cli_env, server_instance, unique_host, write_inventory
from tests.support.ippool_world import World


def test_stop_mid_rotation_finishes_that_slot_and_starts_no_other(world: World) -> None:
    spec = world.add_host(slots=2)
    world.lifecycle().create(spec, 2)
    world.exhaust("sender-1", 0)
    world.exhaust("sender-1", 1)
    runner: list[Worker] = []
    rotator = world.rotator(checkpoint=lambda step: runner[0].stop() if step == "allocate" else None)
    runner.append(Worker(rotator, world.reaper(), ["sender-1"], interval_s=3600))
    cycles = runner[0].run()
    assert cycles == 1  # stopped: no sleep, no second cycle
    states = [(s.state, s.used) for s in world.pool.status("sender-1")[0].slots]
    assert states[0] == ("active", 0)  # the slot in hand was rotated to the end
    assert states[1][0] == "ready"  # the next one was not started


def test_worker_cycles_sleep_between_and_rotate_what_became_ready(world: World) -> None:
    spec = world.add_host(slots=1)
    world.lifecycle().create(spec, 1)
    runner = Worker(world.rotator(), world.reaper(), ["sender-1"], interval_s=0)
    assert runner.run_cycle().rotations == []
    world.exhaust("sender-1", 0)
    assert [r.outcome for r in runner.run_cycle().rotations] == [ROTATED]


def test_cli_worker_exits_cleanly_on_sigterm(moto_url: str, redis_url: str, tmp_path: Path) -> None:
    host = unique_host()
    env = cli_env(moto_url, redis_url, write_inventory(tmp_path / "inv.yml", host, server_instance(moto_url)))
    full_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), **env}
    process = subprocess.Popen([sys.executable, "-m", "toolkit", "-v", "pool", "worker", "--interval", "600"],
                               env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        assert process.stderr is not None
        while "started" not in (line := process.stderr.readline()):  # SIGTERM is handled from here on
            assert line and time.monotonic() < deadline, "the worker did not start"
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=max(1, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    _out, err = process.communicate()
    assert code == 0, err
    assert "Traceback" not in err
