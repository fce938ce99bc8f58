"""The loopback redirect listener of `mailbox authorize`: a silent local client cannot hold it past --timeout, and
a state that is not one we could have sent is answered 400, never a traceback."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from sender.oauth.loopback import LoopbackFlowFailed, _Handler, _Listener, _wait


def _run_wait(listener: _Listener, timeout_s: float) -> tuple[threading.Thread, list[BaseException]]:
    raised: list[BaseException] = []

    def wait() -> None:
        try:
            _wait(listener, timeout_s)
        except BaseException as exc:  # the test reads what ended the wait
            raised.append(exc)
    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread, raised


@pytest.mark.service  # a real listener and a real client socket
def test_a_silent_connection_does_not_hold_the_flow_past_its_timeout() -> None:
    with _Listener(("127.0.0.1", 0), _Handler) as listener:
        started = time.monotonic()
        thread, raised = _run_wait(listener, 1.0)
        with socket.create_connection(("127.0.0.1", listener.server_address[1])):  # connects and says nothing
            thread.join(4.0)
            assert not thread.is_alive(), "the listener waited on a silent client past --timeout"
        assert time.monotonic() - started < 3.0
        assert isinstance(raised[0], LoopbackFlowFailed)


@pytest.mark.service  # a real listener and a real HTTP request
def test_a_non_ascii_state_is_answered_400_and_not_taken() -> None:
    with _Listener(("127.0.0.1", 0), _Handler) as listener:
        thread, raised = _run_wait(listener, 2.0)
        port = listener.server_address[1]
        with pytest.raises(urllib.error.HTTPError) as answered:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/?code=c&state=%C3%A9t%C3%A9", timeout=3)
        assert answered.value.code == 400
        thread.join(4.0)
        assert listener.redirect is None
        assert isinstance(raised[0], LoopbackFlowFailed)
