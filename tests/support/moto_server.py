"""moto's server mode on a free loopback port, for tests that run the CLI (in this process or another)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.net import free_port


@contextmanager
def moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer  # imported late: moto is heavy

    # Its access log (werkzeug, INFO) is no one's output: a CLI run in this process would find it on its stderr.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
