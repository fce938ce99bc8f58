"""The region's Elastic IP quota and how many EIPs the account holds there, as the worker last read them, kept in
Redis for the exporter.

Reading AWS at every scrape would spend Service Quotas' small request rate and a DescribeAddresses on every scrape
of every exporter. The worker talks to AWS anyway: it reads both numbers every few minutes and records them with
the time of the reading, so the exporter stays Redis-only, and a reading that stops arriving shows as old (its
timestamp is exported) rather than as a number that still looks healthy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ippool.keys import EIP_QUOTA_KEY
from ippool.status import text

if TYPE_CHECKING:  # the exporter reads readings without importing boto3
    from ippool.aws.quotas import QuotaReader


@dataclass(frozen=True)
class QuotaReading:
    """One reading of a region: the applied EIP quota, the EIPs held (ours or not: all count), when (epoch s)."""

    region: str
    quota: int
    allocated: int
    read_at: float

    @property
    def headroom(self) -> int:
        """Addresses the account may still allocate in the region."""
        return self.quota - self.allocated


class QuotaReadings:
    """The last reading per region, in one Redis hash: region -> "<quota>|<allocated>|<read at, epoch s>"."""

    def __init__(self, client: Any, clock: Callable[[], float]) -> None:
        self._client = client
        self._clock = clock

    def take(self, aws: QuotaReader) -> QuotaReading:
        """Read the quota and the EIPs held from AWS now and record them; an `IppoolError` (nothing recorded) when
        either could not be read, so the previous reading stays and ages."""
        reading = QuotaReading(aws.region, aws.eip_quota(), aws.count_region_addresses(), self._clock())
        self._client.hset(EIP_QUOTA_KEY, reading.region,
                          f"{reading.quota}|{reading.allocated}|{reading.read_at:.3f}")
        return reading

    def all(self) -> list[QuotaReading]:
        """Every region's last reading, by region."""
        readings = []
        for region, value in self._client.hgetall(EIP_QUOTA_KEY).items():
            quota, allocated, read_at = text(value).split("|")
            readings.append(QuotaReading(text(region), int(quota), int(allocated), float(read_at)))
        return sorted(readings, key=lambda reading: reading.region)
