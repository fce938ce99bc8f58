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


def test_a_ctrl_c_the_kernel_hands_to_another_thread_waits_for_the_blocks_end_too() -> None:
    """The kernel gives a signal sent to the process to a thread that does not block it; Python then runs the
    handler on the main thread, inside the block. A process with a second thread (a pool, an xdist worker's I/O)
    raised KeyboardInterrupt mid-block before the block's handlers only noted the signal."""
    done = threading.Event()
    bystander = threading.Thread(target=done.wait)  # started before the block: SIGINT is not in its mask
    bystander.start()
    reached_the_end = False
    try:
        with pytest.raises(KeyboardInterrupt), signals.held():
            os.kill(os.getpid(), signal.SIGINT)
            assert done.wait(0.2) is False  # time for the kernel to deliver it and Python to run its handler
            reached_the_end = True
    finally:
        done.set()
        bystander.join()
    assert reached_the_end


def test_a_stop_in_the_block_reaches_the_handler_that_was_there_once_it_ends() -> None:
    seen: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda number, _frame: seen.append(number))
    try:
        with signals.held():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            assert done_nothing(seen)
        assert seen == [signal.SIGTERM]  # held, then delivered once, as the kernel merges a pending signal
    finally:
        signal.signal(signal.SIGTERM, before)


def done_nothing(seen: list[int]) -> bool:
    for _ in range(1000):  # bytecode runs on: a handler not held would have run by now
        pass
    return not seen


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
