"""sendhost.signals: a Ctrl-C or a stop that lands inside a held block is delivered when the block ends, never in it."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from sendhost import signals

pytestmark = pytest.mark.unit


def test_a_ctrl_c_inside_the_block_waits_for_its_end() -> None:
    reached_the_end = False
    with pytest.raises(KeyboardInterrupt), signals.held():
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # bytecode runs on: a handler not held would have raised by now
            pass
        reached_the_end = True
    assert reached_the_end


def test_the_mask_is_as_it_was_after_the_block() -> None:
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    with signals.held() as mask:
        assert mask == before
        assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) >= signals.HELD
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before


def test_on_another_thread_it_holds_nothing() -> None:
    seen: list[set[int | signal.Signals]] = []

    def run() -> None:
        with signals.held():
            seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, set()))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert not signals.HELD & seen[0]
