"""Reading a host's pool state from Redis: what `sendhost pool status` shows and what a rotator inspects."""

from __future__ import annotations

from collections import Counter
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


def read_host(client: Any, keys: HostKeys, now_ms: int) -> HostStatus | None:
    """The host's state, or None when it is not registered. Leases with expiry <= now_ms are not counted."""
    meta = {text(k): text(v) for k, v in client.hgetall(keys.meta).items()}
    if "primary_ip" not in meta:
        return None
    count = int(meta.get("slot_count", 0))
    # Plain reads, no transaction: on Redis Cluster a pipeline of same-slot keys goes to one node either way.
    pipe = client.pipeline(transaction=False)
    for index in range(count):
        pipe.hgetall(keys.slot(index))
        pipe.get(keys.used(index))
    pipe.zrangebyscore(keys.leases, f"({now_ms}", "+inf")
    *replies, live_members = pipe.execute()
    live = Counter(text(member).split(":", 1)[0] for member in live_members)
    slots = tuple(SlotStatus.from_hash(index, replies[2 * index], live[str(index)], used=replies[2 * index + 1])
                  for index in range(count))
    return HostStatus(host=keys.host, primary_ip=meta["primary_ip"],
                      budget=(int(meta.get("budget_min", 0)), int(meta.get("budget_max", 0))), slots=slots)
