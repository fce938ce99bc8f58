"""A block that a Ctrl-C (or a stop) does not cut in half: SIGINT and SIGTERM wait until it ends.

For what must be whole or absent: a ledger transaction of several statements (a KeyboardInterrupt while a
statement runs leaves the connection busy, so its rollback fails and psycopg warns), a pair of files written
together. Python runs signal handlers on the main thread only, so a block on another thread holds nothing (its
signals go to the main thread anyway).

Two things hold a signal, because either alone leaks. The main thread's mask keeps the signal from it (and a child
started in the block inherits the mask until it sets its own); but the kernel hands a signal sent to the process to
any thread that does not block it, and Python then runs the handler on the main thread all the same, inside the
block. So the block's handlers also only note each signal, and the previous handlers get it when the block ends.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

HELD = frozenset({signal.SIGINT, signal.SIGTERM})

Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


@contextmanager
def held() -> Iterator[set[int | signal.Signals]]:
    """Hold SIGINT and SIGTERM for the block (delivered when it ends); yields the mask the block ends with."""
    if threading.current_thread() is not threading.main_thread():
        yield signal.pthread_sigmask(signal.SIG_BLOCK, set())
        return
    noted: list[int] = []
    before: dict[int, Handler] = {number: signal.getsignal(number) for number in HELD}
    for number in before:
        signal.signal(number, lambda received, _frame: noted.append(received))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield mask
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # one pending now runs the noting handler
        for previous, handler in before.items():
            # None: a handler not set from Python (none is, here); the default is what it stood for
            signal.signal(previous, signal.SIG_DFL if handler is None else handler)
        for received in dict.fromkeys(noted):
            signal.raise_signal(received)
