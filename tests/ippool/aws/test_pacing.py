"""The client-side token bucket and the jittered backoff, driven by a fake clock (nothing really sleeps)."""

from __future__ import annotations

import random

import pytest

from ippool.aws.models import pool_tags
from ippool.aws.pacing import EIP_BUCKET_CAPACITY, EIP_BUCKET_REFILL_PER_S, Backoff, TokenBucket
from ippool.states import EipState
from tests.support.aws import AdapterFactory, SleepRecorder
from tests.support.clock import FakeClock


def test_bucket_matches_aws_eip_bucket() -> None:
    assert (EIP_BUCKET_CAPACITY, EIP_BUCKET_REFILL_PER_S) == (50, 5)


def test_full_bucket_gives_a_burst_of_50_without_waiting(clock: FakeClock, sleeper: SleepRecorder) -> None:
    bucket = TokenBucket(clock=clock, sleep=sleeper)
    assert [bucket.acquire() for _ in range(50)] == [0.0] * 50
    assert sleeper.waits == []


def test_empty_bucket_waits_for_the_refill_rate(clock: FakeClock, sleeper: SleepRecorder) -> None:
    bucket = TokenBucket(clock=clock, sleep=sleeper)
    start = clock()
    for _ in range(50 + 10):
        bucket.acquire()
    # 10 calls past the burst at 5 tokens/s: 2 seconds of (fake) waiting, in 0.2 s steps.
    assert clock() - start == pytest.approx(2.0)
    assert sleeper.waits == pytest.approx([0.2] * 10)


def test_bucket_refills_while_idle_up_to_capacity(clock: FakeClock, sleeper: SleepRecorder) -> None:
    bucket = TokenBucket(clock=clock, sleep=sleeper)
    for _ in range(50):
        bucket.acquire()
    clock.advance(1.0)
    assert bucket.tokens == pytest.approx(5.0)
    clock.advance(3600)
    assert bucket.tokens == 50


def test_clock_stepping_back_mints_no_tokens(clock: FakeClock, sleeper: SleepRecorder) -> None:
    bucket = TokenBucket(clock=clock, sleep=sleeper)
    for _ in range(50):
        bucket.acquire()
    clock.advance(-30)
    assert bucket.tokens == 0


@pytest.mark.usefixtures("moto_aws")
def test_adapter_paces_only_the_mutating_eip_calls(make_adapter: AdapterFactory, sleeper: SleepRecorder,
                                                   clock: FakeClock) -> None:
    adapter = make_adapter()
    start = clock()
    addresses = [adapter.allocate_address(pool_tags("p", "h", n, EipState.INCOMING)) for n in range(50)]
    for address in addresses:  # CreateTags and DescribeAddresses are not in AWS's EIP bucket: free
        adapter.create_tags(address.allocation_id, {"sendhost:state": EipState.ACTIVE})
    adapter.describe_pool_addresses("p")
    assert sleeper.waits == []
    for address in addresses[:5]:  # five more bucket calls with the bucket empty: one second at 5/s
        adapter.release_address(address.allocation_id)
    assert clock() - start == pytest.approx(1.0)


def test_adapters_sharing_a_bucket_share_its_budget(make_adapter: AdapterFactory, clock: FakeClock,
                                                    sleeper: SleepRecorder) -> None:
    bucket = TokenBucket(clock=clock, sleep=sleeper)
    first, second = make_adapter(bucket=bucket), make_adapter(bucket=bucket)
    assert first.bucket is second.bucket
    for _ in range(50):
        first.bucket.acquire()
    assert second.bucket.tokens == 0


def test_backoff_jitter_stays_within_its_exponential_ceiling() -> None:
    backoff = Backoff(base_s=0.5, cap_s=20.0, max_attempts=8)
    rng = random.Random(1)
    for retry in range(backoff.max_attempts):
        ceiling = min(20.0, 0.5 * 2 ** retry)
        assert backoff.ceiling(retry) == ceiling
        delays = [backoff.delay(retry, rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) - min(delays) > ceiling / 2  # jittered: spread across the range, not one value


def test_backoff_is_repeatable_for_a_seed() -> None:
    backoff = Backoff()
    assert [backoff.delay(n, random.Random(3)) for n in range(5)] == \
        [backoff.delay(n, random.Random(3)) for n in range(5)]


@pytest.mark.parametrize("kwargs", [{"max_attempts": 0}, {"base_s": 0}, {"base_s": 2.0, "cap_s": 1.0}])
def test_backoff_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)  # type: ignore[arg-type]


def test_threads_sharing_a_bucket_each_reserve_a_distinct_token() -> None:
    # The clock stands still, so nothing refills: the k-th token past the burst must wait exactly k/5 s.
    # A lost update between threads would show up as two callers given the same wait (or none).
    import threading

    waits: list[float] = []
    waits_lock = threading.Lock()
    bucket = TokenBucket(clock=lambda: 1_796_000_000.0, sleep=lambda s: None)

    def worker() -> None:
        for _ in range(25):
            waited = bucket.acquire()
            with waits_lock:
                waits.append(waited)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(round(w, 6) for w in waits) == [0.0] * 50 + [round(k / 5, 6) for k in range(1, 151)]
