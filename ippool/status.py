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
    def from_hash(cls, slot: int, fields: dict[Any, Any], live_leases: int) -> SlotStatus:
        """Build from a slot hash as HGETALL returns it (empty dict for a slot with no address).

        A retiring slot with no live lease reads as READY: its last lease was released (a plain ZREM that
        leaves the stored state alone) or expired, and the rotator's next reap stores READY."""
        f = {text(k): text(v) for k, v in fields.items()}
        state = SlotState(f.get("state", SlotState.EMPTY))
        if state == SlotState.RETIRING and live_leases == 0:
            state = SlotState.READY
        return cls(slot=slot, private_ip=f.get("private_ip") or None, public_ip=f.get("public_ip") or None,
                   allocation_id=f.get("allocation_id") or None, state=state,
                   used=int(f.get("used", 0)), budget=int(f.get("budget", 0)), live_leases=live_leases,
                   generation=int(f.get("generation", 0)))

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
    for key in keys.slots(count):
        pipe.hgetall(key)
    pipe.zrangebyscore(keys.leases, f"({now_ms}", "+inf")
    *slot_hashes, live_members = pipe.execute()
    live = Counter(text(member).split(":", 1)[0] for member in live_members)
    slots = tuple(SlotStatus.from_hash(index, fields, live[str(index)]) for index, fields in enumerate(slot_hashes))
    return HostStatus(host=keys.host, primary_ip=meta["primary_ip"],
                      budget=(int(meta.get("budget_min", 0)), int(meta.get("budget_max", 0))), slots=slots)
