"""The simulation's pool worker reads a host again only after that host's pool changed: through a fleet's run, every
sample's count of addresses in service is what a read of every host gives, and no host it leaves out of a cycle's
look has a slot ready."""

from __future__ import annotations

import pytest

from ippool.states import SlotState
from simulation import SimConfig, run_simulation
from simulation.fleet import FleetSize, scale_inventory
from simulation.pool_worker import PoolWorker
from toolkit.cli.simulate import example_inventory, to_sim_inventory
from toolkit.inventory import load_inventory

pytestmark = [pytest.mark.slow, pytest.mark.service]


def _leasable_everywhere(worker: PoolWorker) -> int:
    every_host = worker._slots_of([world.host.name for world in worker.hosts])
    return sum(1 for slots in every_host.values() for slot in slots.values()
               if slot.state == SlotState.ACTIVE and slot.used < slot.budget)


def test_samples_and_looks_agree_with_a_read_of_every_host(monkeypatch: pytest.MonkeyPatch) -> None:
    checks = {"samples": 0, "changed": 0, "left_out": 0, "cycles": 0}
    leasable, cycle = PoolWorker.leasable, PoolWorker.cycle

    def checked_leasable(self: PoolWorker) -> int:
        read_before = len(self._leasable)
        counted = leasable(self)
        assert counted == _leasable_everywhere(self)
        checks["samples"] += 1
        checks["changed"] += read_before < len(self.hosts)  # some host was read again
        return counted

    def checked_cycle(self: PoolWorker) -> None:
        left_out = [world.host.name for world in self.hosts if world.host.name in self._unready]
        for status in self.pool.status_of(left_out, now=self.clock()) if left_out else []:
            # a host not asked has no slot ready (the status reads a spent slot without leases as READY)
            assert all(slot.state != SlotState.READY for slot in status.slots), status
        checks["left_out"] += len(left_out)
        checks["cycles"] += 1
        cycle(self)

    monkeypatch.setattr(PoolWorker, "leasable", checked_leasable)
    monkeypatch.setattr(PoolWorker, "cycle", checked_cycle)
    example = to_sim_inventory(load_inventory(example_inventory()))
    fleet = scale_inventory(example, FleetSize(hosts=5, mailboxes=20))
    result = run_simulation(fleet, SimConfig(days=3, sends_per_day=150, seed=3))
    assert result.log.sends and result.log.retirements  # leases and rotations happened: the caches were tested
    assert checks["changed"] > 0 and checks["left_out"] > 0 and checks["samples"] > checks["changed"]
