"""Simulation runs shared by the tests: each seed is simulated once per session (a run takes seconds)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from simulation import SimConfig, SimResult, run_simulation
from simulation.dns_check import example_zone_dir
from toolkit.cli.simulate import example_inventory, to_sim_inventory
from toolkit.inventory import load_inventory

# Nine days: the example's newest mailbox (bob) spends its first week at 10 a day and then ramps, and the demand
# (150 leads a day) exceeds the mailboxes' caps, so every cap is pressed against.
INVARIANT_DAYS = 9
INVARIANT_SENDS = 150


@pytest.fixture(scope="session")
def simulate() -> Callable[..., SimResult]:
    """Run (once per argument set) the example inventory with the shipped zones."""
    runs: dict[tuple[int, int, int], SimResult] = {}

    def run(seed: int, days: int = INVARIANT_DAYS, sends_per_day: int = INVARIANT_SENDS) -> SimResult:
        key = (seed, days, sends_per_day)
        if key not in runs:
            inventory = to_sim_inventory(load_inventory(example_inventory()))
            runs[key] = run_simulation(inventory, SimConfig(days=days, sends_per_day=sends_per_day, seed=seed,
                                                            zone_dir=example_zone_dir()))
        return runs[key]

    return run


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
