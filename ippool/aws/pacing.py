"""Pacing for AWS calls: a client-side token bucket matching EC2's, and jittered exponential backoff.

EC2 throttles Allocate/Associate/Disassociate/Release/ModifyAddressAttribute from one bucket per account and
region (50 tokens, refilled at 5 per second). Spending our own tokens first means a burst of rotations slows
down here instead of tripping `RequestLimitExceeded` for every other tool in the account. Clock, sleep and
randomness are injected so tests drive time instead of waiting.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass

# AWS's published bucket for the mutating Elastic IP actions.
EIP_BUCKET_CAPACITY = 50.0
EIP_BUCKET_REFILL_PER_S = 5.0


class TokenBucket:
    """A token bucket: `acquire()` takes one token, sleeping (via the injected `sleep`) until one has refilled.

    Starts full, like AWS's. Safe to share between threads of one process (the rotator's pool of workers).
    """

    def __init__(self, clock: Callable[[], float], sleep: Callable[[float], None],
                 capacity: float = EIP_BUCKET_CAPACITY, refill_per_s: float = EIP_BUCKET_REFILL_PER_S) -> None:
        if capacity < 1 or refill_per_s <= 0:
            raise ValueError("a token bucket needs capacity >= 1 and a positive refill rate")
        self._clock = clock
        self._sleep = sleep
        self.capacity = capacity
        self.refill_per_s = refill_per_s
        self._tokens = capacity
        self._updated = clock()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._updated)  # a clock that steps back must not mint tokens
        self._tokens = min(self.capacity, self._tokens + elapsed * self.refill_per_s)
        self._updated = now

    @property
    def tokens(self) -> float:
        """Tokens available now (after refill); 0 while callers are still waiting on reserved ones."""
        with self._lock:
            self._refill()
            return max(0.0, self._tokens)

    def acquire(self) -> float:
        """Take one token; return how long we slept waiting for it (0.0 when one was there).

        The token is reserved at once (the balance may go negative) and the caller sleeps off its share of the
        debt, so concurrent callers queue in order, and float rounding of a large clock can never spin.
        """
        with self._lock:
            self._refill()
            self._tokens -= 1.0
            wait_s = -self._tokens / self.refill_per_s if self._tokens < 0 else 0.0
        if wait_s > 0:
            self._sleep(wait_s)
        return wait_s


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter: attempt n waits uniform(0, min(cap_s, base_s * 2**n)).

    Full jitter spreads several rotators that were throttled at the same instant, so they do not retry in step.
    """

    base_s: float = 0.5
    cap_s: float = 20.0
    max_attempts: int = 6

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base_s <= 0 or self.cap_s < self.base_s:
            raise ValueError("backoff needs max_attempts >= 1 and 0 < base_s <= cap_s")

    def ceiling(self, retry: int) -> float:
        """Upper bound of the wait before retry number `retry` (0 for the first retry)."""
        return min(self.cap_s, self.base_s * (2 ** retry))

    def delay(self, retry: int, rng: random.Random) -> float:
        """A jittered wait before retry number `retry`, in [0, ceiling(retry)]."""
        return rng.uniform(0.0, self.ceiling(retry))
