"""Simulation runs shared by the tests: each seed is simulated once per run (a run takes seconds; pytest-xdist's
workers share it)."""

from __future__ import annotations

import pickle
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from simulation import SimConfig, SimResult, run_simulation
from simulation.dns_check import example_zone_dir
from tests.support.net import xdist_worker
from tests.support.shared import made_once
from toolkit.cli.simulate import example_inventory, to_sim_inventory
from toolkit.inventory import load_inventory

# Nine days: the example's newest mailbox (bob) spends its first week at 10 a day and then ramps, and the demand
# (150 leads a day) exceeds the mailboxes' caps, so every cap is pressed against.
INVARIANT_DAYS = 9
INVARIANT_SENDS = 150


@pytest.fixture(scope="session")
def simulate(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., SimResult]:
    """Run (once per argument set and test run) the example inventory with the shipped zones. Under pytest-xdist
    the first worker to ask runs it and keeps the result for the others (a pickle in the run's shared temporary
    directory): a run is deterministic for its arguments, and seconds of CPU each worker need not spend again."""
    runs: dict[tuple[int, int, int], SimResult] = {}

    def simulated(seed: int, days: int, sends_per_day: int) -> SimResult:
        inventory = to_sim_inventory(load_inventory(example_inventory()))
        return run_simulation(inventory, SimConfig(days=days, sends_per_day=sends_per_day, seed=seed,
                                                   zone_dir=example_zone_dir()))

    def run(seed: int, days: int = INVARIANT_DAYS, sends_per_day: int = INVARIANT_SENDS) -> SimResult:
        key = (seed, days, sends_per_day)
        if key not in runs:
            if xdist_worker() is None:
                runs[key] = simulated(*key)
            else:
                kept = made_once(tmp_path_factory, f"simulation-{seed}-{days}-{sends_per_day}",
                                 lambda folder: _pickled(simulated(*key), folder / "result.pickle"))
                runs[key] = pickle.loads(kept.read_bytes())
        return runs[key]

    return run


def _pickled(result: SimResult, path: Path) -> Path:
    path.write_bytes(pickle.dumps(result))
    return path


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


@pytest.fixture
def own_temp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary directory of this test's own as the process's (tempfile's, and TMPDIR for a child), so that what a
    simulation leaves behind there, or a server still running from it, is this test's alone: another simulation on
    the same machine cannot make it fail or pass. Opened to other users (0755) as /tmp is: run as root, the
    simulation's PostgreSQL runs as its own account and needs to reach its data directory."""
    path = Path(tempfile.mkdtemp(prefix="sim-test-", dir=tempfile.gettempdir()))
    path.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    monkeypatch.setenv("TMPDIR", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def processes_under(path: Path) -> set[int]:
    """Processes whose command line names `path` (a server started on a data directory under it)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if str(path).encode() in command:
            found.add(int(proc.name))
    return found
