"""One submission against real TLS servers: STARTTLS (587) and implicit TLS (465), certificates verified,
password and XOAUTH2 authentication, the source address bound, the stage of a failure known."""

from __future__ import annotations

import email
from pathlib import Path

import pytest

from sender.sending.message import build_message
from sender.sending.submission import ResultKind, Stage, password_mechanism, submit
from sendhost.model import Credential, Submission
from tests.support.submission import Scripted, submission_server


def _message(to: str = "lead@rcpt.example") -> email.message.EmailMessage:
    return build_message(mailbox="box@sender.example", to=to, subject="Hi", text=".leading dot\nHello",
                         message_id="<k1@sender.example>", unsubscribe="https://u.example.test/u/abc")


@pytest.mark.service
@pytest.mark.parametrize("implicit_tls", [False, True], ids=["starttls-587", "tls-465"])
def test_submits_from_the_source_address(tmp_path: Path, implicit_tls: bool) -> None:
    with submission_server(tmp_path, {"box@sender.example": "pw"}, implicit_tls=implicit_tls) as server:
        settings = Submission(server.host, server.port, "tls" if implicit_tls else "starttls", "box@sender.example",
                              Credential("box@sender.example"), ca_file=str(server.ca_file))
        result = submit(settings, "pw", _message(), source_ip="127.0.0.7", timeout_s=5)
        assert result.kind is ResultKind.ACCEPTED, result
        (received,) = server.recorder.received
    assert received.peer == "127.0.0.7"
    assert received.message["Message-ID"] == "<k1@sender.example>"
    assert received.message.get_payload(decode=True).decode().startswith(".leading dot")  # dot-stuffing undone


@pytest.mark.service
@pytest.mark.parametrize("exclude", [(), ("PLAIN",)], ids=["plain-and-login-offered", "login-only"])
def test_a_wrong_password_costs_one_failed_login_per_session(tmp_path: Path, exclude: tuple[str, ...]) -> None:
    """smtplib's login() walks PLAIN then LOGIN after a 535: two failed logins per session, which is how a provider
    locks an account. One mechanism, the best the server offers, and the refusal ends the session."""
    with submission_server(tmp_path, {"box@sender.example": "pw"}, exclude_mechanisms=exclude) as server:
        settings = Submission(server.host, server.port, "starttls", "box@sender.example",
                              Credential("box@sender.example"), ca_file=str(server.ca_file))
        results = [submit(settings, "wrong", _message(), source_ip=None, timeout_s=5) for _ in range(3)]
        server.recorder.wait_until_idle()
        logins = list(server.recorder.logins)
    assert all((r.kind, r.stage, r.code) == (ResultKind.REJECTED, Stage.AUTH, 535) for r in results), results
    sessions = [session for session, _, _, _ in logins]
    assert len(logins) == 3 and len(set(sessions)) == 3  # one failed AUTH in each of the three sessions
    assert {mechanism for _, mechanism, _, _ in logins} == {"LOGIN" if exclude else "PLAIN"}
    assert not any(succeeded for *_, succeeded in logins)


def test_one_password_mechanism_from_the_offer() -> None:
    assert password_mechanism("LOGIN PLAIN XOAUTH2") == "PLAIN"
    assert password_mechanism("login") == "LOGIN"
    assert password_mechanism("CRAM-MD5 XOAUTH2") is None
    assert password_mechanism("") is None


@pytest.mark.service
def test_a_certificate_that_does_not_verify_is_refused(tmp_path: Path) -> None:
    with submission_server(tmp_path, {"box@sender.example": "pw"}) as server:
        settings = Submission(server.host, server.port, "starttls", "box@sender.example",
                              Credential("box@sender.example"))  # no ca_file
        result = submit(settings, "pw", _message(), source_ip=None, timeout_s=5)
        assert not server.recorder.received
    assert (result.kind, result.stage) == (ResultKind.CERTIFICATE, Stage.TLS)
    assert "does not verify" in result.text and "ca_file" in result.text


@pytest.mark.service
def test_xoauth2(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("ya29.fresh\n")
    with submission_server(tmp_path, {"box@sender.example": "token:ya29.fresh"}) as server:
        settings = Submission(server.host, server.port, "starttls", "box@sender.example",
                              Credential("box@sender.example", auth="xoauth2", token_file=str(token)),
                              ca_file=str(server.ca_file))
        secret = settings.credential.secret
        assert submit(settings, secret(), _message(), source_ip=None, timeout_s=5).kind is ResultKind.ACCEPTED
        token.write_text("ya29.expired\n")  # re-read at each connection
        refused = submit(settings, secret(), _message(), source_ip=None, timeout_s=5)
    assert (refused.kind, refused.stage, refused.code) == (ResultKind.REJECTED, Stage.AUTH, 535)


@pytest.mark.service
def test_stage_of_failures(tmp_path: Path) -> None:
    with submission_server(tmp_path, {"box@sender.example": "pw"}) as server:
        settings = Submission(server.host, server.port, "starttls", "box@sender.example",
                              Credential("box@sender.example"), ca_file=str(server.ca_file))
        server.recorder.script["gone@rcpt.example"] = Scripted("rcpt", "550 5.1.1 no such user")
        server.recorder.script["slow@rcpt.example"] = Scripted("hang", hang_s=2.0)
        gone = submit(settings, "pw", _message("gone@rcpt.example"), source_ip=None, timeout_s=5)
        slow = submit(settings, "pw", _message("slow@rcpt.example"), source_ip=None, timeout_s=0.5)
        wrong = submit(settings, "nope", _message(), source_ip=None, timeout_s=5)
    assert (gone.kind, gone.stage, gone.code) == (ResultKind.REJECTED, Stage.RCPT, 550)
    assert (slow.kind, slow.stage, slow.unknown) == (ResultKind.NO_REPLY, Stage.AFTER_DATA, True)
    assert (wrong.kind, wrong.stage, wrong.code) == (ResultKind.REJECTED, Stage.AUTH, 535)
    nowhere = Submission("127.0.0.1", 1, "starttls", "x", Credential("x"))
    refused = submit(nowhere, "pw", _message(), source_ip=None, timeout_s=2)
    assert (refused.kind, refused.stage, refused.unknown) == (ResultKind.NO_REPLY, Stage.CONNECT, False)


def test_rcpt_to_is_the_rows_canonical_address_not_a_re_parse_of_the_to_header() -> None:
    from email.message import EmailMessage
    from email.policy import compat32

    from sender.sending.submission import SubmissionSession

    class Client:
        def __init__(self) -> None:
            self.recipients: list[str] = []

        def mail(self, sender: str) -> tuple[int, bytes]:
            return 250, b"ok"

        def rcpt(self, recipient: str) -> tuple[int, bytes]:
            self.recipients.append(recipient)
            return 550, b"stop here"

        def close(self) -> None:
            pass

        def quit(self) -> None:
            pass

    message = EmailMessage(policy=compat32)
    message["From"] = "sales@mail.example"
    message["To"] = "=?utf-8?q?eve?=@rcpt.example"  # a header a parser decodes to another address
    client = Client()
    SubmissionSession(client).hand_over(message, "x=3fu@rcpt.example")  # type: ignore[arg-type]
    assert client.recipients == ["x=3fu@rcpt.example"]
