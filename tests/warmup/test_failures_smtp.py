"""Failures against a real SMTP server (aiosmtpd on loopback), classified at the stage the client was in.

The client below tracks the stage the way a sender must: it sends DATA and the body itself, and only once the
end-of-data dot is out does it count as AFTER_DATA. The slow server then proves why a timeout there is `unknown`:
it accepted the message after the client gave up, so a retry would have sent it twice.
"""

from __future__ import annotations

import asyncio
import smtplib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from tests.support.net import free_port
from warmup.failures import FailureClass, SmtpStage, classify_error

MESSAGE = b"From: a@example.com\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nhello\r\n"


class Recording:
    """A server handler: records accepted messages; `data_delay` stalls the final reply after the dot was read."""

    def __init__(self, data_delay: float = 0.0, rcpt_reply: str | None = None, drop_after_data: bool = False) -> None:
        self.data_delay = data_delay
        self.rcpt_reply = rcpt_reply
        self.drop_after_data = drop_after_data
        self.accepted: list[bytes] = []

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,
                          rcpt_options: list[str]) -> str:
        if self.rcpt_reply:
            return self.rcpt_reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        # Like a real MTA: the message is committed first, then the reply goes out (here, too late to be read).
        self.accepted.append(envelope.original_content)
        await asyncio.sleep(self.data_delay)
        if self.drop_after_data:
            server.transport.close()
        return "250 2.0.0 queued"


@contextmanager
def smtp_server(handler: Recording) -> Iterator[int]:
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port, ready_timeout=10)
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


def submit(port: int, timeout: float) -> tuple[SmtpStage, BaseException | None]:
    """Send one message step by step; return the stage reached and the error, if any."""
    stage = SmtpStage.CONNECT
    try:
        with smtplib.SMTP("127.0.0.1", port, timeout=timeout) as smtp:
            stage = SmtpStage.HELO
            smtp.ehlo()
            stage = SmtpStage.MAIL
            smtp.mail("a@example.com")
            stage = SmtpStage.RCPT
            code, message = smtp.rcpt("b@example.com")
            if code >= 400:
                raise smtplib.SMTPRecipientsRefused({"b@example.com": (code, message)})
            stage = SmtpStage.DATA
            code, message = smtp.docmd("DATA")
            if code != 354:
                raise smtplib.SMTPDataError(code, message)
            smtp.send(MESSAGE + b".\r\n")
            stage = SmtpStage.AFTER_DATA  # the dot is out: from here the server may have the message
            code, message = smtp.getreply()
            if code >= 400:
                raise smtplib.SMTPDataError(code, message)
    except (smtplib.SMTPException, OSError) as error:
        return stage, error
    return stage, None


def _wait_for(predicate: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.mark.service
def test_a_timeout_after_the_dot_is_unknown_and_the_message_did_arrive() -> None:
    handler = Recording(data_delay=1.0)
    with smtp_server(handler) as port:
        stage, error = submit(port, timeout=0.3)
        # smtplib reports the read timeout as a disconnect ("Connection unexpectedly closed: timed out")
        assert stage is SmtpStage.AFTER_DATA and isinstance(error, smtplib.SMTPServerDisconnected)
        assert "timed out" in str(error)
        failure = classify_error(error, stage)
        assert failure is FailureClass.UNKNOWN
        assert not failure.response.retry and not failure.response.frees_slot
        # The server had the message when the client gave up: a retry would have delivered it twice.
        assert _wait_for(lambda: len(handler.accepted) == 1, 5.0)


@pytest.mark.service
def test_a_dropped_connection_after_the_dot_is_unknown() -> None:
    handler = Recording(drop_after_data=True)
    with smtp_server(handler) as port:
        stage, error = submit(port, timeout=5.0)
    assert stage is SmtpStage.AFTER_DATA and isinstance(error, smtplib.SMTPServerDisconnected)
    assert classify_error(error, stage) is FailureClass.UNKNOWN
    assert len(handler.accepted) == 1


@pytest.mark.service
def test_a_refused_recipient_is_classified_from_the_servers_reply() -> None:
    handler = Recording(rcpt_reply="550 5.1.1 <b@example.com>: Recipient address rejected: User unknown")
    with smtp_server(handler) as port:
        stage, error = submit(port, timeout=5.0)
    assert stage is SmtpStage.RCPT and error is not None
    assert classify_error(error, stage) is FailureClass.RECIPIENT
    assert handler.accepted == []


@pytest.mark.service
def test_a_refused_connection_is_transient() -> None:
    stage, error = submit(free_port(), timeout=2.0)  # nothing listens there
    assert stage is SmtpStage.CONNECT and isinstance(error, ConnectionRefusedError)
    assert classify_error(error, stage) is FailureClass.TRANSIENT
