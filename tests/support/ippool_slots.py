"""Test-only slot surgery: spend a slot's budget without sending (production has no such call).

`set_used` raises a slot's used count through `tests/support/lua/set_used.lua`, atomically and with the same
retire-at-budget rule as a lease (the slot turns retiring, or ready when no lease is live), so a test can bring a slot
to the edge of its budget, or past it, in one step.
"""

from __future__ import annotations

from typing import Any

from ippool.keys import HostKeys
from ippool.pool import Pool
from ippool.slot_store import SlotStore, now_arg
from ippool.status import text
from sendhost.lua_prelude import CLOCK, read_lua

_SOURCE = "".join([read_lua(*CLOCK), read_lua("ippool", "_live"), read_lua("tests.support", "set_used")])


def set_used(store: Pool | SlotStore, host: str, slot: int, used: int, now: float | None = None) -> tuple[int, str]:
    """Raise `host`'s slot `slot` used count to at least `used` (never lowers it); (used, state) afterwards."""
    slots = store.slots if isinstance(store, Pool) else store
    client: Any = slots.client
    keys = HostKeys(host)
    reply = client.register_script(_SOURCE)(keys=[keys.slot(slot), keys.used(slot), keys.leases],
                                            args=[used, slot, now_arg(now, slots._clock)])
    return int(reply[0]), text(reply[1])
