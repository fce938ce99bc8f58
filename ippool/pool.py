"""The sender API: `Pool.lease(host)` hands out a source IP for one send in one Redis round trip.

The hot path (lease, release, renew) never raises, and each of its round trips waits at most the client's socket
timeout: a lease makes one FCALL (two for a process's first, which checks the library's version; see
`sendhost.lua_calls`). Any failure gives a fallback lease on the host's primary IP, counted and logged once per
interval, and so does a Redis that lost the function library (restarted empty) until an admin command reloads it.
Registration, placement and the rotator's fenced operations live in `ippool.slot_store.SlotStore`, which a Pool
composes as `pool.slots`; `register_host`, `put_address`, `hosts` and `status` stay callable on the Pool,
delegating to it.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ippool.keys import HostKeys
from ippool.lease import NO_SLOT, REDIS_ERROR, UNKNOWN_HOST, FallbackMeter, Lease
from ippool.scripts import PoolScripts
from ippool.slot_store import Placement, SlotStore, now_arg
from ippool.status import HostStatus, text
from sendhost.model import BUDGET

log = logging.getLogger("ippool")

DEFAULT_TTL_S = 30.0
# Slot keys passed on a host's first lease before its real slot count is known (a larger guess costs nothing:
# the script ignores keys past the host's slot count).
DEFAULT_SLOT_GUESS = 8


class Pool:
    """Leases of source IPs on sender hosts, kept in Redis (a single server or a Redis Cluster).

    `clock` (seconds since the epoch) replaces Redis TIME, for tests and the simulator; `rng` draws budgets.
    """

    def __init__(self, client: Any, *, clock: Callable[[], float] | None = None, rng: random.Random | None = None,
                 fallback_log_interval_s: float = 60.0, monotonic: Callable[[], float] = time.monotonic,
                 owns_client: bool = False) -> None:
        self._client = client
        self._scripts = PoolScripts.register(client)
        self._clock = clock
        self._owns_client = owns_client
        self.slots = SlotStore(client, clock=clock, rng=rng or random.Random(), scripts=self._scripts)
        self.fallbacks = FallbackMeter(fallback_log_interval_s, monotonic)
        self._host_keys: dict[str, HostKeys] = {}
        self._lease_keys: dict[str, list[str]] = {}
        self._primary_ips: dict[str, str] = {}
        # Tokens: random per Pool, then the pid (a forked child shares the parent's Pool) and a counter.
        self._token_prefix = secrets.token_hex(5)
        self._counter = itertools.count()

    @classmethod
    def from_url(cls, url: str | None = None, *, state_dir: Path = Path(".sendhost"),
                 socket_timeout: float | None = None, **kwargs: Any) -> Pool:
        """A Pool on the Redis at `url`, or on the embedded Redis under `state_dir` when `url` is None.

        Raises ValueError naming the URL when it is malformed. The client is the hot-path role of
        `sendhost.redis_conn`: a short socket timeout (`socket_timeout` overrides it), at most one retry (a stale
        pooled connection after a Redis restart), no backoff, and no handshake round trips on a new connection.
        """
        from sendhost import redis_conn

        client = redis_conn.connect(url, role=redis_conn.HOT_PATH, state_dir=state_dir, socket_timeout=socket_timeout)
        return cls(client, owns_client=True, **kwargs)

    @property
    def client(self) -> Any:
        """The Redis client (a `redis.Redis` or `redis.RedisCluster`)."""
        return self._client

    def close(self) -> None:
        """Close the Redis client if this Pool created it (`from_url`)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- the hot path ------------------------------------------------------------------------------------------

    def lease(self, host: str, ttl_s: float = DEFAULT_TTL_S, *, primary_ip: str | None = None) -> Lease:
        """Lease the least-used leasable slot of `host` for `ttl_s` seconds, in one Redis round trip.

        Never raises and never blocks: an unknown host, no leasable slot, or Redis failing gives a fallback
        lease on the host's primary IP (`primary_ip` if given, else the one Redis last reported).
        """
        try:
            keys = self._lease_keys.get(host) or self._guess_lease_keys(host)
        except ValueError:  # a name that cannot be a hash tag was never registered
            return self._fall_back(host, primary_ip, UNKNOWN_HOST, ttl_s)
        try:
            token = f"{self._token_prefix}.{os.getpid()}.{next(self._counter)}"
            args = (self._now_arg(None), int(ttl_s * 1000), token)
            reply = text(self._scripts.lease(keys, args)).split("|")
            if reply[0] == "resize":  # the host has more slots than we passed keys for: once per growth
                keys = self._lease_keys[host] = self._keys(host).lease_keys(int(reply[1]))
                reply = text(self._scripts.lease(keys, args)).split("|")
            return self._lease_from(host, keys, reply, token, ttl_s, primary_ip)
        # Any failure at all must cost the sender a fallback, never the send: hence the broad catch.
        except Exception as error:
            return self._fall_back(host, primary_ip, REDIS_ERROR, ttl_s, error)

    def _lease_from(self, host: str, keys: list[str], reply: list[str], token: str, ttl_s: float,
                    primary_ip: str | None) -> Lease:
        """The Lease for a lease.lua reply (see its header for the reply's fields)."""
        kind = reply[0]
        if kind == "unknown":
            return self._fall_back(host, primary_ip, UNKNOWN_HOST, ttl_s)
        self._primary_ips[host] = primary = reply[1]
        if len(keys) != 2 * int(reply[2]) + 3:  # pass exactly the host's slot keys from now on
            self._lease_keys[host] = self._keys(host).lease_keys(int(reply[2]))
        if kind != "leased":
            return self._fall_back(host, primary_ip or primary, NO_SLOT, ttl_s)
        slot = reply[3]
        return Lease(self, host, source_ip=reply[4], public_ip=reply[5] or None, slot=int(slot),
                     member=f"{slot}:{token}", generation=int(reply[6]), ttl_s=ttl_s)

    def _release(self, lease: Lease) -> None:
        try:
            self._client.zrem(self._keys(lease.host).leases, lease.member)
        except Exception as error:  # the lease then expires by its TTL; the sender must not see this
            log.debug("ippool: release of %r failed (it will expire by TTL): %s", lease, error)

    def _renew(self, lease: Lease, ttl_s: float | None) -> bool:
        ttl_ms = int((lease.ttl_s if ttl_s is None else ttl_s) * 1000)
        try:
            keys = self._keys(lease.host)
            return bool(self._scripts.renew([keys.leases], (lease.member, self._now_arg(None), ttl_ms)))
        except Exception as error:
            log.debug("ippool: renew of %r failed: %s", lease, error)
            return False

    def _fall_back(self, host: str, primary_ip: str | None, reason: str, ttl_s: float,
                   error: BaseException | None = None) -> Lease:
        self.fallbacks.record(reason, error)
        source_ip = primary_ip or self._primary_ips.get(host)
        return Lease(self, host, source_ip=source_ip, public_ip=None, ttl_s=ttl_s, reason=reason)

    def _guess_lease_keys(self, host: str) -> list[str]:
        keys = self._lease_keys[host] = self._keys(host).lease_keys(DEFAULT_SLOT_GUESS)
        return keys

    def _keys(self, host: str) -> HostKeys:
        keys = self._host_keys.get(host)
        if keys is None:
            keys = self._host_keys[host] = HostKeys(host)
        return keys

    def _now_arg(self, now: float | None) -> str:
        return now_arg(now, self._clock)

    # -- registration and reading, delegated to the slot store (the documented sender-side calls) -----------

    def register_host(self, host: str, primary_ip: str, budget: tuple[int, int] = BUDGET) -> None:
        """Register (or update) a host: see `SlotStore.register_host`."""
        self.slots.register_host(host, primary_ip, budget)

    def put_address(self, host: str, slot: int, *, private_ip: str, public_ip: str | None = None,
                    allocation_id: str | None = None, spent: bool = False) -> Placement:
        """Place an address in a slot, unfenced: see `SlotStore.put_address`."""
        return self.slots.put_address(host, slot, private_ip=private_ip, public_ip=public_ip,
                                      allocation_id=allocation_id, spent=spent)

    def hosts(self) -> list[str]:
        """Every registered host, sorted."""
        return self.slots.hosts()

    def status(self, host: str | None = None, now: float | None = None) -> list[HostStatus]:
        """State of one host or of every host: see `SlotStore.status`."""
        return self.slots.status(host, now)

    def status_of(self, hosts: Sequence[str], now: float | None = None) -> list[HostStatus]:
        """State of each of `hosts`, in order, in a few round trips however many: see `SlotStore.status_of`."""
        return self.slots.status_of(hosts, now)

    def retire_blamed(self, lease: Lease) -> bool:
        """A receiving server refused the send because of `lease`'s address (its reputation, a block list): use up
        its slot's budget now (spend.lua, one FCALL the sender's ACL user may run), so the address takes no new
        lease and goes the way of every spent slot: reaped, rotated, parked, released and then denied for 7 days
        (the reaper's denylist; the rotator draws neither a parked nor a denied address). A slot that holds
        another address by now (rotated since the lease) is spared: that one is innocent.

        True when the leased address takes no new lease now (spent by this call, or before it, or rotated out);
        False when it may: a fallback lease (the host's primary address is not the pool's to retire), or Redis
        trouble (logged). Never raises."""
        import redis  # late: only a blamed send needs it

        if lease.fallback or lease.slot is None:
            log.warning("ippool: a receiving server blamed %s's primary address %s, which is not the pool's to "
                        "retire: check its reputation", lease.host, lease.source_ip)
            return False
        keys = self._keys(lease.host)
        try:
            spent = int(self._scripts.spend(keys=[keys.slot(lease.slot), keys.used(lease.slot)],
                                            args=[lease.generation if lease.generation is not None else ""]))
        except redis.RedisError as exc:
            log.warning("ippool: could not retire %s slot %s (%s), blamed by a receiving server: %s", lease.host,
                        lease.slot, lease.public_ip, exc)
            return False
        if spent:
            log.warning("ippool: retired %s slot %s (%s): a receiving server blamed the address; it rotates when "
                        "its live leases end", lease.host, lease.slot, lease.public_ip or lease.source_ip)
        return True
