"""Reading a host's pool state from Redis: what `sendhost pool status` shows and what a rotator inspects."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ippool.keys import HostKeys
from ippool.states import SlotState


def text(value: Any) -> str:
    """A Redis reply value as str, whether the client decodes responses or not."""
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class SlotStatus:
    """One slot as stored in Redis; `live_leases` counts unexpired leases at the time of reading."""

    slot: int
    private_ip: str | None
    public_ip: str | None
    allocation_id: str | None
    state: SlotState
    used: int
    budget: int
    live_leases: int
    generation: int

    @classmethod
    def from_hash(cls, slot: int, fields: dict[Any, Any], live_leases: int, used: Any = None) -> SlotStatus:
        """Build from a slot hash as HGETALL returns it (empty dict for a slot with no address) and the GET of its
        used key (`used`: None when it does not exist; the hash's legacy `used` field then counts).

        An active slot whose used count reached its budget reads as RETIRING: lease.lua stops leasing it without
        writing the slot hash, and the rotator's next reap stores the state. A retiring slot with no live lease
        reads as READY: its last lease was released (a plain ZREM that leaves the stored state alone) or expired,
        and the rotator's next reap stores READY."""
        f = {text(k): text(v) for k, v in fields.items()}
        if used is not None:
            f["used"] = text(used)
        state = SlotState(f.get("state", SlotState.EMPTY))
        count, budget = int(f.get("used", 0)), int(f.get("budget", 0))
        if state == SlotState.ACTIVE and count >= budget:
            state = SlotState.RETIRING
        if state == SlotState.RETIRING and live_leases == 0:
            state = SlotState.READY
        return cls(slot=slot, private_ip=f.get("private_ip") or None, public_ip=f.get("public_ip") or None,
                   allocation_id=f.get("allocation_id") or None, state=state, used=count, budget=budget,
                   live_leases=live_leases, generation=int(f.get("generation", 0)))

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "state": str(self.state)}


@dataclass(frozen=True)
class HostStatus:
    """A host's primary IP, budget range and every slot."""

    host: str
    primary_ip: str
    budget: tuple[int, int]
    slots: tuple[SlotStatus, ...]

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "primary_ip": self.primary_ip, "budget_min": self.budget[0],
                "budget_max": self.budget[1], "slots": [slot.to_json() for slot in self.slots]}


def read_hosts(client: Any, hosts: Sequence[HostKeys], now_ms: int) -> list[HostStatus | None]:
    """Each host's state, in order (None for a host not registered; leases with expiry <= now_ms are not counted),
    in two round trips however many hosts: every host's meta in one pipeline, then every registered host's slots
    and live leases in another (a fleet's status, or a sampler reading every host, is not two trips per host)."""
    if not hosts:
        return []
    # Plain reads, no transaction: on Redis Cluster a pipeline of same-slot keys goes to one node either way.
    pipe = client.pipeline(transaction=False)
    for keys in hosts:
        pipe.hgetall(keys.meta)
    metas = [{text(k): text(v) for k, v in reply.items()} for reply in pipe.execute()]
    counts = [int(meta.get("slot_count", 0)) if "primary_ip" in meta else None for meta in metas]
    pipe = client.pipeline(transaction=False)
    for keys, count in zip(hosts, counts, strict=True):
        if count is None:
            continue
        for index in range(count):
            pipe.hgetall(keys.slot(index))
            pipe.get(keys.used(index))
        pipe.zrangebyscore(keys.leases, f"({now_ms}", "+inf")
    replies = iter(pipe.execute() if any(count is not None for count in counts) else [])
    found: list[HostStatus | None] = []
    for keys, meta, count in zip(hosts, metas, counts, strict=True):
        if count is None:
            found.append(None)
            continue
        slot_replies = [next(replies) for _ in range(2 * count)]
        live = Counter(text(member).split(":", 1)[0] for member in next(replies))
        slots = tuple(SlotStatus.from_hash(index, slot_replies[2 * index], live[str(index)],
                                           used=slot_replies[2 * index + 1])
                      for index in range(count))
        found.append(HostStatus(host=keys.host, primary_ip=meta["primary_ip"],
                                budget=(int(meta.get("budget_min", 0)), int(meta.get("budget_max", 0))),
                                slots=slots))
    return found
