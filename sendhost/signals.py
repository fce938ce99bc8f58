"""A block that a Ctrl-C (or a stop) does not cut in half: SIGINT and SIGTERM wait until it ends.

For what must be whole or absent: a ledger transaction of several statements (a KeyboardInterrupt while a
statement runs leaves the connection busy, so its rollback fails and psycopg warns), a pair of files written
together. The signals are held on the main thread, where Python runs their handlers; a block on another thread
holds nothing (its signals go to the main thread anyway).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

HELD = frozenset({signal.SIGINT, signal.SIGTERM})


@contextmanager
def held() -> Iterator[set[int | signal.Signals]]:
    """Hold SIGINT and SIGTERM for the block (delivered when it ends); yields the mask the block ends with."""
    if threading.current_thread() is not threading.main_thread():
        yield signal.pthread_sigmask(signal.SIG_BLOCK, set())
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield before
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
