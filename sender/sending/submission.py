"""One SMTP submission, in its own authenticated TLS session, from a given source address; knowing its stage.

The stage matters: a timeout or a dropped connection *after the end of DATA* means the server may have the
message, so the outcome is unknown (never retried); before it, nothing was handed over.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import re
import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from enum import StrEnum

from sender.oauth.sasl import Mechanism, choose, error_answer, initial_response
from sender.sending.message import SENDING_POLICY
from sendhost.model import Submission


class Stage(StrEnum):
    CONNECT = "connect"
    TLS = "tls"
    AUTH = "auth"
    MAIL = "mail"
    RCPT = "rcpt"
    DATA = "data"  # DATA command sent, message being transferred: the server has nothing yet
    AFTER_DATA = "after_data"  # the end-of-data dot was sent: the server may have accepted it
    DONE = "done"


# The text of a send that could not bind its source address: no interface of this machine has it (the agent runs
# elsewhere than the host whose addresses it was given). `sender run` looks for it to say where the address came from.
NOT_A_LOCAL_ADDRESS = "no network interface of this machine has that address"


class ResultKind(StrEnum):
    ACCEPTED = "accepted"  # 250 after the end of data
    REJECTED = "rejected"  # an SMTP error reply at some stage
    NO_REPLY = "no_reply"  # timeout, refused or dropped connection at some stage
    CERTIFICATE = "certificate"  # the server's certificate did not verify


@dataclass(frozen=True)
class Result:
    kind: ResultKind
    stage: Stage
    code: int | None = None
    text: str = ""

    @property
    def unknown(self) -> bool:
        """Did we lose the server after handing the message over? Then nobody knows whether it left."""
        return self.kind is ResultKind.NO_REPLY and self.stage is Stage.AFTER_DATA

    def __str__(self) -> str:
        code = f"{self.code} " if self.code is not None else ""
        return f"{self.kind.value} at {self.stage.value}: {code}{self.text}".strip()


@functools.lru_cache(maxsize=32)
def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Certificates verified against the system store, or `ca_file` for a private CA. Built once per CA file:
    loading the store costs more than a TLS handshake."""
    return ssl.create_default_context(cafile=ca_file)


def _text(reply: bytes | str) -> str:
    return (reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)).replace("\n", " ")


class SubmissionSession:
    """An open, authenticated submission session: nothing handed over yet. `hand_over` once, or `close`."""

    def __init__(self, client: smtplib.SMTP) -> None:
        self._client: smtplib.SMTP | None = client

    def hand_over(self, message: EmailMessage, address: str | None = None) -> Result:
        """MAIL, RCPT, DATA and the end of data; never raises for SMTP trouble. Closes the session. RCPT TO is
        `address` (the row's canonical address, the agent's), not a re-parse of the To header; without it, To."""
        client = self._client
        assert client is not None, "a session hands over one message"
        stage = Stage.MAIL
        try:
            code, reply = client.mail(str(message["From"]))
            if code != 250:
                return Result(ResultKind.REJECTED, stage, code, _text(reply))
            stage = Stage.RCPT
            code, reply = client.rcpt(address if address is not None else str(message["To"]))
            if code not in (250, 251):
                return Result(ResultKind.REJECTED, stage, code, _text(reply))
            stage = Stage.DATA
            code, reply = client.docmd("DATA")
            if code != 354:
                return Result(ResultKind.REJECTED, stage, code, _text(reply))
            payload = re.sub(rb"(?m)^\.", b"..", message.as_bytes(policy=SENDING_POLICY))
            if not payload.endswith(b"\r\n"):
                payload += b"\r\n"
            # One write with the end-of-data dot: two small writes would stall on Nagle and delayed ACK (~40 ms).
            # If it raises, the dot did not reach the kernel whole: the server cannot have accepted the message.
            client.send(payload + b".\r\n")
            stage = Stage.AFTER_DATA
            code, reply = client.getreply()
            if code == -1:  # smtplib's "connection closed" marker, not a server reply
                return Result(ResultKind.NO_REPLY, stage, None, _text(reply))
            if code != 250:
                return Result(ResultKind.REJECTED, stage, code, _text(reply))
            with contextlib.suppress(smtplib.SMTPException, OSError):  # accepted is accepted; the goodbye is not
                client.quit()
            return Result(ResultKind.ACCEPTED, Stage.DONE, code, _text(reply))
        except smtplib.SMTPResponseException as exc:  # 421 anywhere
            return Result(ResultKind.REJECTED, stage, exc.smtp_code, _text(exc.smtp_error))
        except (smtplib.SMTPException, OSError) as exc:  # timed out, dropped
            return Result(ResultKind.NO_REPLY, stage, None, f"{type(exc).__name__}: {exc}")
        finally:
            self.close()

    def close(self) -> None:
        """End the session without handing anything over (QUIT, quietly)."""
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(smtplib.SMTPException, OSError):
                client.quit()
            with contextlib.suppress(OSError):
                client.close()


def open_session(server: Submission, secret: str, *, source_ip: str | None, timeout_s: float,
                 context: ssl.SSLContext | None = None) -> SubmissionSession | Result:
    """Connect from `source_ip` (None: the OS's default), secure the connection (certificate verified) and
    authenticate; a SubmissionSession, or the Result of the stage that failed. Never raises for SMTP trouble."""
    stage = Stage.CONNECT
    source = (source_ip, 0) if source_ip else None
    context = context or tls_context(server.ca_file)
    client: smtplib.SMTP | None = None
    try:
        if server.security == "tls":
            stage = Stage.TLS
            client = smtplib.SMTP_SSL(server.host, server.port, timeout=timeout_s, source_address=source,
                                      context=context)
        else:
            client = smtplib.SMTP(server.host, server.port, timeout=timeout_s, source_address=source)
            client.ehlo()
            if server.security == "starttls":
                stage = Stage.TLS
                client.starttls(context=context)
                client.ehlo()
        stage = Stage.AUTH
        _authenticate(client, server, secret)
        session, client = SubmissionSession(client), None
        return session
    except ssl.SSLCertVerificationError as exc:
        return Result(ResultKind.CERTIFICATE, stage, None, f"certificate of {server.host} does not verify: "
                      f"{exc.verify_message}; set smtp.ca_file for a private CA")
    except smtplib.SMTPResponseException as exc:  # AUTH and STARTTLS refusals, 421 anywhere
        return Result(ResultKind.REJECTED, stage, exc.smtp_code, _text(exc.smtp_error))
    except (smtplib.SMTPException, OSError) as exc:  # refused, timed out, dropped, TLS failures
        if isinstance(exc, OSError) and exc.errno == errno.EADDRNOTAVAIL and source_ip:
            return Result(ResultKind.NO_REPLY, stage, None,
                          f"cannot send from {source_ip}: {NOT_A_LOCAL_ADDRESS} ({exc.strerror})")
        return Result(ResultKind.NO_REPLY, stage, None, f"{type(exc).__name__}: {exc}")
    finally:
        if client is not None:
            with contextlib.suppress(OSError):
                client.close()


def submit(server: Submission, secret: str, message: EmailMessage, *, source_ip: str | None,
           timeout_s: float, context: ssl.SSLContext | None = None) -> Result:
    """Open a session and hand `message` over in it: one authenticated TLS session per message."""
    session = open_session(server, secret, source_ip=source_ip, timeout_s=timeout_s, context=context)
    if isinstance(session, Result):
        return session
    return session.hand_over(message)


# The password mechanisms we speak, best first: PLAIN sends the credentials in one command, LOGIN in three. Both
# are plain text inside the TLS session every submission has by then.
PASSWORD_MECHANISMS = ("PLAIN", "LOGIN")


def password_mechanism(offered: str) -> str | None:
    """The one mechanism to log in with, from the server's EHLO AUTH line (`offered`); None when it offers none we
    speak. One, never a list to walk: a refusal under one mechanism is the same refusal under the next, and each
    try counts as a failed login at the provider (which locks accounts)."""
    names = {name.upper() for name in offered.split()}
    return next((name for name in PASSWORD_MECHANISMS if name in names), None)


def _authenticate(client: smtplib.SMTP, server: Submission, secret: str) -> None:
    """One login, by one mechanism: a refusal is never followed by another try in the same session."""
    client.ehlo_or_helo_if_needed()  # implicit TLS (465) has not said EHLO yet
    if server.credential.auth == "xoauth2":  # a static token: XOAUTH2, as it always was
        _bearer(client, Mechanism.XOAUTH2, server.username, secret)
        return
    if server.credential.auth == "oauth2":
        offered = client.esmtp_features.get("auth", "")
        mechanism = choose(offered)
        if mechanism is None:
            raise smtplib.SMTPNotSupportedError(f"the server offers neither OAUTHBEARER nor XOAUTH2 (AUTH {offered})")
        _bearer(client, mechanism, server.username, secret)
        return
    _password_login(client, server, secret)


def _password_login(client: smtplib.SMTP, server: Submission, secret: str) -> None:
    # Not smtplib's login(): after a 535 it tries the next mechanism the server offers in the same session, so a
    # wrong password costs two failed logins per session.
    if not client.has_extn("auth"):
        raise smtplib.SMTPNotSupportedError("SMTP AUTH extension not supported by server.")  # smtplib's words
    offered = client.esmtp_features["auth"]
    mechanism = password_mechanism(offered)
    if mechanism is None:
        raise smtplib.SMTPNotSupportedError(f"{server.host} offers no password mechanism we speak (AUTH {offered}; "
                                            f"we speak {', '.join(PASSWORD_MECHANISMS)})")
    client.user, client.password = server.username, secret
    authobject = client.auth_plain if mechanism == "PLAIN" else client.auth_login
    client.auth(mechanism, authobject)


def _bearer(client: smtplib.SMTP, mechanism: Mechanism, username: str, token: str) -> None:
    """One AUTH with the token in the initial response: one attempt per session, whatever the reply."""
    code, reply = client.docmd("AUTH", f"{mechanism.value} {initial_response(mechanism, username, token)}")
    if code == 334:  # the server sent an error challenge: answer as the mechanism says to get the final reply
        code, reply = client.docmd(error_answer(mechanism))
    if code != 235:
        raise smtplib.SMTPAuthenticationError(code, reply)
