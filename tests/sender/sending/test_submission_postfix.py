"""A wrong password at a real Postfix (Dovecot SASL): exactly one failed AUTH per session in Postfix's log."""

from __future__ import annotations

import smtplib
import ssl

import pytest

from sender.sending.message import build_message
from sender.sending.submission import ResultKind, Stage, submit
from sendhost.model import Credential, Submission
from tests.support.postfix import postfix_submission

BOX = "box@sender.example"


def _settings(host: str, port: int, ca_file: str) -> Submission:
    return Submission(host, port, "starttls", BOX, Credential(BOX), ca_file=ca_file)


def _message(n: int) -> object:
    return build_message(mailbox=BOX, to=f"lead{n}@rcpt.example", subject="Hi", text="Hello",
                         message_id=f"<p{n}@sender.example>", unsubscribe="https://u.example.test/u/abc")


@pytest.mark.service
def test_a_wrong_password_costs_one_failed_login_per_session_at_postfix() -> None:
    with postfix_submission({BOX: "right"}) as server:
        before = len(server.sessions())
        settings = _settings(server.host, server.port, str(server.ca_file))
        results = [submit(settings, "wrong", _message(n), source_ip=None, timeout_s=10) for n in range(3)]
        sessions = server.sessions(at_least=before + 3)[before:]
        log = server.log()
    assert all((r.kind, r.stage, r.code) == (ResultKind.REJECTED, Stage.AUTH, 535) for r in results), results
    assert len(sessions) == 3, log
    # one AUTH tried in each session (PLAIN, the best Postfix offers), refused, and the session ended
    assert [(s.failed_logins, s.auth) for s in sessions] == [(("PLAIN",), "0/1")] * 3, log


@pytest.mark.service
def test_the_right_password_submits_through_postfix() -> None:
    with postfix_submission({BOX: "right"}) as server:
        before = len(server.sessions())
        result = submit(_settings(server.host, server.port, str(server.ca_file)), "right", _message(0),
                        source_ip=None, timeout_s=10)
        (session,) = server.sessions(at_least=before + 1)[before:]
    assert result.kind is ResultKind.ACCEPTED, result
    assert (session.failed_logins, session.auth) == ((), "1")


@pytest.mark.service
def test_smtplib_login_would_cost_two_failed_logins_per_session() -> None:
    """The count above would see the old way: `smtplib.SMTP.login` walks PLAIN then LOGIN after a 535."""
    with postfix_submission({BOX: "right"}) as server:
        before = len(server.sessions())
        client = smtplib.SMTP(server.host, server.port, timeout=10)
        client.starttls(context=ssl.create_default_context(cafile=str(server.ca_file)))
        with pytest.raises(smtplib.SMTPAuthenticationError):
            client.login(BOX, "wrong")
        client.close()
        (session,) = server.sessions(at_least=before + 1)[before:]
    assert session.failed_logins == ("PLAIN", "LOGIN")
