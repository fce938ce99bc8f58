"""The fenced slot store: host registration, placing addresses in slots, rotation fencing, retirement and reading
a host's slots, over Redis. The sender's hot path (`ippool.pool.Pool`) composes one and delegates its documented
registration calls to it.

A rotator's cycle, built on these methods:

    for ready in slots.ready_slots(host):                       # reaps expired leases first
        claimed = slots.mark_rotating(host, ready.slot, ready.generation)   # CAS: None if another rotator won
        if claimed is None:
            continue
        ... allocate and associate a new EIP (AWS) ...
        placed = slots.publish(host, ready.slot, ready.generation, private_ip=..., public_ip=..., allocation_id=...)
        if placed is None:   # fenced out: this rotator is stale; park the EIP it allocated
            ...
        # on an AWS failure instead: slots.abort_rotation(host, ready.slot, ready.generation)

Inputs are checked here (PoolConfigError, exit 2); a Redis failure is a PoolOperationFailed (exit 1).
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from ippool.errors import PoolConfigError, PoolOperationFailed
from ippool.keys import HOSTS_KEY, HostKeys
from ippool.scripts import PoolScripts
from ippool.states import SlotState
from ippool.status import HostStatus, SlotStatus, read_hosts, text
from sendhost.model import BUDGET


class Placement(NamedTuple):
    """An address placed in a slot: the slot's new generation and the budget drawn for the address."""

    generation: int
    budget: int


class ReadySlot(NamedTuple):
    """A slot ready to rotate, and the generation a rotator must present to claim it."""

    slot: int
    generation: int


def now_arg(now: float | None, clock: Callable[[], float] | None) -> str:
    """`now` (or the injected clock) in ms for a script; "" makes the script use Redis TIME."""
    if now is None and clock is not None:
        now = clock()
    return "" if now is None else str(int(now * 1000))


class SlotStore:
    """Host registration, slot placement, rotation fencing, retirement and state reading, over Redis.

    `clock` (seconds since the epoch) replaces Redis TIME, for tests and the simulator; `rng` draws budgets.
    Inputs are checked (PoolConfigError); a Redis failure is a PoolOperationFailed naming the operation.
    """

    def __init__(self, client: Any, *, clock: Callable[[], float] | None = None, rng: random.Random | None = None,
                 scripts: PoolScripts | None = None) -> None:
        self._client = client
        self._scripts = scripts if scripts is not None else PoolScripts.register(client)
        self._clock = clock
        self._rng = rng or random.Random()

    @property
    def client(self) -> Any:
        """The Redis client (a `redis.Redis` or `redis.RedisCluster`)."""
        return self._client

    def _now_arg(self, now: float | None) -> str:
        return now_arg(now, self._clock)

    # -- registration ------------------------------------------------------------------------------------------

    def register_host(self, host: str, primary_ip: str, budget: tuple[int, int] = BUDGET) -> None:
        """Register (or update) a host: its primary IP (the fallback source) and the budget range of its IPs."""
        keys = self._checked_keys(host)
        _check_ip(primary_ip, "primary_ip")
        low, high = budget
        if not 1 <= low <= high:
            raise PoolConfigError(f"budget {budget!r} for host {host!r}: need 1 <= low <= high, e.g. {BUDGET}")
        with _redis_op(f"register host {host!r}"):
            self._client.hset(keys.meta, mapping={"primary_ip": primary_ip, "budget_min": low, "budget_max": high})
            self._client.hsetnx(keys.meta, "slot_count", 0)
            self._client.sadd(HOSTS_KEY, host)

    def put_address(self, host: str, slot: int, *, private_ip: str, public_ip: str | None = None,
                    allocation_id: str | None = None, spent: bool = False) -> Placement:
        """Place an address in a slot, unfenced: active, used 0, a budget drawn uniformly from the host's range,
        generation + 1. For first placement, tests and reconcile; a rotator uses `publish` instead.

        `spent` places it with its whole budget used, in the same step (no new send until it rotates): for an
        address whose past sends nobody can count, such as one reconcile rebuilds after Redis lost its data."""
        keys = self._checked_keys(host)
        _check_slot(slot)
        _check_ip(private_ip, "private_ip")
        if public_ip:
            _check_ip(public_ip, "public_ip")
        with _redis_op(f"put an address in {host!r} slot {slot}"):
            reply = self._scripts.put_address(
                keys=[keys.meta, keys.slot(slot), keys.used(slot)],
                args=[slot, private_ip, public_ip or "", allocation_id or "", repr(self._rng.random()),
                      "spent" if spent else ""])
        return Placement(int(reply[0]), int(reply[1]))

    # -- rotation ----------------------------------------------------------------------------------------------

    def reap(self, host: str, now: float | None = None) -> tuple[int, list[ReadySlot]]:
        """Drop the host's leases expired at `now` (default: Redis TIME) and list its slots ready to rotate.

        Returns (leases dropped, ready slots). A retiring slot whose last lease expired becomes ready here.
        """
        keys = self._checked_keys(host)
        with _redis_op(f"reap leases of {host!r}"):
            for _attempt in range(2):  # a second pass only if a slot was added between the two calls
                count = int(self._client.hget(keys.meta, "slot_count") or 0)
                try:
                    reply = self._scripts.reap(keys=keys.with_slots(count), args=[self._now_arg(now)])
                    break
                except Exception as error:
                    if "slot count changed" not in str(error):
                        raise
            else:
                raise PoolOperationFailed(f"host {host!r} kept gaining slots while reaping; retry")
        return int(reply[0]), _ready_of(reply)

    def ready_by_host(self, hosts: Sequence[str], now: float | None = None) -> dict[str, list[ReadySlot]]:
        """`ready_slots` of each of `hosts` in two round trips, not two per host: their slot counts in one pipeline,
        then every host's reap in one (a fleet's worker or sampler asks of every host at once). Should a host gain
        a slot between the two, every host is reaped again one by one, as `reap` does."""
        if not hosts:
            return {}
        keys = [self._checked_keys(host) for host in hosts]
        with _redis_op(f"reap leases of {len(hosts)} host(s)"):
            with self._client.pipeline(transaction=False) as pipe:
                for host_keys in keys:
                    pipe.hget(host_keys.meta, "slot_count")
                counts = [int(count or 0) for count in pipe.execute()]
            now_arg = self._now_arg(now)
            reap = self._scripts.reap
            try:
                replies = reap.caller.call_all([(reap, host_keys.with_slots(count), [now_arg])
                                                for host_keys, count in zip(keys, counts, strict=True)])
            except Exception as error:
                if "slot count changed" not in str(error):
                    raise
                return {host: self.ready_slots(host, now) for host in hosts}
        return {host: _ready_of(reply) for host, reply in zip(hosts, replies, strict=True)}

    def ready_slots(self, host: str, now: float | None = None) -> list[ReadySlot]:
        """Slots of `host` ready to rotate (after reaping leases expired at `now`), with their generations."""
        return self.reap(host, now)[1]

    def mark_rotating(self, host: str, slot: int, generation: int) -> SlotStatus | None:
        """Claim a ready slot for rotation if it is still ready at `generation` (compare-and-set).

        Returns the slot as claimed (its old address, used and budget), or None when another rotator claimed
        it first or it changed: the caller must then leave the slot alone.
        """
        keys = self._checked_keys(host)
        _check_slot(slot)
        with _redis_op(f"mark {host!r} slot {slot} rotating"):
            reply = self._scripts.mark_rotating(keys=[keys.slot(slot), keys.used(slot)], args=[generation])
        if not reply:
            return None
        fields = dict(zip(reply[::2], reply[1::2], strict=True))
        return SlotStatus.from_hash(slot, fields, live_leases=0)

    def publish(self, host: str, slot: int, generation: int, *, private_ip: str, public_ip: str,
                allocation_id: str) -> Placement | None:
        """Put a new address into a slot this rotator holds at `generation` (from `mark_rotating`).

        The slot becomes active with a fresh budget, used 0 and generation + 1. Returns None when the fence
        refuses it (the slot is no longer rotating at `generation`: this rotator is stale and must park its EIP).
        """
        keys = self._checked_keys(host)
        _check_slot(slot)
        _check_ip(private_ip, "private_ip")
        _check_ip(public_ip, "public_ip")
        with _redis_op(f"publish an address in {host!r} slot {slot}"):
            reply = self._scripts.publish(
                keys=[keys.meta, keys.slot(slot), keys.used(slot)],
                args=[generation, private_ip, public_ip, allocation_id, repr(self._rng.random())])
        return Placement(int(reply[0]), int(reply[1])) if reply else None

    def abort_rotation(self, host: str, slot: int, generation: int) -> bool:
        """Give back a slot claimed at `generation` that could not be rotated: it is ready again.

        False when the slot is not rotating at that generation (nothing changed)."""
        keys = self._checked_keys(host)
        _check_slot(slot)
        with _redis_op(f"abort rotation of {host!r} slot {slot}"):
            return bool(self._scripts.abort_rotation(keys=[keys.slot(slot)], args=[generation]))

    def retire(self, host: str, slot: int) -> SlotState:
        """Stop new leases on a slot now, whatever its used count (on-call `pool retire`).

        Returns its state afterwards: "retiring" while leases are live, "ready" when none are, or the unchanged
        state of a slot that was neither active nor retiring ("empty" for a slot with no address)."""
        keys = self._checked_keys(host)
        _check_slot(slot)
        with _redis_op(f"retire {host!r} slot {slot}"):
            reply = self._scripts.retire(keys=[keys.slot(slot), keys.leases], args=[slot, self._now_arg(None)])
        return SlotState(text(reply))

    def force_ready(self, host: str, slot: int) -> int:
        """Drop a slot's live leases and make it ready to rotate now (on-call `pool rotate --force`).

        Returns how many leases were dropped, or -1 when the slot is empty or already rotating."""
        keys = self._checked_keys(host)
        _check_slot(slot)
        with _redis_op(f"force {host!r} slot {slot} ready"):
            return int(self._scripts.force_ready(keys=[keys.leases, keys.slot(slot)], args=[slot]))

    def forget_host(self, host: str) -> None:
        """Delete every key of `host` and unregister it (`pool destroy`, after its EIPs went back to AWS)."""
        keys = self._checked_keys(host)
        with _redis_op(f"forget host {host!r}"):
            count = int(self._client.hget(keys.meta, "slot_count") or 0)
            for key in [keys.meta, keys.leases, keys.fallbacks, keys.parked, keys.claims, keys.stats,
                        *keys.slots_with_used(count)]:
                self._client.delete(key)
            self._client.srem(HOSTS_KEY, host)

    # -- reading -----------------------------------------------------------------------------------------------

    def hosts(self) -> list[str]:
        """Every registered host, sorted."""
        with _redis_op("list hosts"):
            return sorted(text(host) for host in self._client.smembers(HOSTS_KEY))

    def status(self, host: str | None = None, now: float | None = None) -> list[HostStatus]:
        """State of one host (PoolConfigError when it is not registered) or of every host, read at `now`
        (default: Redis TIME) so expired leases do not count as live."""
        return self.status_of([host] if host is not None else self.hosts(), now)

    def status_of(self, hosts: Sequence[str], now: float | None = None) -> list[HostStatus]:
        """State of each of `hosts`, in order, in three round trips at most however many (PoolConfigError naming
        the first that is not registered), read at `now` as `status` is."""
        names = list(hosts)
        with _redis_op("read pool status"):
            now_ms = self._now_ms(now)
            states = read_hosts(self._client, [self._checked_keys(name) for name in names], now_ms)
            found = list(zip(names, states, strict=True))
        missing = [name for name, state in found if state is None]
        if missing:
            known = ", ".join(self.hosts()) or "none"
            raise PoolConfigError(f"host {missing[0]!r} is not registered in Redis (registered: {known})")
        return [state for _name, state in found if state is not None]

    def slot_status(self, host: str, slot: int, now: float | None = None) -> SlotStatus:
        """State of one slot of a registered host (EMPTY when it holds no address)."""
        _check_slot(slot)
        slots = self.status(host, now)[0].slots
        if slot >= len(slots):
            return SlotStatus.from_hash(slot, {}, 0)
        return slots[slot]

    def _now_ms(self, now: float | None) -> int:
        arg = self._now_arg(now)
        if arg:
            return int(arg)
        seconds, micros = self._client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def _checked_keys(self, host: str) -> HostKeys:
        try:
            return HostKeys(host)
        except ValueError as exc:
            raise PoolConfigError(str(exc)) from None


@contextmanager
def _redis_op(what: str) -> Iterator[None]:
    """Turn a Redis failure during an operation into PoolOperationFailed naming it (through the toolkit's one
    wrapper), or into PoolConfigError when a script refused an unregistered host."""
    from redis.exceptions import ResponseError

    from sendhost.redis_conn import redis_errors  # late: `sendhost --help` imports this module, not redis

    try:
        with redis_errors(what, error=PoolOperationFailed):
            yield
    except PoolOperationFailed as exc:
        if isinstance(exc.__cause__, ResponseError) and "unknown host" in str(exc.__cause__):
            raise PoolConfigError(f"cannot {what}: the host is not registered; call register_host first") from None
        raise


def _check_ip(value: str, name: str) -> None:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise PoolConfigError(f"{name} {value!r} is not an IP address") from None


def _check_slot(slot: int) -> None:
    if not isinstance(slot, int) or slot < 0:
        raise PoolConfigError(f"slot {slot!r} must be an integer >= 0")


def _ready_of(reply: list[Any]) -> list[ReadySlot]:
    """The ready slots of a reap's reply: (leases dropped, slot, generation, slot, generation, ...)."""
    pairs = [int(value) for value in reply[1:]]
    return [ReadySlot(pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2)]
