"""Simulation runs shared by the tests: each seed is simulated once per session (a run takes seconds)."""

from __future__ import annotations

from collections.abc import Callable
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
